import { randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes are drawn from the CSPRNG a page at a time: ids are minted on every request.
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset >= pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** Base62 text carrying at least `bytes` bytes of entropy (bytes below 248 = 4 × 62 keep it uniform). */
export function randomBase62(bytes: number): string {
  const length = Math.ceil((bytes * 8) / Math.log2(62));
  let out = '';
  while (out.length < length) {
    const b = randomByte();
    if (b < 248) out += BASE62[b % 62];
  }
  return out;
}

export type IdPrefix =
  | 'acc'
  | 'alr'
  | 'usr'
  | 'ses'
  | 'tok'
  | 'site'
  | 'dev'
  | 'snr'
  | 'chn'
  | 'evt'
  | 'rpt'
  | 'rsc'
  | 'rsr'
  | 'rcn'
  | 'sil'
  | 'int'
  | 'wh'
  | 'brg'
  | 'aud'
  | 'req'
  | 'job'
  | 'mov'
  | 'whd'
  | 'lc'
  | 'flg';

/** A random identifier with 128 bits of entropy, e.g. `dev_4kQ…` (docs/api.md). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(16)}`;
}

/**
 * The prefixes of every secret the cloud issues (user, device and integration tokens, webhook signing
 * secrets, session cookies, report recipients' links): a value that holds one is never logged.
 */
export const SECRET_PREFIXES = ['ua_live_', 'ds_live_', 'whk_', 'whsec_', 'oss_', 'rcp_'] as const;

/** A secret with 256 bits of entropy after its prefix (`ua_live_`, `ds_live_`, `whk_`, ...). */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBase62(32)}`;
}
