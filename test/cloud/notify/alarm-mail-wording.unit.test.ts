import { describe, expect, it } from '@jest/globals';
import type { AlarmEventRow } from '../../../cloud/src/events/events.repository.ts';
import { alarmMail, type AlarmContext } from '../../../cloud/src/notify/alarm-mail.ts';

const T0 = Date.UTC(2026, 10, 2, 9, 0, 0) * 1000;

const event = (over: Partial<AlarmEventRow>) =>
  ({
    id: 'evt_1',
    kind: 'threshold_high',
    ok_min: 0,
    ok_max: 0,
    peak_value: 1,
    started_at: T0,
    alarm_at: T0,
    ended_at: null,
    withdrawn_at: null,
    silenced: 0,
    ...over,
  }) as AlarmEventRow;

const context = (unit: string, sensorKind: string): AlarmContext => ({
  siteName: 'Pharmacy',
  timezone: 'Europe/Berlin',
  deviceName: 'Basement',
  localId: 'leak-1',
  sensorKind,
  sensorLabel: null,
  unit,
});

describe('the wording of an alarm mail', () => {
  it('says a leak sensor detected a leak, not that it is above 0 boolean', () => {
    const mail = alarmMail(
      event({}),
      context('boolean', 'leak'),
      { opened: true, resolved: false },
      'https://x/e',
    );
    expect(mail.subject).toBe('ALARM: Basement leak detected at Pharmacy');
    expect(mail.text).toContain('What:    leak detected (threshold_high)\n');
    expect(mail.text).toContain('Bounds:  alarm when detected (1)\n');
    expect(mail.text).not.toMatch(/above 0|highest 1/);
  });

  it('keeps the value and unit of a measured quantity', () => {
    const mail = alarmMail(
      event({ ok_min: 2, ok_max: 8, peak_value: 9.5 }),
      context('°C', 'temperature'),
      { opened: true, resolved: false },
      'https://x/e',
    );
    expect(mail.subject).toBe('ALARM: Basement temperature above 8 °C at Pharmacy');
    expect(mail.text).toContain('What:    temperature above 8 °C (threshold_high), highest 9.5 °C\n');
    expect(mail.text).toContain('Bounds:  2 °C to 8 °C\n');
  });
});
