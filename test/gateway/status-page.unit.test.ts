import { describe, expect, it } from '@jest/globals';
import { formatAge, renderStatusPage } from '../../gateway/src/status-page.ts';
import type { StatusSnapshot } from '../../gateway/src/status.ts';

const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);

function snapshot(over: Partial<StatusSnapshot> = {}): StatusSnapshot {
  return {
    buffer: { depth: 0, capacity: 1000, oldestAgeSeconds: null, deadLetters: 0 },
    uplink: {
      state: 'connected',
      since: NOW - 90_000,
      connects: 1,
      published: 10,
      rejected: 0,
      deferrals: 0,
      inflight: 0,
      lastError: null,
    },
    collectors: {},
    recent: [],
    ...over,
  };
}

describe('renderStatusPage', () => {
  it('escapes everything that comes from outside', () => {
    const html = renderStatusPage(
      snapshot({
        uplink: { ...snapshot().uplink, state: 'waiting', lastError: '<script>alert(1)</script> & "x"' },
        collectors: {
          serial: {
            received: 3,
            accepted: 1,
            invalid: 0,
            refused: 2,
            lost: 2,
            errors: 0,
            state: '<b>open</b>',
          },
        },
      }),
      { gatewayId: 'gw-1', version: '1.0.0', now: NOW },
    );
    expect(html).not.toContain('<script>');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;');
    expect(html).toContain('<td>&lt;b&gt;open&lt;/b&gt;</td>');
    expect(html).toContain('Readings were lost');
  });

  it('says when nothing is enabled or buffered, and ages read as a person says them', () => {
    const html = renderStatusPage(snapshot(), { gatewayId: 'gw-1', version: '1.0.0', now: NOW });
    expect(html).toContain('No collector is enabled.');
    expect(html).toContain('No reading since the gateway started.');
    expect(html).toContain('connected to the cloud (1 min)');
    expect([5, 125, 3 * 3600 + 300, 2 * 86_400 + 7200].map(formatAge)).toEqual([
      '5 s',
      '2 min',
      '3 h 5 min',
      '2 d 2 h',
    ]);
  });
});
