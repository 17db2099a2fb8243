import { describe, expect, it } from '@jest/globals';
import { ReasonCode } from '../../../shared/mqtt.ts';
import { Overloaded, RateLimited } from '../../../cloud/src/errors.ts';
import { publishAnswerFor } from '../../../cloud/src/mqtt/reason-codes.ts';

/** The PUBACK reason a refused publish gets, by what refused it (docs/api/mqtt.md, "PUBACK reason codes"). */
describe('publishAnswerFor', () => {
  it('names a database out of reach db_unavailable (0x80, retry), as HTTP does with its 503', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(publishAnswerFor(refused)).toEqual({
      reasonCode: ReasonCode.unspecifiedError,
      reasonString: 'db_unavailable: the database is unavailable; retry with backoff',
    });
    expect(publishAnswerFor(new Error('Connection terminated unexpectedly')).reasonString).toMatch(
      /^db_unavailable: /,
    );
    expect(
      publishAnswerFor(Object.assign(new Error('shutting down'), { code: '57P01' })).reasonString,
    ).toMatch(/^db_unavailable: /);
  });

  it('answers anything else unexpected internal (0x80), without its message', () => {
    expect(publishAnswerFor(new TypeError('x is undefined'))).toEqual({
      reasonCode: ReasonCode.unspecifiedError,
      reasonString: 'internal: the service could not store this; retry',
    });
  });

  it('answers overload and the rate limit with 0x97 (quota exceeded)', () => {
    expect(publishAnswerFor(Overloaded.instance).reasonCode).toBe(ReasonCode.quotaExceeded);
    expect(publishAnswerFor(Overloaded.instance).reasonString).toMatch(/^overloaded: /);
    expect(publishAnswerFor(new RateLimited(30))).toEqual({
      reasonCode: ReasonCode.quotaExceeded,
      reasonString: 'rate_limited: rate limit exceeded',
    });
  });
});
