import { describe, expect, it } from '@jest/globals';
import { ApiError } from '../../web/app/api.ts';
import { fieldOf } from '../../web/app/forms.ts';

/** Which form field an API error is shown under (web/app/api.ts, web/app/forms.ts). */
describe('an API error on a form', () => {
  it('goes under the field its details name, though its message names another field first', () => {
    const error = new ApiError(422, 'invalid_range', '`to` must be after `from`', [
      { path: 'to', message: 'must be after from' },
    ]);
    expect(fieldOf(error, ['reason', 'from', 'to'])).toEqual({ field: 'to', message: 'must be after from' });
    expect(error.fieldMessage('from')).toBeNull();
  });

  it('goes under the field its message names when it has no details', () => {
    const error = new ApiError(422, 'invalid_timezone', 'timezone must be an IANA time zone name');
    expect(fieldOf(error, ['name', 'timezone'])).toEqual({
      field: 'timezone',
      message: 'timezone must be an IANA time zone name',
    });
  });
});
