import fs from 'node:fs';
import type { Logger } from '../logger.ts';

/**
 * DATA_DIR holds the SQLite database, the mail outbox and the bridge CA's key: it is made readable
 * by the service's user only (0700), its parents too when they are missing.
 */
export function createDataDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Warns about each of `paths` that exists and that other users may read or write (a DATA_DIR or
 * database made by an older version or by hand). It changes nothing: an operator may share them on
 * purpose, with a backup group for example. docs/operations.md says how to tighten them.
 */
export function warnIfReadableByOthers(paths: string[], log: Logger): void {
  for (const path of paths) {
    let mode: number;
    try {
      mode = fs.statSync(path).mode & 0o777;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if ((mode & 0o077) !== 0) {
      log.warn({ path, mode: mode.toString(8) }, 'readable by other users');
    }
  }
}
