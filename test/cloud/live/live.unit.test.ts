import { describe, expect, it } from '@jest/globals';
import type { AlarmEventRow } from '../../../cloud/src/events/events.repository.ts';
import { dashboardRoutes, type RouteDef } from '../../../cloud/src/http/route-table.ts';
import { accountTopic, InProcessHub, type HubMessage } from '../../../cloud/src/hub/notification-hub.ts';
import { alarmChange } from '../../../cloud/src/live/live.service.ts';

const row = (fields: Partial<AlarmEventRow>) =>
  ({ ended_at: null, withdrawn_at: null, ...fields }) as AlarmEventRow;
const open = row({});
const ended = row({ ended_at: 2 });
const withdrawn = row({ withdrawn_at: 3 });

describe('how the stream names an alarm event change', () => {
  it.each([
    ['a new open event', null, open, 'opened'],
    ['a new event already ended (late data)', null, ended, 'resolved'],
    ['an open event that ended', open, ended, 'resolved'],
    ['an open event withdrawn', open, withdrawn, 'resolved'],
    ['a withdrawn event reinstated', withdrawn, open, 'opened'],
    ['an open event whose peak rose', open, open, 'updated'],
    ['an ended event moved by late data', ended, ended, 'updated'],
  ] as const)('%s: %s', (_what, before, after, change) => {
    expect(alarmChange(before, after)).toBe(change);
  });
});

describe('the in-process hub', () => {
  it('delivers to the topic’s listeners only, until they unsubscribe, and contains a failing one', () => {
    const errors: unknown[] = [];
    const hub = new InProcessHub({ onError: (err) => errors.push(err) });
    const heard: HubMessage[] = [];
    expect(hub.active()).toBe(false);
    const stop = hub.subscribe(accountTopic('acc_a'), (m) => heard.push(m));
    hub.subscribe(accountTopic('acc_a'), () => {
      throw new Error('listener broke');
    });
    expect([hub.active(), hub.listened('account:acc_a'), hub.listened('account:acc_b')]).toEqual([
      true,
      true,
      false,
    ]);
    hub.publish(accountTopic('acc_b'), { type: 'x' });
    hub.publish(accountTopic('acc_a'), { type: 'y' });
    expect(heard).toEqual([{ type: 'y' }]);
    expect(errors).toHaveLength(1);
    stop();
    hub.publish(accountTopic('acc_a'), { type: 'z' });
    expect(heard).toEqual([{ type: 'y' }]);
  });
});

describe('the /app/api table derived from /v1', () => {
  const handler = async () => ({ status: 204 });
  const route = (
    method: RouteDef['method'],
    path: string,
    auth: RouteDef['auth'],
    extra: Partial<RouteDef> = {},
  ) => ({ method, path, auth, summary: path, handler, ...extra });

  it('keeps the management and sign-in routes, with the session cookie and the /v1 rate-limit family', () => {
    const derived = dashboardRoutes([
      route('get', '/v1/openapi.json', 'none'),
      route('post', '/v1/auth/request', 'none'),
      route('post', '/v1/ingest', 'device'),
      route('get', '/v1/sites', 'user'),
      route('get', '/v1/measurements', 'user', { family: 'read' }),
      route('post', '/v1/tokens', 'user-or-session', { scope: 'admin' }),
      route('post', '/v1/auth/logout-all', 'session'),
      route('get', '/app/auth/callback', 'none'),
    ]);
    expect(
      derived.map((r) => [r.method, r.path, r.auth, r.family, r.dashboard, r.handler === handler]),
    ).toEqual([
      ['post', '/app/api/auth/request', 'none', null, true, true],
      ['get', '/app/api/sites', 'session', 'mgmt', true, true],
      ['get', '/app/api/measurements', 'session', 'read', true, true],
      ['post', '/app/api/tokens', 'session', 'mgmt', true, true],
      ['post', '/app/api/auth/logout-all', 'session', null, true, true],
    ]);
  });
});
