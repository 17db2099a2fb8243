import { describe, expect, it } from '@jest/globals';
import { backoffDelay } from '../../gateway/src/backoff.ts';

describe('backoffDelay', () => {
  it('doubles its ceiling per attempt up to the cap and draws from the upper half', () => {
    const top = (a: number) => backoffDelay(a, 1000, 60_000, () => 1);
    const bottom = (a: number) => backoffDelay(a, 1000, 60_000, () => 0);
    expect([0, 1, 2, 3, 6, 7, 50].map(top)).toEqual([1000, 2000, 4000, 8000, 60_000, 60_000, 60_000]);
    expect([0, 1, 6].map(bottom)).toEqual([500, 1000, 30_000]);
  });

  it('spreads gateways that retry at the same attempt', () => {
    const delays = new Set(Array.from({ length: 50 }, () => backoffDelay(3, 1000, 60_000)));
    expect(delays.size).toBeGreaterThan(10);
    for (const d of delays) expect(d).toBeGreaterThanOrEqual(4000);
  });
});
