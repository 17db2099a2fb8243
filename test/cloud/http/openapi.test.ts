import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestCloud, type TestCloud } from '../../helpers/cloud.ts';

describe('GET /v1/openapi.json', () => {
  let t: TestCloud;
  beforeAll(async () => {
    t = await startTestCloud();
  });
  afterAll(async () => t.stop());

  it('describes every route of the route table, with its parameters and error codes', async () => {
    const answer = await t.http.get('/v1/openapi.json');
    expect(answer.status).toBe(200);
    const doc = answer.json;
    expect(doc.openapi).toBe('3.1.0');
    for (const route of t.cloud.routes) {
      const path = route.path.replace(/:(\w+)/g, '{$1}');
      const operation = doc.paths[path]?.[route.method];
      expect([route.method, path, typeof operation?.summary]).toEqual([route.method, path, 'string']);
      for (const m of route.path.matchAll(/:(\w+)/g)) {
        expect(operation.parameters).toContainEqual(expect.objectContaining({ name: m[1], in: 'path' }));
      }
    }
    const ingest = doc.paths['/v1/ingest'].post;
    expect(ingest.requestBody.content['application/json'].schema.properties.measurements.maxItems).toBe(32);
    expect(ingest.responses['422'].description).toContain('out_of_range');
    expect(ingest.responses['403'].description).toContain('device_not_in_token');
    const devices = doc.paths['/v1/devices'].get;
    expect(devices.parameters).toContainEqual(expect.objectContaining({ name: 'limit', in: 'query' }));
    expect(doc.paths['/v1/sites/{site_id}'].delete.responses['409'].description).toContain('site_not_empty');
  });
});
