import { describe, expect, it } from '@jest/globals';
import { compareLedger, type CloudPoint, type LedgerEntry } from '../../scripts/hil/ledger.ts';

/** The rig's check (scripts/hil/ledger.ts) finds each kind of fault it exists to find. */

const own = (ts: number, value: number, accepted = true): LedgerEntry => ({
  source: 'shelly-plus',
  device: 'plus',
  kind: 'temperature',
  label: null,
  value,
  ts,
  accepted,
});
const received = (value: number, accepted = true): LedgerEntry => ({
  source: 'shelly-gen1',
  device: 'gen1',
  kind: 'temperature',
  label: null,
  value,
  ts: null,
  accepted,
});
const point = (device: string, ts: number, value: number, label: string | null = null): CloudPoint => ({
  device,
  kind: 'temperature',
  label,
  ts,
  value,
});

describe('the HIL ledger check', () => {
  it('passes when every accepted reading is in the cloud once, by time or by value', () => {
    const ledger = [own(1000, 5), own(2000, 5.01), received(7), received(7), received(7.5)];
    const points = [
      point('plus', 1000, 5),
      point('plus', 2000, 5.01),
      point('gen1', 50, 7),
      point('gen1', 60, 7),
      point('gen1', 70, 7.5),
      // Another channel of the device is not the ledger's.
      point('plus', 1000, 61, 'x'),
    ];
    const result = compareLedger(ledger, points);
    expect(result.ok).toBe(true);
    expect(result.devices).toEqual([
      expect.objectContaining({ device: 'plus', sent: 2, accepted: 2, inCloud: 2, lost: 0 }),
      expect.objectContaining({ device: 'gen1', sent: 3, accepted: 3, inCloud: 3, lost: 0 }),
    ]);
  });

  it('counts lost, duplicated and unexpected readings', () => {
    const ledger = [own(1000, 5), own(2000, 5.01), own(3000, 5.02, false), received(7), received(8)];
    const points = [
      point('plus', 1000, 5),
      point('plus', 1000, 5), // twice
      point('plus', 4000, 9), // never sent
      point('plus', 3000, 5.02), // sent, not acknowledged: fine either way
      point('gen1', 50, 7),
      point('gen1', 60, 7), // the same gateway-timed reading twice
    ];
    const result = compareLedger(ledger, points);
    expect(result.ok).toBe(false);
    expect(result.devices[0]).toMatchObject({ device: 'plus', lost: 1, duplicated: 1, unexpected: 1 });
    expect(result.devices[1]).toMatchObject({ device: 'gen1', lost: 1, duplicated: 1, unexpected: 0 });
  });

  it('fails a wrong value at a sent time, and a device that had nothing accepted', () => {
    expect(compareLedger([own(1000, 5)], [point('plus', 1000, 6)]).devices[0]).toMatchObject({
      lost: 0,
      unexpected: 1,
    });
    expect(compareLedger([own(1000, 5, false)], []).ok).toBe(false);
    expect(compareLedger([], []).ok).toBe(false);
  });
});
