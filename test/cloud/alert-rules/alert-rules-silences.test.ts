import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { at, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';
import { addManager, escalatingRule, MANAGER, sendSettled, settleAlerts } from './settle.ts';

/**
 * Silence windows and alert rules (docs/api/rules.md: silence windows suppress notifications for
 * the window only): a step, a reminder, an opening or a "Resolved" notice due inside a window waits
 * for its end, or for the window to be ended early, and goes out then if it still applies.
 */
describe.each(DATABASES)('alert rules and silence windows on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  async function world() {
    w = await rulesWorld(db);
    await addManager(w);
  }

  const send = (ts: number, value: number) => sendSettled(w, ts, value);

  async function tickAt(micros: number) {
    w.clock.set(micros);
    await w.t.cloud.services.rules.tick();
    await settleAlerts(w);
  }

  /** Alert-rule mails (the simple rule's have no rule name at the end of the subject), oldest first. */
  async function alertMails(): Promise<{ to: string; subject: string }[]> {
    return (await w.outbox())
      .map((m) => ({ to: /^To: (.*)$/m.exec(m)?.[1] ?? '', subject: /^Subject: (.*)$/m.exec(m)?.[1] ?? '' }))
      .filter((m) => /^(Reminder CRITICAL|CRITICAL|Resolved): .* \(Fridge\)$/.test(m.subject));
  }

  const ruleWithEscalation = (channel: string) => escalatingRule(w, channel, 1, 1);

  /** The mails after the first `n`, as (to, kind) pairs in a stable order. */
  async function mailsAfter(n: number): Promise<string[][]> {
    return (await alertMails())
      .slice(n)
      .map((m) => [m.to, m.subject.split(':')[0]!])
      .sort();
  }

  async function silence(channel: string, from: number, to: number): Promise<string> {
    const sensor = await w.sensor(channel);
    const answer = await w.t.http.post(
      `/v1/sensors/${sensor.id}/silence`,
      { from: at(from), to: at(to), reason: 'defrost' },
      { token: w.user.token },
    );
    expect(answer.status).toBe(201);
    await settleAlerts(w);
    return answer.json.id as string;
  }

  it('holds an escalation step and the reminders due inside a silence window, and sends the step when it ends', async () => {
    await world();
    const channel = await send(T0, 3);
    await ruleWithEscalation(channel);
    await send(T0 + MINUTE, 9); // opens at 10:01: step 1 at once, step 2 due at 10:02
    expect(await alertMails()).toEqual([{ to: w.user.email, subject: expect.stringMatching(/^CRITICAL: /) }]);

    await silence(channel, T0 + MINUTE, T0 + 61 * MINUTE);
    await tickAt(T0 + 2 * MINUTE);
    await tickAt(T0 + 30 * MINUTE);
    await tickAt(T0 + 61 * MINUTE - 1);
    expect(await alertMails()).toHaveLength(1);

    // the window ends with the alarm still open: step 2 goes out, the reminders missed are not
    // sent in a burst, and the chain goes on a minute later
    await tickAt(T0 + 61 * MINUTE);
    expect((await alertMails()).slice(1)).toEqual([
      { to: MANAGER, subject: expect.stringMatching(/^CRITICAL: /) },
    ]);
    await tickAt(T0 + 62 * MINUTE);
    expect(await mailsAfter(2)).toEqual([
      [w.user.email, 'Reminder CRITICAL'],
      [MANAGER, 'Reminder CRITICAL'],
    ]);
  });

  it('sends a held escalation step when the silence window is ended early, and none once the alarm ended', async () => {
    await world();
    const channel = await send(T0, 3);
    await ruleWithEscalation(channel);
    await send(T0 + MINUTE, 9);
    const id = await silence(channel, T0 + MINUTE, T0 + 600 * MINUTE);
    await tickAt(T0 + 10 * MINUTE);
    expect(await alertMails()).toHaveLength(1);

    expect((await w.t.http.delete(`/v1/silences/${id}`, { token: w.user.token })).status).toBe(204);
    await settleAlerts(w);
    expect((await alertMails()).map((m) => m.to)).toEqual([w.user.email, MANAGER]);

    // a second window; the alarm ends inside it: no reminder, and "Resolved" when the window ends
    await silence(channel, T0 + 10 * MINUTE, T0 + 40 * MINUTE);
    await tickAt(T0 + 15 * MINUTE);
    await send(T0 + 20 * MINUTE, 3);
    await tickAt(T0 + 40 * MINUTE - 1);
    expect(await alertMails()).toHaveLength(2);
    await tickAt(T0 + 40 * MINUTE);
    expect(await mailsAfter(2)).toEqual([
      [w.user.email, 'Resolved'],
      [MANAGER, 'Resolved'],
    ]);
  });

  it('announces an alarm that opened inside a silence window when the window ends with it still open', async () => {
    await world();
    const channel = await send(T0, 3);
    const rule = await ruleWithEscalation(channel);
    await silence(channel, T0, T0 + 60 * MINUTE);
    await send(T0 + 10 * MINUTE, 9);
    await tickAt(T0 + 60 * MINUTE - 1);
    expect(await w.events(`?rule_id=${rule}`)).toEqual([
      expect.objectContaining({ state: 'open', silenced: true }),
    ]);
    expect(await alertMails()).toEqual([]);

    await tickAt(T0 + 60 * MINUTE);
    expect(await alertMails()).toEqual([{ to: w.user.email, subject: expect.stringMatching(/^CRITICAL: /) }]);
    // the chain counts from the announcement: step 2 a minute later
    await tickAt(T0 + 61 * MINUTE);
    expect((await alertMails()).map((m) => m.to)).toEqual([w.user.email, MANAGER]);
  });

  it('announces an alarm that opened inside a silence window when the window is ended early', async () => {
    await world();
    const channel = await send(T0, 3);
    await ruleWithEscalation(channel);
    const id = await silence(channel, T0, T0 + 600 * MINUTE);
    await send(T0 + 10 * MINUTE, 9);
    await tickAt(T0 + 20 * MINUTE);
    expect(await alertMails()).toEqual([]);

    expect((await w.t.http.delete(`/v1/silences/${id}`, { token: w.user.token })).status).toBe(204);
    await settleAlerts(w);
    expect(await alertMails()).toEqual([{ to: w.user.email, subject: expect.stringMatching(/^CRITICAL: /) }]);
  });

  it('never announces an alarm silenced from its opening to its end', async () => {
    await world();
    const channel = await send(T0, 3);
    await ruleWithEscalation(channel);
    await silence(channel, T0, T0 + 60 * MINUTE);
    await send(T0 + 10 * MINUTE, 9);
    await send(T0 + 20 * MINUTE, 3);
    await tickAt(T0 + 120 * MINUTE);
    expect(await alertMails()).toEqual([]);
  });
});
