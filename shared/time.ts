/**
 * Timestamps on the wire are RFC 3339 with an explicit offset; the service emits UTC with `Z`.
 * Measurement times are integers of microseconds since the epoch (docs/api.md).
 */

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Microseconds since the epoch for an RFC 3339 timestamp with offset, or null when it is not one. */
export function parseTimestampMicros(text: string): number | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, z, sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return null;
  // setUTCFullYear, not Date.UTC: Date.UTC reads the years 0 to 99 as 1900 to 1999.
  const check = new Date(0);
  check.setUTCFullYear(year, month - 1, day);
  check.setUTCHours(hour, minute, Math.min(second, 59), 0);
  const ms = check.getTime();
  if (check.getUTCDate() !== day || check.getUTCMonth() !== month - 1) return null;
  let offsetMinutes = 0;
  if (!z) {
    const offH = Number(oh);
    const offM = Number(om);
    if (offH > 23 || offM > 59) return null;
    offsetMinutes = (sign === '-' ? -1 : 1) * (offH * 60 + offM);
  }
  const micros = frac ? Math.floor(Number(frac.padEnd(9, '0')) / 1000) : 0;
  const result = (ms - offsetMinutes * 60_000) * 1000 + micros;
  // Microseconds are exact numbers from about 1685 to 2255 only; a time outside is not one we keep.
  return Number.isSafeInteger(result) ? result : null;
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

function isoSeconds(ms: number): string {
  const d = new Date(ms);
  return (
    `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}` +
    `T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`
  );
}

/** `2026-01-05T10:00:00.123456Z`: the form of every measurement `ts`. */
export function formatMicros(micros: number): string {
  const ms = Math.floor(micros / 1_000_000) * 1000;
  const fraction = micros - ms * 1000;
  return `${isoSeconds(ms)}.${pad(fraction, 6)}Z`;
}

/** `2026-01-05T10:00:00Z`: the form of every other timestamp. */
export function formatSeconds(micros: number): string {
  return `${isoSeconds(Math.floor(micros / 1_000_000) * 1000)}Z`;
}

/** Same as formatSeconds, but passes null through (for optional timestamps). */
export function formatSecondsOrNull(micros: number | null | undefined): string | null {
  return micros === null || micros === undefined ? null : formatSeconds(micros);
}

export const MICROS_PER_SECOND = 1_000_000;
export const MICROS_PER_MINUTE = 60 * MICROS_PER_SECOND;
export const MICROS_PER_HOUR = 60 * MICROS_PER_MINUTE;
export const MICROS_PER_DAY = 24 * MICROS_PER_HOUR;
