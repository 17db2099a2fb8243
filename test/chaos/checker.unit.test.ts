import { describe, expect, it } from '@jest/globals';
import { check } from '../../scripts/chaos/checker.ts';
import { readingKey } from '../../scripts/chaos/types.ts';

describe('the chaos checker', () => {
  const a = readingKey('dev-1', 'temperature', 1_000_000);
  const b = readingKey('dev-1', 'temperature', 2_000_000);
  const c = readingKey('dev-2', 'humidity', 1_000_000);

  it('finds nothing wrong when every acknowledged reading is stored once', () => {
    const r = check(
      [
        { key: a, acknowledged: true },
        { key: b, acknowledged: true },
      ],
      [a, b],
    );
    expect(r).toEqual({ acknowledged: 2, stored: 2, lost: [], duplicated: [], unexpected: [] });
  });

  it('counts an acknowledged reading the cloud does not have as lost', () => {
    expect(check([{ key: a, acknowledged: true }], []).lost).toEqual([a]);
  });

  it('does not count an unacknowledged reading as lost, stored or not', () => {
    expect(check([{ key: a, acknowledged: false }], [])).toMatchObject({ lost: [], unexpected: [] });
    expect(check([{ key: a, acknowledged: false }], [a])).toMatchObject({ lost: [], unexpected: [] });
  });

  it('counts a reading acknowledged on any of its retries as acknowledged', () => {
    const r = check(
      [
        { key: a, acknowledged: false },
        { key: a, acknowledged: true },
      ],
      [],
    );
    expect(r).toMatchObject({ acknowledged: 1, lost: [a] });
  });

  it('counts a reading stored twice as duplicated and one never sent as unexpected', () => {
    const r = check([{ key: a, acknowledged: true }], [a, a, c]);
    expect(r).toMatchObject({ stored: 3, duplicated: [a], unexpected: [c], lost: [] });
  });
});
