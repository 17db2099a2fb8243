import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { startTestCloud, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES, tempDir } from '../../helpers/databases.ts';

describe.each(DATABASES)('DATA_DIR on %s', (db) => {
  let t: TestCloud | undefined;
  let root: string;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
    fs.rmSync(root, { recursive: true, force: true });
  });

  const mode = (file: string) => fs.statSync(file).mode & 0o777;

  async function start(dataDir: string): Promise<TestCloud> {
    return startTestCloud({
      db,
      env: {
        DATA_DIR: dataDir,
        ...(db === 'sqlite' ? { DATABASE_URL: `sqlite:${path.join(dataDir, 'cloud.db')}` } : {}),
      },
    });
  }

  it('is created readable by the service only (0700), the SQLite files and the outbox mail 0600', async () => {
    root = tempDir();
    const dataDir = path.join(root, 'var', 'monitor');
    t = await start(dataDir);
    expect(mode(dataDir)).toBe(0o700);
    if (db === 'sqlite') {
      for (const file of ['cloud.db', 'cloud.db-wal', 'cloud.db-shm'])
        expect([file, mode(path.join(dataDir, file))]).toEqual([file, 0o600]);
    }
    const mail = t.nextMail('a@example.com');
    await t.http.post('/v1/auth/request', { email: 'a@example.com' });
    const sent = await mail;
    expect(mode(path.join(dataDir, 'outbox'))).toBe(0o700);
    expect(mode(sent.file!)).toBe(0o600);
  });

  it('warns, and changes nothing, when an existing DATA_DIR or database is open to other users', async () => {
    root = tempDir();
    const dataDir = path.join(root, 'data');
    t = await start(dataDir);
    await t.stop();
    fs.chmodSync(dataDir, 0o755);
    if (db === 'sqlite') fs.chmodSync(path.join(dataDir, 'cloud.db'), 0o644);
    t = await start(dataDir);
    // SQLite gives the -wal and -shm files it makes the database file's mode.
    const sqliteFiles = ['cloud.db', 'cloud.db-wal', 'cloud.db-shm'].map((f) => path.join(dataDir, f));
    const shared = db === 'sqlite' ? [dataDir, ...sqliteFiles] : [dataDir];
    const warned = t.logs.filter((l) => l.msg === 'readable by other users').map((l) => l.path);
    expect(warned.sort()).toEqual(shared.sort());
    expect(mode(dataDir)).toBe(0o755);
  });
});
