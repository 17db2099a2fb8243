import { afterEach, describe, expect, it } from '@jest/globals';
import { signUp } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';
import { auditOf, createDevice } from '../../helpers/fixtures.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';
import { sendSettled, settleAlerts } from './settle.ts';

/**
 * The alert-rule routes as an API client meets them (docs/api/alert-rules.md): the scope they need,
 * their 404, their audit entries, their OpenAPI description, and their events beside the simple
 * rule's on the events endpoints.
 */
describe.each(DATABASES)('alert rule routes on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  const settle = () => settleAlerts(w);

  const send = (ts: number, value: number, type?: string) => sendSettled(w, ts, value, type);

  async function tokenOf(scope: 'read' | 'write'): Promise<string> {
    const answer = await w.t.http.post('/v1/tokens', { label: scope, scope }, { token: w.user.token });
    expect(answer.status).toBe(201);
    return answer.json.token as string;
  }

  /** A rule's notification as stored: its chat URLs whole. */
  async function storedNotify(id: string): Promise<{ steps: { chat: { type: string; url: string }[] }[] }> {
    const row = await w.t.cloud.services.db
      .selectFrom('alert_rules')
      .select('notify')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return JSON.parse(row.notify) as { steps: { chat: { type: string; url: string }[] }[] };
  }

  const ruleOn = (channel: string) => ({
    name: 'Fridge',
    channel_ids: [channel],
    conditions: [{ type: 'above', value: 8, severity: 'critical' }],
  });

  it('changes rules with the write scope only; a read token lists and reads them', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const read = await tokenOf('read');
    const write = await tokenOf('write');

    const refused = await w.t.http.post('/v1/alert-rules', ruleOn(channel), { token: read });
    expect([refused.status, refused.json.error.code]).toEqual([403, 'forbidden']);
    expect(refused.json.error.request_id).toEqual(expect.any(String));

    const created = await w.t.http.post('/v1/alert-rules', ruleOn(channel), { token: write });
    expect(created.status).toBe(201);
    const id = created.json.id as string;

    const patch = await w.t.http.patch(`/v1/alert-rules/${id}`, { name: 'Renamed' }, { token: read });
    expect([patch.status, patch.json.error.code]).toEqual([403, 'forbidden']);
    const del = await w.t.http.delete(`/v1/alert-rules/${id}`, { token: read });
    expect([del.status, del.json.error.code]).toEqual([403, 'forbidden']);

    const one = await w.t.http.get(`/v1/alert-rules/${id}`, { token: read });
    expect([one.status, one.json]).toEqual([200, created.json]);
    const list = await w.t.http.get('/v1/alert-rules', { token: read });
    expect([list.status, list.json.data]).toEqual([200, [created.json]]);

    expect(
      (await w.t.http.patch(`/v1/alert-rules/${id}`, { name: 'Renamed' }, { token: write })).status,
    ).toBe(200);
    expect((await w.t.http.delete(`/v1/alert-rules/${id}`, { token: write })).status).toBe(204);
  });

  it('answers 404 alert_rule_not_found for an unknown or deleted rule on every route, before a bad body', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const created = await w.t.http.post('/v1/alert-rules', ruleOn(channel), { token: w.user.token });
    const id = created.json.id as string;
    expect((await w.t.http.delete(`/v1/alert-rules/${id}`, { token: w.user.token })).status).toBe(204);
    for (const rule of ['alr_unknown', id]) {
      for (const answer of [
        await w.t.http.get(`/v1/alert-rules/${rule}`, { token: w.user.token }),
        await w.t.http.patch(`/v1/alert-rules/${rule}`, { name: 'x' }, { token: w.user.token }),
        await w.t.http.patch(`/v1/alert-rules/${rule}`, { colour: 'red' }, { token: w.user.token }),
        await w.t.http.delete(`/v1/alert-rules/${rule}`, { token: w.user.token }),
      ]) {
        expect([answer.status, answer.json.error.code]).toEqual([404, 'alert_rule_not_found']);
        expect(answer.json.error.message).toEqual(expect.any(String));
        expect(answer.json.error.request_id).toEqual(expect.any(String));
      }
    }
    expect((await w.t.http.get('/v1/alert-rules', { token: w.user.token })).json.data).toEqual([]);
  });

  it("refuses targets that are not the account's or not public: users, webhooks, chat URLs", async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const other = await signUp(w.t, 'other@example.com');
    const hook = await w.t.http.post(
      '/v1/webhooks',
      { url: 'https://8.8.8.8/hook', events: ['alarm.opened'] },
      { token: other.token },
    );
    expect(hook.status).toBe(201);
    const withStep = (step: Record<string, unknown>) => ({
      ...ruleOn(channel),
      notify: { steps: [{ after_min: 0, ...step }] },
    });
    const post = (body: unknown) => w.t.http.post('/v1/alert-rules', body, { token: w.user.token });
    const refused = async (body: unknown, status: number, code: string) => {
      const answer = await post(body);
      expect([answer.status, answer.json.error?.code]).toEqual([status, code]);
      expect(answer.json.error.message).toEqual(expect.any(String));
    };
    for (const id of ['usr_nobody', other.userId])
      await refused(withStep({ user_ids: [w.user.userId, id] }), 404, 'user_not_found');
    for (const id of ['wh_nobody', hook.json.id])
      await refused(withStep({ webhook_ids: [id] }), 404, 'webhook_not_found');
    for (const url of ['http://127.0.0.1:9/hook', 'https://10.1.2.3/services/T/B/x', 'http://[::1]/x'])
      await refused(withStep({ chat: [{ type: 'slack', url }] }), 422, 'invalid_webhook_url');
    await refused(
      withStep({ chat: [{ type: 'ntfy', url: 'ftp://ntfy.example.com/t' }] }),
      400,
      'invalid_request',
    );
    await refused(
      withStep({ chat: [{ type: 'discord', url: 'https://8.8.8.8/x' }] }),
      400,
      'invalid_request',
    );

    const created = await post(withStep({ chat: [{ type: 'teams', url: 'https://8.8.8.8/workflows/x' }] }));
    expect(created.status).toBe(201);
    const patch = await w.t.http.patch(
      `/v1/alert-rules/${created.json.id}`,
      { notify: { steps: [{ after_min: 0, chat: [{ type: 'ntfy', url: 'http://192.168.1.10/alarms' }] }] } },
      { token: w.user.token },
    );
    expect([patch.status, patch.json.error.code]).toEqual([422, 'invalid_webhook_url']);
    // The details name the field, so the dashboard shows the message beside it.
    expect(patch.json.error.details[0].path).toBe('notify.steps.0.chat.0.url');
    expect((await w.t.http.get(`/v1/alert-rules/${created.json.id}`, { token: w.user.token })).json).toEqual(
      created.json,
    );
    expect((await w.t.http.get('/v1/alert-rules', { token: w.user.token })).json.data).toHaveLength(1);
  });

  it('never shows a chat URL whole, in answers or the audit trail; a masked URL sent back keeps the rule’s', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const slack = 'https://8.8.8.8/services/T000/B000/XXXXsecretYYYY';
    const ntfy = 'https://8.8.8.8/alarms';
    const stored = async (id: string) => (await storedNotify(id)).steps[0]!.chat;
    const created = await w.t.http.post(
      '/v1/alert-rules',
      {
        ...ruleOn(channel),
        notify: {
          steps: [
            {
              after_min: 0,
              chat: [
                { type: 'slack', url: slack },
                { type: 'ntfy', url: ntfy },
              ],
            },
          ],
        },
      },
      { token: w.user.token },
    );
    expect(created.status).toBe(201);
    const masked = [
      { type: 'slack', url: 'https://8.8.8.8/…YYYY' },
      { type: 'ntfy', url: 'https://8.8.8.8/…' },
    ];
    expect(created.json.notify.steps[0].chat).toEqual(masked);
    const id = created.json.id as string;
    const read = await tokenOf('read');
    const answers = [
      await w.t.http.get(`/v1/alert-rules/${id}`, { token: read }),
      await w.t.http.get('/v1/alert-rules', { token: read }),
      await w.t.http.get('/v1/accounts/me/audit', { token: read }),
      await w.t.http.get(`/app/api/alert-rules/${id}`, { cookie: `os_session=${w.user.cookie}` }),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.text).not.toContain('secret');
      expect(answer.text).not.toContain('/alarms');
    }
    expect(answers[0]!.json.notify.steps[0].chat).toEqual(masked);
    expect(await stored(id)).toEqual([
      { type: 'slack', url: slack },
      { type: 'ntfy', url: ntfy },
    ]);

    // A client that read the rule and writes it back changes what it changed, not the URLs.
    const renamed = await w.t.http.patch(
      `/v1/alert-rules/${id}`,
      { name: 'Renamed', notify: answers[0]!.json.notify },
      { token: w.user.token },
    );
    expect(renamed.status).toBe(200);
    expect(renamed.json.notify.steps[0].chat).toEqual(masked);
    expect(await stored(id)).toEqual([
      { type: 'slack', url: slack },
      { type: 'ntfy', url: ntfy },
    ]);
    // A whole URL replaces the one in its place; the other, sent back masked, stays.
    const replaced = await w.t.http.patch(
      `/v1/alert-rules/${id}`,
      {
        notify: {
          steps: [
            {
              after_min: 0,
              chat: [{ type: 'slack', url: 'https://8.8.8.8/services/T1/B1/NEWsecretZZZZ' }, masked[1]],
            },
          ],
        },
      },
      { token: w.user.token },
    );
    expect(replaced.status).toBe(200);
    expect(replaced.json.notify.steps[0].chat[0]).toEqual({ type: 'slack', url: 'https://8.8.8.8/…ZZZZ' });
    expect(await stored(id)).toEqual([
      { type: 'slack', url: 'https://8.8.8.8/services/T1/B1/NEWsecretZZZZ' },
      { type: 'ntfy', url: ntfy },
    ]);

    // A mask that is not one of the rule's (another type's, a stale one, or on a new rule) is refused.
    for (const [method, path, chat] of [
      ['PATCH', `/v1/alert-rules/${id}`, [{ type: 'teams', url: masked[1]!.url }]],
      ['PATCH', `/v1/alert-rules/${id}`, [masked[0]]],
      ['POST', '/v1/alert-rules', [{ type: 'ntfy', url: 'https://8.8.8.8/%E2%80%A6' }]],
    ] as const) {
      const body = {
        ...(method === 'POST' ? ruleOn(channel) : {}),
        notify: { steps: [{ after_min: 0, chat }] },
      };
      const refused = await w.t.http.call(method, path, body, { token: w.user.token });
      expect([refused.status, refused.json.error.code]).toEqual([400, 'invalid_request']);
      expect(refused.json.error.details).toEqual([
        {
          path: 'notify.steps.0.chat.0.url',
          message: 'a masked URL that is not one of the rule’s: send the whole URL',
        },
      ]);
    }
  });

  it('tells two chat URLs with one mask apart by their place, and masks whole URLs in older audit entries', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const warn = 'https://8.8.8.8/kitchen-warn';
    const crit = 'https://8.8.8.8/kitchen-crit';
    const step = (after: number, url: string) => ({ after_min: after, chat: [{ type: 'ntfy', url }] });
    const created = await w.t.http.post(
      '/v1/alert-rules',
      { ...ruleOn(channel), notify: { steps: [step(0, warn), step(30, crit)] } },
      { token: w.user.token },
    );
    expect(created.status).toBe(201);
    const id = created.json.id as string;
    const masked = created.json.notify;
    expect(masked.steps.map((s: { chat: { url: string }[] }) => s.chat[0]!.url)).toEqual([
      'https://8.8.8.8/…',
      'https://8.8.8.8/…',
    ]);
    const storedUrls = async () => (await storedNotify(id)).steps.map((s) => s.chat.map((c) => c.url));

    // Sent back as read: each mask is the URL in its own place, not the first with that mask.
    const renamed = await w.t.http.patch(
      `/v1/alert-rules/${id}`,
      { name: 'Renamed', notify: masked },
      { token: w.user.token },
    );
    expect(renamed.status).toBe(200);
    expect(await storedUrls()).toEqual([[warn], [crit]]);
    // In a new place the mask could be either: refused, nothing changes.
    const ambiguous = await w.t.http.patch(
      `/v1/alert-rules/${id}`,
      { notify: { steps: [...masked.steps, step(60, 'https://8.8.8.8/…')] } },
      { token: w.user.token },
    );
    expect([ambiguous.status, ambiguous.json.error.code]).toEqual([400, 'invalid_request']);
    expect(ambiguous.json.error.details[0].path).toBe('notify.steps.2.chat.0.url');
    expect(await storedUrls()).toEqual([[warn], [crit]]);

    // An entry written whole (as entries made before chat URLs were masked are) reads masked.
    await w.t.cloud.services.audit.record(w.t.cloud.services.db, {
      accountId: w.user.accountId,
      kind: 'alert_rule.changed',
      by: w.user.userId,
      target: id,
      details: {
        before: {
          notify: { steps: [step(0, 'https://8.8.8.8/services/T/B/OLDsecretWXYZ')], repeat_every_min: null },
        },
        after: null,
      },
      ts: w.clock.nowMicros(),
    });
    const audit = await w.t.http.get('/v1/accounts/me/audit?kind=alert_rule.changed', {
      token: w.user.token,
    });
    expect(audit.text).not.toContain('OLDsecret');
    expect(audit.text).not.toContain('kitchen-');
    const written = audit.json.data.find((e: { details: { after: unknown } }) => e.details.after === null);
    expect(written.details.before.notify.steps[0].chat[0].url).toBe('https://8.8.8.8/…WXYZ');
  });

  it('changes and disables a rule whose webhook or channel was deleted since; a firing skips the webhook', async () => {
    w = await rulesWorld(db, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const channel = await send(T0, 3);
    const hook = await w.t.http.post(
      '/v1/webhooks',
      { url: 'http://127.0.0.1:9/hook', events: ['alarm.opened'] },
      { token: w.user.token },
    );
    expect(hook.status).toBe(201);
    const other = await createDevice(w.t, w.user.token, w.siteId, { local_id: 'fridge-2', name: 'Cellar' });
    const otherChannel = await w.send(T0, 3, 'temperature', other);
    const rule = await w.t.http.post(
      '/v1/alert-rules',
      {
        ...ruleOn(channel),
        channel_ids: [channel, otherChannel],
        notify: { steps: [{ after_min: 0, user_ids: [w.user.userId], webhook_ids: [hook.json.id] }] },
      },
      { token: w.user.token },
    );
    expect(rule.status).toBe(201);
    const id = rule.json.id as string;
    const patch = (body: unknown) => w.t.http.patch(`/v1/alert-rules/${id}`, body, { token: w.user.token });

    expect((await w.t.http.delete(`/v1/webhooks/${hook.json.id}`, { token: w.user.token })).status).toBe(204);
    const renamed = await patch({ name: 'Fridge and cellar' });
    expect([renamed.status, renamed.json.notify.steps[0].webhook_ids]).toEqual([200, [hook.json.id]]);
    expect((await w.t.http.delete(`/v1/devices/${other.id}`, { token: w.user.token })).status).toBe(204);
    expect((await patch({ enabled: false })).status).toBe(200);
    expect((await patch({ enabled: true })).status).toBe(200);
    // what a change adds is still looked up
    const added = await patch({
      notify: { steps: [{ after_min: 0, webhook_ids: [hook.json.id, 'wh_nobody'] }] },
    });
    expect([added.status, added.json.error.code]).toEqual([404, 'webhook_not_found']);
    const addedChannel = await patch({ channel_ids: [channel, otherChannel, 'chn_nope'] });
    expect([addedChannel.status, addedChannel.json.error.code]).toEqual([404, 'channel_not_found']);

    // the rule fires: the mail goes out, the deleted webhook is skipped, nothing fails
    await send(T0 + MINUTE, 9);
    const mails = (await w.outbox()).filter((m) => /^Subject: CRITICAL: /m.test(m));
    expect(mails).toHaveLength(1);
    const rows = await w.t.cloud.services.db.selectFrom('jobs').select(['kind', 'failed_at']).execute();
    expect(rows.filter((j) => j.failed_at !== null)).toEqual([]);
    expect(await w.t.cloud.services.db.selectFrom('webhook_deliveries').select('id').execute()).toEqual([]);
  });

  it('answers 422 unknown_kind for a kind that is not a measurement type', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const bySite = {
      name: 'All fridges',
      site_id: w.siteId,
      kind: 'temprature',
      conditions: [{ type: 'above', value: 8, severity: 'critical' }],
    };
    const refused = await w.t.http.post('/v1/alert-rules', bySite, { token: w.user.token });
    expect([refused.status, refused.json.error.code]).toEqual([422, 'unknown_kind']);
    expect(refused.json.error.message).toContain('temprature');
    const created = await w.t.http.post(
      '/v1/alert-rules',
      { ...bySite, kind: 'humidity' },
      { token: w.user.token },
    );
    expect(created.status).toBe(201);
    const patched = await w.t.http.patch(
      `/v1/alert-rules/${created.json.id}`,
      { kind: 'humidty' },
      { token: w.user.token },
    );
    expect([patched.status, patched.json.error.code]).toEqual([422, 'unknown_kind']);
    const onChannel = await w.t.http.patch(
      `/v1/alert-rules/${created.json.id}`,
      { channel_ids: [channel] },
      { token: w.user.token },
    );
    expect(onChannel.status).toBe(200);
  });

  it("answers 404 site_not_found for another account's or an unknown site before a bad body", async () => {
    w = await rulesWorld(db);
    const other = await signUp(w.t, 'other@example.com');
    const otherSite = await w.t.http.post(
      '/v1/sites',
      { name: 'Elsewhere', vertical: 'generic' },
      { token: other.token },
    );
    expect(otherSite.status).toBe(201);
    const bad = {
      name: 'Fridges',
      kind: 'temperature',
      conditions: [{ type: 'above', value: 8, severity: 'catastrophic' }],
    };
    for (const site of ['site_nope', otherSite.json.id]) {
      const answer = await w.t.http.post(
        '/v1/alert-rules',
        { ...bad, site_id: site },
        { token: w.user.token },
      );
      expect([answer.status, answer.json.error.code]).toEqual([404, 'site_not_found']);
    }
    const ok = await w.t.http.post('/v1/alert-rules', { ...bad, site_id: w.siteId }, { token: w.user.token });
    expect([ok.status, ok.json.error.code]).toEqual([400, 'invalid_request']);
    const created = await w.t.http.post(
      '/v1/alert-rules',
      { ...bad, site_id: w.siteId, conditions: [{ type: 'above', value: 8, severity: 'critical' }] },
      { token: w.user.token },
    );
    expect(created.status).toBe(201);
    const patched = await w.t.http.patch(
      `/v1/alert-rules/${created.json.id}`,
      { site_id: 'site_nope', colour: 'red' },
      { token: w.user.token },
    );
    expect([patched.status, patched.json.error.code]).toEqual([404, 'site_not_found']);
  });

  it('audit-logs each change with the rule before and after', async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const created = await w.t.http.post('/v1/alert-rules', ruleOn(channel), { token: w.user.token });
    const id = created.json.id as string;
    w.clock.set(T0 + MINUTE);
    const changed = await w.t.http.patch(
      `/v1/alert-rules/${id}`,
      { conditions: [{ type: 'below', value: 1, severity: 'warning' }] },
      { token: w.user.token },
    );
    expect(changed.status).toBe(200);
    w.clock.set(T0 + 2 * MINUTE);
    expect((await w.t.http.delete(`/v1/alert-rules/${id}`, { token: w.user.token })).status).toBe(204);

    const [createdEntry] = await auditOf(w.t, w.user.token, 'alert_rule.created');
    expect(createdEntry).toMatchObject({ target: id, by: w.user.userId, details: { after: created.json } });
    const [changedEntry] = await auditOf(w.t, w.user.token, 'alert_rule.changed');
    expect(changedEntry).toMatchObject({
      target: id,
      details: { before: created.json, after: changed.json },
    });
    const [deletedEntry] = await auditOf(w.t, w.user.token, 'alert_rule.deleted');
    expect(deletedEntry).toMatchObject({ target: id, details: { before: changed.json } });
  });

  it('publishes the routes and the rule body in the OpenAPI document', async () => {
    w = await rulesWorld(db);
    const doc = (await w.t.http.get('/v1/openapi.json')).json;
    const collection = doc.paths['/v1/alert-rules'];
    const one = doc.paths['/v1/alert-rules/{rule_id}'];
    expect(Object.keys(collection).sort()).toEqual(['get', 'post']);
    expect(Object.keys(one).sort()).toEqual(['delete', 'get', 'patch']);
    for (const op of [one.get, one.patch, one.delete])
      expect(op.responses['404'].description).toContain('alert_rule_not_found');
    expect(collection.post.responses['422'].description).toContain('invalid_range');
    expect(collection.post.responses['422'].description).toContain('invalid_webhook_url');

    const text = JSON.stringify(collection.post.requestBody.content['application/json'].schema);
    for (const type of ['above', 'below', 'outside', 'no_data', 'rate_of_change'])
      expect(text).toContain(`"const":"${type}"`);
    for (const word of [
      'severity',
      'warning',
      'critical',
      'hysteresis',
      'delay_min',
      'within_min',
      'timezone',
      'windows',
      'steps',
      'after_min',
      'user_ids',
      'webhook_ids',
      'slack',
      'teams',
      'ntfy',
      'repeat_every_min',
    ])
      expect(text).toContain(`"${word}"`);
    expect(JSON.stringify(one.patch.requestBody.content['application/json'].schema)).toContain(
      '"const":"rate_of_change"',
    );
  });

  it("shows its events on every events endpoint beside the simple rule's, which works as before", async () => {
    w = await rulesWorld(db);
    const channel = await send(T0, 3);
    const rule = await w.t.http.post('/v1/alert-rules', ruleOn(channel), { token: w.user.token });
    await send(T0 + MINUTE, 9);
    // the simple rule of the site (0..5 °C, grace 30 min) opens its own alarm after its grace
    w.clock.set(T0 + 31 * MINUTE);
    await w.t.cloud.services.rules.tick();
    await settle();

    const events = await w.events(`?channel_id=${channel}`);
    const simple = events.find((e: any) => !('rule_id' in e));
    const alert = events.find((e: any) => e.rule_id === rule.json.id);
    expect(events).toHaveLength(2);
    expect(simple).toMatchObject({
      kind: 'threshold_high',
      state: 'open',
      started_at: at(T0 + MINUTE),
      alarm_at: at(T0 + 31 * MINUTE),
      ok_min: 0,
      ok_max: 5,
      peak_value: 9,
    });
    expect(simple).not.toHaveProperty('severity');
    expect(alert).toMatchObject({
      kind: 'threshold_high',
      state: 'open',
      severity: 'critical',
      condition: { index: 0, type: 'above', value: 8 },
      started_at: at(T0 + MINUTE),
      alarm_at: at(T0 + MINUTE),
    });
    // the same object through GET /v1/events/{id}, and the same acknowledgement route
    for (const e of [simple, alert]) {
      const one = await w.t.http.get(`/v1/events/${e.id}`, { token: w.user.token });
      expect([one.status, one.json]).toEqual([200, e]);
      const ack = await w.t.http.post(`/v1/events/${e.id}/ack`, { note: 'seen' }, { token: w.user.token });
      expect(ack.status).toBe(200);
      expect(ack.json).toMatchObject({ id: e.id, ack_note: 'seen', acknowledged_by: w.user.userId });
      const again = await w.t.http.post(`/v1/events/${e.id}/ack`, { note: 'again' }, { token: w.user.token });
      expect([again.status, again.json.error.code]).toEqual([409, 'already_acknowledged']);
    }
    expect(await w.events(`?rule_id=${rule.json.id}`)).toEqual([
      expect.objectContaining({ id: alert.id, ack_note: 'seen' }),
    ]);

    // the sensor's state is the simple rule's; alert rules show in alert_severity
    expect(await w.sensor(channel)).toMatchObject({ state: 'alarm', alert_severity: 'critical' });
    await send(T0 + 40 * MINUTE, 3);
    expect(await w.sensor(channel)).toMatchObject({ state: 'ok', alert_severity: null });
    expect((await w.events(`?channel_id=${channel}`)).map((e: any) => [e.state, e.ended_at])).toEqual([
      ['resolved', at(T0 + 40 * MINUTE)],
      ['resolved', at(T0 + 40 * MINUTE)],
    ]);
  });
});
