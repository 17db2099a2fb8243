import { describe, expect, it } from '@jest/globals';
import { decodeJournal, encodeJournal } from '../../../cloud/src/ingest/ingest.fold.ts';

/** The journal's bytes: written in JS on SQLite and by SQL (`float8send`) on PostgreSQL. */
describe('ingest journal payload', () => {
  const points = new Float64Array([1, 1_763_800_000_123_456, 4.25, 2 ** 40, 1_763_800_000_000_000, -70.5]);

  it('is big-endian float64, as PostgreSQL float8send writes it, and decodes back', () => {
    const bytes = encodeJournal(points);
    expect(bytes.subarray(0, 8)).toEqual(Buffer.from('3ff0000000000000', 'hex'));
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    expect([0, 1, 2, 3, 4, 5].map((i) => view.getFloat64(i * 8, false))).toEqual([...points]);
    expect(decodeJournal(bytes)).toEqual(points);
  });

  it('decodes from an unaligned buffer', () => {
    const shifted = Buffer.alloc(points.byteLength + 1);
    encodeJournal(points).copy(shifted, 1);
    expect(decodeJournal(shifted.subarray(1))).toEqual(points);
  });

  it('still reads the little-endian rows of earlier builds', () => {
    const legacy = Buffer.from(points.buffer.slice(0));
    expect(legacy[0]).toBe(0);
    expect(decodeJournal(legacy)).toEqual(points);
  });

  it('decodes an empty payload', () => {
    expect(decodeJournal(new Uint8Array(0))).toEqual(new Float64Array(0));
  });
});
