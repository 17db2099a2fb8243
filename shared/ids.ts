import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Base62 text of `bytes` random bytes (rejection-free: each byte maps through a 62-symbol wheel of 248). */
export function randomBase62(bytes: number): string {
  // Every symbol carries log2(62) ≈ 5.95 bits; draw bytes below 248 (= 4 × 62) so the mapping is uniform.
  const length = Math.ceil((bytes * 8) / 5.95);
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length)) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

export type IdPrefix =
  | 'acc'
  | 'usr'
  | 'ses'
  | 'tok'
  | 'site'
  | 'dev'
  | 'snr'
  | 'chn'
  | 'evt'
  | 'rpt'
  | 'sil'
  | 'int'
  | 'wh'
  | 'brg'
  | 'aud'
  | 'req'
  | 'job'
  | 'lc';

/** A random identifier with 128 bits of entropy, e.g. `dev_4kQ…` (decisions, "General"). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(16)}`;
}

/** A secret with 256 bits of entropy after its prefix (`ua_live_`, `ds_live_`, `whk_`, ...). */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBase62(32)}`;
}
