import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { ManualClock } from '../../../cloud/src/clock.ts';
import type { JobRow } from '../../../cloud/src/jobs/job-queue.ts';
import { startTestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { alarmMails, decodeMail, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';
import { addManager, escalatingRule, sendSettled, settleAlerts } from './settle.ts';

/**
 * Where alert-rule notifications go (docs/api/alert-rules.md#notifications-and-escalation): chat
 * services in their own shapes, posted to a listening server, and each escalation step sent once
 * when two cloud processes share the database.
 */
interface Received {
  path: string;
  contentType: string | undefined;
  body: any;
}

describe.each(DATABASES)('alert-rule notifications on %s', (db) => {
  let w: RulesWorld;
  let server: http.Server | undefined;
  afterEach(async () => {
    await w?.t.stop();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    server = undefined;
  });

  const send = (ts: number, value: number, type?: string) => sendSettled(w, ts, value, type);

  /** A rule "Fridge" on `channel`: critical above 8 after `delayMin`, the user told after `afterMin`. */
  async function fridgeRule(channel: string, delayMin: number, afterMin: number): Promise<string> {
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      {
        name: 'Fridge',
        channel_ids: [channel],
        conditions: [{ type: 'above', value: 8, delay_min: delayMin, severity: 'critical' }],
        notify: { steps: [{ after_min: afterMin, user_ids: [w.user.userId] }] },
      },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    return rule.json.id as string;
  }

  /** The channel's events, withdrawn ones included. */
  const eventsOf = async (channel: string) =>
    (await w.t.http.get(`/v1/events?channel_id=${channel}&include_withdrawn=true`, { token: w.user.token }))
      .json.data;

  /** A chat service stand-in: records every post; `refuse` answers 503 to the first post on a path. */
  async function chatServer(refuse: string[] = []): Promise<{ base: string; received: Received[] }> {
    const received: Received[] = [];
    const refused = new Set<string>();
    const listening = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const p = req.url ?? '';
        if (refuse.includes(p) && !refused.has(p)) {
          refused.add(p);
          res.statusCode = 503;
          res.end('busy');
          return;
        }
        received.push({ path: p, contentType: req.headers['content-type'], body: JSON.parse(body) });
        res.end('ok');
      });
    });
    server = listening;
    await new Promise<void>((r) => listening.listen(0, '127.0.0.1', r));
    return { base: `http://127.0.0.1:${(listening.address() as AddressInfo).port}`, received };
  }

  it('posts Slack, Teams and ntfy their own JSON shapes when an alarm opens and when it ends', async () => {
    const { base, received } = await chatServer(['/teams/workflow']);
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const channel = await send(T0, 3);
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      {
        name: 'Freezer',
        channel_ids: [channel],
        conditions: [{ type: 'above', value: 8, severity: 'critical' }],
        notify: {
          steps: [
            {
              after_min: 0,
              chat: [
                { type: 'slack', url: `${base}/services/T0/B0/x` },
                { type: 'teams', url: `${base}/teams/workflow` },
                { type: 'ntfy', url: `${base}/ntfy/kitchen-alarms` },
              ],
            },
          ],
        },
      },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    await send(T0 + MINUTE, 9);
    const [event] = await w.events(`?rule_id=${rule.json.id}`);
    const url = `${w.t.cloud.config.baseUrl}/app/events/${event.id}`;
    await eventually(() => received.length >= 2, 'the Slack and ntfy posts');

    // Teams answered 503 the first time: the post is retried, on the cloud's clock
    w.clock.set(T0 + 60 * MINUTE);
    await eventually(async () => {
      await w.t.cloud.services.jobs.drain();
      return received.some((r) => r.path === '/teams/workflow');
    }, 'the Teams post, retried');

    const byPath = (p: string) => received.filter((r) => r.path === p);
    for (const r of received) expect(r.contentType).toMatch(/^application\/json/);
    expect(byPath('/services/T0/B0/x').map((r) => r.body)).toEqual([
      {
        text: expect.stringMatching(/^CRITICAL: Fridge .*above 8 °C .*\(Freezer\)$/),
        blocks: [
          {
            type: 'section',
            text: { type: 'mrkdwn', text: expect.stringContaining(`<${url}|Open the event>`) },
          },
        ],
      },
    ]);
    const [teams] = byPath('/teams/workflow').map((r) => r.body);
    expect(teams).toMatchObject({
      type: 'message',
      attachments: [
        {
          contentType: 'application/vnd.microsoft.card.adaptive',
          content: {
            type: 'AdaptiveCard',
            version: '1.4',
            body: [
              { type: 'TextBlock', text: expect.stringMatching(/^CRITICAL: /), color: 'Attention' },
              { type: 'TextBlock', text: expect.stringContaining('Rule: Freezer') },
            ],
            actions: [{ type: 'Action.OpenUrl', url }],
          },
        },
      ],
    });
    // ntfy's JSON publishing: the server's root, the topic in the body
    expect(byPath('/ntfy').map((r) => r.body)).toEqual([
      {
        topic: 'kitchen-alarms',
        title: expect.stringMatching(/^CRITICAL: /),
        message: expect.stringContaining('Peak: 9 °C'),
        priority: 5,
        tags: ['rotating_light'],
        click: url,
      },
    ]);

    await send(T0 + 70 * MINUTE, 3);
    await eventually(async () => {
      await w.t.cloud.services.jobs.drain();
      return received.length >= 6;
    }, 'the three "Resolved" posts');
    expect(byPath('/services/T0/B0/x')[1]!.body.text).toMatch(/^Resolved: /);
    expect(byPath('/teams/workflow')[1]!.body.attachments[0].content.body[0]).toMatchObject({
      text: expect.stringMatching(/^Resolved: /),
      color: 'Good',
    });
    expect(byPath('/ntfy')[1]!.body).toMatchObject({
      topic: 'kitchen-alarms',
      title: expect.stringMatching(/^Resolved: /),
      priority: 3,
      tags: ['white_check_mark'],
    });
    expect(received).toHaveLength(6);
  });

  it('sends the "Resolved" notice once when a stalled run of its job wakes up after another run finished it', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      {
        name: 'Fridge',
        channel_ids: [channel],
        conditions: [{ type: 'above', value: 8, severity: 'critical' }],
        notify: { steps: [{ after_min: 0, user_ids: [w.user.userId] }] },
      },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    await send(T0 + MINUTE, 9);
    await send(T0 + 10 * MINUTE, 3);
    const subjects = async () =>
      (await w.outbox())
        .map((m) => /^Subject: (.*)$/m.exec(m)?.[1] ?? '')
        .filter((s) => /^Resolved: /.test(s));
    expect(await subjects()).toHaveLength(1);
    const job = await w.t.cloud.services.db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', 'alert.resolved')
      .executeTakeFirstOrThrow();
    expect(job.done_at).not.toBeNull();
    // The run that finished it was the second claim of this job; the first claimant, stalled past
    // its claim, now runs the job as it claimed it (not yet done).
    const queue = w.t.cloud.services.jobs as unknown as { execute(job: JobRow): Promise<void> };
    await queue.execute({ ...job, done_at: null });
    expect(await subjects()).toHaveLength(1);
  });

  it('tells nothing of an alarm withdrawn before its first step was due, and its "Resolved" job ends', async () => {
    // The "Resolved" job waits for the opening; an opening withdrawn first never goes out, and the
    // job used to queue itself again at a time already past: claimed at once, forever, ahead of
    // every other job of the queue.
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    await fridgeRule(channel, 10, 30);
    await send(T0 + MINUTE, 9);
    await send(T0 + 12 * MINUTE, 9);
    const events = () => eventsOf(channel);
    expect((await events()).map((e: { state: string }) => e.state)).toEqual(['open']);
    // A gateway's backlog arrives: back in range at 10:06, so neither excursion lasted 10 minutes.
    await send(T0 + 13 * MINUTE, 3);
    await send(T0 + 6 * MINUTE, 3);
    expect((await events()).map((e: { withdrawn_at: string | null }) => e.withdrawn_at !== null)).toEqual([
      true,
    ]);
    w.clock.set(T0 + 60 * MINUTE);
    await settleAlerts(w);
    expect(alarmMails(await w.outbox())).toEqual([]);
    const waiting = await w.t.cloud.services.db
      .selectFrom('jobs')
      .select('kind')
      .where('done_at', 'is', null)
      .execute();
    expect(waiting).toEqual([]);
  });

  it('stops waiting to tell "Resolved" when the opening failed for good (a day overdue)', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    await fridgeRule(channel, 0, 0);
    await send(T0 + MINUTE, 9);
    // As if the opening's job had run out of attempts without sending: notify_n stays 0.
    const { db: store } = w.t.cloud.services;
    await store.updateTable('alert_events').set({ notify_n: 0 }).execute();
    await send(T0 + 2 * MINUTE, 3);
    w.clock.set(T0 + 2 * MINUTE + 25 * 60 * MINUTE);
    await settleAlerts(w);
    const waiting = await store
      .selectFrom('jobs')
      .select('kind')
      .where('done_at', 'is', null)
      .where('kind', '=', 'alert.resolved')
      .execute();
    expect(waiting).toEqual([]);
  });

  it('keeps an alarm opened meanwhile when a pass that began before it evaluates the channel later', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const ruleId = await fridgeRule(channel, 30, 0);
    await send(T0 + MINUTE, 9);
    w.clock.set(T0 + 32 * MINUTE);
    await settleAlerts(w);
    const seq = await w.seqOf(channel);
    // a chunk of a pass that took its time at 10:20, before the alarm began
    await w.t.cloud.services.alertEngine.evaluate([seq], T0 + 20 * MINUTE);
    await settleAlerts(w);
    const ofRule = (await eventsOf(channel)).filter((e: { rule_id?: string }) => e.rule_id === ruleId);
    expect(
      ofRule.map((e: { state: string; withdrawn_at: string | null }) => [e.state, e.withdrawn_at]),
    ).toEqual([['open', null]]);
    const subjects = alarmMails(await w.outbox()).map((m) => /^Subject: (\S+)/m.exec(m)?.[1]);
    expect(subjects.filter((s) => s !== 'ALARM:')).toEqual(['CRITICAL:']);
  });

  it("names the alarm's own site and its time zone in the notice after the device moved away", async () => {
    w = await rulesWorld(db);
    await send(T0, 3);
    await w.t.http.patch(`/v1/sites/${w.siteId}`, { name: 'Kitchen' }, { token: w.user.token });
    const cellar = await w.t.http.post(
      '/v1/sites',
      { name: 'Cellar', vertical: 'food_service', timezone: 'Asia/Tokyo' },
      { token: w.user.token },
    );
    expect(cellar.status).toBe(201);
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      {
        name: 'Fridge',
        site_id: w.siteId,
        kind: 'temperature',
        conditions: [{ type: 'above', value: 8, severity: 'critical' }],
        notify: { steps: [{ after_min: 0, user_ids: [w.user.userId] }] },
      },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    await send(T0 + MINUTE, 9);
    w.clock.set(T0 + 10 * MINUTE);
    const moved = await w.t.http.post(
      `/v1/devices/${w.device.id}/move`,
      { to_site_id: cellar.json.id, effective_at: new Date((T0 + 10 * MINUTE) / 1000).toISOString() },
      { token: w.user.token },
    );
    expect(moved.status).toBe(200);
    await settleAlerts(w);
    const channels = alarmMails(await w.outbox())
      .map(decodeMail)
      .map((m) => [/^Subject: (.*)$/m.exec(m)?.[1]?.slice(0, 8), /^Channel: .*$/m.exec(m)?.[0]]);
    expect(channels).toEqual([
      ['CRITICAL', 'Channel: Fridge temperature at Kitchen'],
      ['Resolved', 'Channel: Fridge temperature at Kitchen'],
    ]);
    const resolved = decodeMail(alarmMails(await w.outbox())[1]!);
    expect(/^Since: .*$/m.exec(resolved)?.[0]).not.toMatch(/GMT\+9|JST/);
  });

  it('sends an escalation step once when copies of its job run together, on two cloud processes on PostgreSQL', async () => {
    w = await rulesWorld(db);
    await addManager(w);
    const channel = await send(T0, 3);
    const ruleId = await escalatingRule(w, channel, 30, 60);
    await send(T0 + MINUTE, 9);
    const [event] = await w.events(`?rule_id=${ruleId}`);

    // Step 2 is due at 10:31. Besides its own job, two more copies of it are queued, as a job
    // claimed again after its process stalled past the claim would be. On PostgreSQL a second
    // process of the installation runs them at the same moment as the first. Two processes in one
    // Node process cannot write one SQLite file at once (better-sqlite3 waits for a lock
    // synchronously, blocking the event loop the holder needs to commit), so there the first
    // process runs every copy.
    const jobs = w.t.cloud.services.jobs;
    for (let i = 0; i < 2; i++)
      await jobs.enqueue(
        w.t.cloud.services.db,
        'alert.notify',
        { event_id: event.id, n: 1 },
        T0 + 31 * MINUTE,
      );
    const second =
      db === 'postgres'
        ? await startTestCloud({ db, clock: new ManualClock(T0 + 31 * MINUTE), sameDatabaseAs: w.t })
        : null;
    try {
      w.clock.set(T0 + 31 * MINUTE);
      const runners = second ? [jobs, second.cloud.services.jobs] : [jobs];
      await eventually(async () => {
        await Promise.all(runners.map((r) => r.drain()));
        const pending = await w.t.cloud.services.db
          .selectFrom('jobs')
          .select('id')
          .where('kind', '=', 'alert.notify')
          .where('done_at', 'is', null)
          .where('failed_at', 'is', null)
          .where('run_at', '<=', T0 + 31 * MINUTE)
          .execute();
        return pending.length === 0;
      }, 'every due copy of step 2 to have run');

      const dir = path.join(w.t.database.dataDir, 'outbox');
      const critical = fs
        .readdirSync(dir)
        .map((f) => decodeMail(fs.readFileSync(path.join(dir, f), 'utf8')))
        .filter((m) => /^Subject: CRITICAL: /m.test(m))
        .map((m) => /^To: (.*)$/m.exec(m)![1])
        .sort();
      expect(critical).toEqual(['chef@example.com', 'manager@example.com']);
      // the chain goes on once: one reminder queued, an hour after step 2
      const next = await w.t.cloud.services.db
        .selectFrom('jobs')
        .select(['payload', 'run_at'])
        .where('kind', '=', 'alert.notify')
        .where('done_at', 'is', null)
        .where('failed_at', 'is', null)
        .execute();
      expect(next.map((j) => [JSON.parse(j.payload), Number(j.run_at)])).toEqual([
        [{ event_id: event.id, n: 2 }, T0 + 91 * MINUTE],
      ]);
    } finally {
      await second?.stop();
    }
  });
});
