import { describe, expect, it } from '@jest/globals';
import { formatMicros, formatSeconds, parseTimestampMicros } from '../../shared/time.ts';

describe('RFC 3339 timestamps', () => {
  it('keeps the year as written, round trip included', () => {
    for (const text of [
      '1700-03-01T00:00:00Z',
      '1969-12-31T23:59:59Z',
      '2026-01-05T10:00:00Z',
      '2250-12-31T00:00:00Z',
    ]) {
      const micros = parseTimestampMicros(text);
      expect(micros).not.toBeNull();
      expect(formatSeconds(micros!)).toBe(text);
    }
    expect(formatMicros(parseTimestampMicros('2026-01-05T11:00:00.1234567+01:00')!)).toBe(
      '2026-01-05T10:00:00.123456Z',
    );
  });

  it('refuses times whose microseconds are not exact numbers, rather than reading another year', () => {
    for (const text of [
      '0001-01-01T00:00:00Z',
      '0099-06-01T00:00:00Z',
      '1600-01-01T00:00:00Z',
      '9999-12-31T23:59:59Z',
    ]) {
      expect([text, parseTimestampMicros(text)]).toEqual([text, null]);
    }
  });

  it('refuses dates that do not exist and offsets out of range', () => {
    for (const text of [
      '2026-02-30T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T00:00:00+24:00',
    ]) {
      expect([text, parseTimestampMicros(text)]).toEqual([text, null]);
    }
  });
});
