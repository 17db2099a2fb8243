import { afterEach } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { formatSeconds } from '../../../shared/time.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import type { DbKind } from '../../helpers/databases.ts';
import { createDevice, createSite, type CreatedDevice } from '../../helpers/fixtures.ts';
import { holdInTransaction, type Holder } from '../../helpers/row-locks.ts';

export const T0 = Date.UTC(2026, 0, 5, 10, 0, 0) * 1000;
export const MINUTE = 60 * 1_000_000;
export const at = (micros: number) => formatSeconds(micros);

/**
 * One account with a food-service site (temperature 0..5 °C, grace 30 min, no data after 60 min)
 * and one device, on a cloud whose clock moves only when the test says. Ingest goes through the
 * real HTTP route; `settle()` waits for the rule engine instead of sleeping.
 */
export interface RulesWorld {
  t: TestCloud;
  clock: ManualClock;
  user: SignedIn;
  siteId: string;
  device: CreatedDevice;
  /** POST /v1/ingest of one reading at measurement time `ts`; answers the channel id. */
  send(ts: number, value: number, type?: string, device?: CreatedDevice): Promise<string>;
  /** Runs the rule engine until nothing is left to evaluate (what the tick and ingest's kick do). */
  settle(): Promise<void>;
  /** Moves the clock to `micros` and runs the tick. */
  tickAt(micros: number): Promise<void>;
  events(query?: string): Promise<any[]>;
  sensor(channelId: string): Promise<any>;
  /** The channel's sensor `seq`, the key the engines evaluate by. */
  seqOf(channelId: string): Promise<number>;
  /** The mails written to the outbox so far (after the job queue ran), decoded. */
  outbox(): Promise<string[]>;
}

/** An RFC 5322 message as text: encoded-word headers and a quoted-printable body decoded. */
export function decodeMail(eml: string): string {
  const qp = (text: string) =>
    Buffer.from(
      text
        .replace(/=\r?\n/g, '')
        .replace(/=([0-9A-F]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString('utf8');
  const split = eml.search(/\r?\n\r?\n/);
  const head = eml
    .slice(0, split)
    .replace(/\?=\r?\n[ \t]+=\?/g, '?==?') // adjacent encoded words: the folding between them goes
    .replace(/\r?\n[ \t]+/g, ' ')
    .replace(/=\?UTF-8\?Q\?(.*?)\?=/gi, (_m, w: string) => qp(w.replace(/_/g, ' ')));
  const body = eml.slice(split);
  return head + (/^Content-Transfer-Encoding: quoted-printable$/im.test(head) ? qp(body) : body);
}

export async function rulesWorld(
  db: DbKind,
  options: { env?: Record<string, string>; vertical?: string } = {},
): Promise<RulesWorld> {
  const clock = new ManualClock(T0);
  const t = await startTestCloud({
    db,
    clock,
    env: { RATE_LIMIT_INGEST_PER_MIN: '100000', RATE_LIMIT_MGMT_PER_MIN: '100000', ...options.env },
  });
  const user = await signUp(t, 'chef@example.com');
  const siteId = (await createSite(t, user.token, { vertical: options.vertical ?? 'food_service' })).id;
  const device = await createDevice(t, user.token, siteId, { local_id: 'fridge-1', name: 'Fridge' });
  const sensorIds = new Map<string, string>();
  const world: RulesWorld = {
    t,
    clock,
    user,
    siteId,
    device,
    async send(ts, value, type = 'temperature', dev = device) {
      const answer = await t.http.post(
        '/v1/ingest',
        { device: dev.local_id, ts: new Date(ts / 1000).toISOString(), measurements: [{ type, value }] },
        { token: dev.ingest_token },
      );
      if (answer.status !== 200) throw new Error(`ingest: ${answer.status} ${answer.text}`);
      return answer.json.channels[0].channel_id as string;
    },
    settle: () => t.cloud.services.rules.drain(),
    async tickAt(micros) {
      clock.set(micros);
      await t.cloud.services.rules.tick();
    },
    async events(query = '') {
      const answer = await t.http.get(`/v1/events${query}`, { token: user.token });
      if (answer.status !== 200) throw new Error(`events: ${answer.status} ${answer.text}`);
      return answer.json.data;
    },
    async seqOf(channelId) {
      const row = await t.cloud.services.db
        .selectFrom('sensors')
        .select('seq')
        .where('channel_id', '=', channelId)
        .executeTakeFirstOrThrow();
      return row.seq;
    },
    async sensor(channelId) {
      let id = sensorIds.get(channelId);
      if (!id) {
        const row = await t.cloud.services.db
          .selectFrom('sensors')
          .select('id')
          .where('channel_id', '=', channelId)
          .executeTakeFirstOrThrow();
        id = row.id;
        sensorIds.set(channelId, id);
      }
      return (await t.http.get(`/v1/sensors/${id}`, { token: user.token })).json;
    },
    async outbox() {
      await t.cloud.services.jobs.drain();
      const dir = path.join(t.database.dataDir, 'outbox');
      if (!fs.existsSync(dir)) return [];
      return fs
        .readdirSync(dir)
        .sort()
        .map((f) => decodeMail(fs.readFileSync(path.join(dir, f), 'utf8')));
    },
  };
  return world;
}

/** Alarm mails only (the sign-in mail of signUp is in the outbox too). */
export function alarmMails(mails: string[]): string[] {
  return mails.filter((m) => !/^Subject: Your sign-in code/m.test(m));
}

/**
 * For a race on PostgreSQL: a world per test and a transaction of the test's own on its database,
 * held while the test's request waits behind it; both closed after the test.
 */
export function raceEachTest(): {
  world(): Promise<RulesWorld>;
  hold(sql: string, params: unknown[]): Promise<Holder>;
} {
  let w: RulesWorld | undefined;
  let holder: Holder | undefined;
  afterEach(async () => {
    await holder?.end();
    await w?.t.stop();
    holder = w = undefined;
  });
  return {
    world: async () => (w = await rulesWorld('postgres')),
    hold: async (sql, params) => (holder = await holdInTransaction(w!.t.database, sql, params)),
  };
}
