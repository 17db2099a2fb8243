import { afterEach, describe, expect, it } from '@jest/globals';
import { ManualClock } from '../../../cloud/src/clock.ts';
import { signUp, startTestCloud, type SignedIn, type TestCloud } from '../../helpers/cloud.ts';
import { DATABASES } from '../../helpers/databases.ts';

const T0 = Date.UTC(2026, 10, 2, 9, 0, 0) * 1000;

/**
 * An Idempotency-Key whose request never recorded its answer (its process died, or the database
 * failed right after the change committed) blocked every retry with 409 for 24 hours.
 */
describe.each(DATABASES)('Idempotency-Key claims without an answer, on %s', (db) => {
  let t: TestCloud;
  let user: SignedIn;
  afterEach(async () => t?.stop());

  const createSite = (key: string, name: string) =>
    t.http.post(
      '/v1/sites',
      { name, vertical: 'food_service' },
      { token: user.token, headers: { 'Idempotency-Key': key } },
    );

  it('takes over a key claimed five minutes ago by a request that never answered', async () => {
    const clock = new ManualClock(T0);
    t = await startTestCloud({ db, clock });
    user = await signUp(t, 'ops@example.com');
    expect((await createSite('k1', 'Kitchen')).status).toBe(201);
    // As a process that died in the middle of the request leaves its claim.
    await t.cloud.services.db.updateTable('idempotency_keys').set({ status: null, response: null }).execute();
    const meanwhile = await createSite('k1', 'Kitchen');
    expect([meanwhile.status, meanwhile.json.error.code]).toEqual([409, 'idempotency_conflict']);
    clock.advanceMs(5 * 60_000);
    const retried = await createSite('k1', 'Kitchen');
    expect(retried.status).toBe(201);
    const replayed = await createSite('k1', 'Kitchen');
    expect([replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
  });

  it('answers what was done when the answer cannot be recorded, not 503 for a change made', async () => {
    t = await startTestCloud({ db });
    user = await signUp(t, 'ops@example.com');
    const { idempotency } = t.cloud.services;
    const complete = idempotency.complete.bind(idempotency);
    let failures = 1;
    idempotency.complete = (...args) =>
      failures-- > 0 ? Promise.reject(new Error('connection terminated unexpectedly')) : complete(...args);
    const answer = await createSite('k2', 'Cellar');
    expect(answer.status).toBe(201);
    const sites = await t.http.get('/v1/sites', { token: user.token });
    expect(sites.json.data.map((s: { name: string }) => s.name)).toEqual(['Cellar']);
  });
});
