import { afterEach, describe, expect, it } from '@jest/globals';
import { DATABASES } from '../../helpers/databases.ts';
import { startSmtpServer } from '../../helpers/smtp.ts';
import { alarmMails, decodeMail, MINUTE, rulesWorld, T0, type RulesWorld } from '../rules/world.ts';

/** What a person reads: what, where, since when (the site's time and UTC), the bounds, a link. */
function expectAlarmContent(mail: string, w: RulesWorld, eventId: string) {
  expect(mail).toMatch(/^To: chef@example.com$/m);
  expect(mail).toMatch(/^Subject: ALARM: Fridge temperature above 5 °C at Kitchen$/m);
  expect(mail).toContain('What:    temperature above 5 °C (threshold_high), highest 9.5 °C');
  expect(mail).toContain('Where:   site Kitchen, device Fridge (fridge-1), sensor temperature');
  // the site is in Berlin (UTC+1 in January)
  expect(mail).toContain('Since:   2026-01-05 11:10:00 Europe/Berlin (2026-01-05T10:10:00Z)');
  expect(mail).toContain(
    'Alarm:   2026-01-05 11:40:00 Europe/Berlin (2026-01-05T10:40:00Z) (after the grace period)',
  );
  expect(mail).toContain('Bounds:  0 °C to 5 °C');
  expect(mail).toContain(`Open it in the dashboard: ${w.t.cloud.config.baseUrl}/app/events/${eventId}`);
}

describe.each(DATABASES)('alarm e-mail on %s', (db) => {
  let w: RulesWorld;
  afterEach(async () => w?.t.stop());

  async function warmFridge() {
    const site = w.siteId;
    expect(
      (await w.t.http.patch(`/v1/sites/${site}`, { timezone: 'Europe/Berlin' }, { token: w.user.token }))
        .status,
    ).toBe(200);
    await w.send(T0, 3);
    w.clock.set(T0 + 10 * MINUTE);
    await w.send(T0 + 10 * MINUTE, 9.5);
    await w.tickAt(T0 + 40 * MINUTE);
    const [event] = await w.events();
    return event.id as string;
  }

  it('writes the alarm to the outbox with what, where, since when, the bounds and a dashboard link', async () => {
    w = await rulesWorld(db);
    const eventId = await warmFridge();
    const mails = alarmMails(await w.outbox());
    expect(mails).toHaveLength(1);
    expectAlarmContent(mails[0]!, w, eventId);
  });

  it('sends the same mail through a real SMTP server when SMTP_URL is set', async () => {
    const smtp = await startSmtpServer();
    const { received, port } = smtp;
    try {
      w = await rulesWorld(db, {
        env: { SMTP_URL: `smtp://127.0.0.1:${port}`, MAIL_FROM: 'Monitor <alerts@example.org>' },
      });
      const eventId = await warmFridge();
      // drain waits for a mail job the background poller may have started already
      await w.t.cloud.services.jobs.drain();
      const alarms = alarmMails(received.map(decodeMail));
      expect(alarms).toHaveLength(1);
      expect(alarms[0]).toMatch(/^From: Monitor <alerts@example.org>$/m);
      expectAlarmContent(alarms[0]!, w, eventId);
    } finally {
      await smtp.close();
    }
  });

  it('mails every user of the account', async () => {
    w = await rulesWorld(db);
    // a second user of the same account (sign-up makes a new account, so add the user directly)
    await w.t.cloud.services.db
      .insertInto('users')
      .values({
        id: 'usr_second',
        account_id: w.user.accountId,
        email: 'sous-chef@example.com',
        created_at: T0,
      })
      .execute();
    await warmFridge();
    const mails = alarmMails(await w.outbox());
    expect(mails.map((m) => /^To: (.*)$/m.exec(m)![1]).sort()).toEqual([
      'chef@example.com',
      'sous-chef@example.com',
    ]);
  });
});
