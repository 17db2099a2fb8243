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

  it('goes under a nested field its details name, and a list field takes its items’ messages', () => {
    const error = new ApiError(400, 'invalid_request', 'public: lat is required', [
      { path: 'public.lat', message: 'required to make the device public' },
      { path: 'recipients.2', message: 'must be an e-mail address' },
    ]);
    expect(error.fieldMessage('public.lat')).toBe('required to make the device public');
    expect(error.fieldMessage('public.lon')).toBeNull();
    expect(error.fieldMessage('recipients')).toBe('must be an e-mail address');
    expect(error.fieldMessage('recipient')).toBeNull();
  });
});
