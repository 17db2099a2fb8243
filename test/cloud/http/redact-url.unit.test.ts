import { describe, expect, it } from '@jest/globals';
import { redactUrl } from '../../../cloud/src/logger.ts';

const TOKEN = 'ua_live_5FIKabcdefghijklmnopqrstuvwxyz0123456789AB';

describe('redactUrl (the access log never holds a secret)', () => {
  it('redacts secret query keys and any value holding a secret', () => {
    expect(redactUrl('/v1/ingest/shelly?token=ds_live_x&device=a')).toBe(
      '/v1/ingest/shelly?token=[redacted]&device=a',
    );
    expect(redactUrl('/app/auth/callback?t=abc')).toBe('/app/auth/callback?t=[redacted]');
    expect(redactUrl(`/v1/sites?%74oken=1&q=${TOKEN}`)).toBe('/v1/sites?%74oken=[redacted]&q=[redacted]');
    expect(redactUrl(`/v1/sites?note=see%20${TOKEN}`)).toBe('/v1/sites?note=[redacted]');
  });

  it('redacts a secret pasted into the path or into a bare query key', () => {
    expect(redactUrl(`/v1/sites/${TOKEN}`)).toBe('/v1/sites/[redacted]');
    expect(redactUrl(`/v1/sites/${TOKEN}/sensors?limit=5`)).toBe('/v1/sites/[redacted]/sensors?limit=5');
    expect(redactUrl(`/v1/sites/x%20${encodeURIComponent(TOKEN)}`)).toBe('/v1/sites/[redacted]');
    expect(redactUrl(`/v1/sites?${TOKEN}`)).toBe('/v1/sites?[redacted]');
    expect(redactUrl(`/v1/sites?${TOKEN}=1`)).toBe('/v1/sites?[redacted]=[redacted]');
  });

  it('leaves URLs without secrets as they are', () => {
    expect(redactUrl('/v1/sites/site_abc?limit=5&cursor=xyz')).toBe('/v1/sites/site_abc?limit=5&cursor=xyz');
    expect(redactUrl('/v1/sites')).toBe('/v1/sites');
  });
});
