import http from 'node:http';
import fc from 'fast-check';
import { MEASUREMENT_KINDS, sanityRange } from '../../shared/kinds.ts';
import { MAX_MEASUREMENTS } from '../../shared/ingest.ts';
import type { FuzzWorld } from './world.ts';

/**
 * HTTP fuzzing from the published OpenAPI document (`GET /v1/openapi.json`, generated from the route
 * table and the zod schemas the handlers parse with), and of the dashboard's `/app/api` surface,
 * which that document leaves out (its operations come from the cloud's route table, with the schemas
 * of their `/v1` twins). Each request is valid, at a boundary, or malformed (wrong types, huge and
 * deep bodies, bad UTF-8, NUL bytes, odd headers and content types, long paths and queries), sent
 * with the admin token, the device token, the dashboard session's cookie, or nothing. Random bytes go
 * to the protobuf webhook. Every answer is tallied by route family; a 5xx other than 503
 * `db_unavailable` is a failure.
 */

/** The parts of a JSON schema (as zod writes them) the generators read. */
export interface Schema {
  $ref?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  type?: string | string[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, Schema>;
  required?: string[];
}

interface OpenApiParameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Schema;
}

interface OpenApiDocument {
  paths: Record<
    string,
    Record<
      string,
      { parameters?: OpenApiParameter[]; requestBody?: { content?: Record<string, { schema?: Schema }> } }
    >
  >;
}

interface Operation {
  method: string;
  path: string;
  family: string;
  pathParams: string[];
  query: { name: string; schema: Schema; required: boolean }[];
  body: Schema | null;
  /** A route of the dashboard's `/app/api` surface: its credential is the session cookie. */
  dashboard?: boolean;
  /** An event stream: the answer's status is read, then the connection is dropped. */
  stream?: boolean;
}

export interface Row {
  requests: number;
  s2xx: number;
  s3xx: number;
  s4xx: number;
  s5xx: number;
  /** Connections the server closed without an answer (a client-side refusal is not counted). */
  closed: number;
}

export interface FuzzFailure {
  what: string;
  status: number;
  body: string;
}

export interface Tally {
  rows: Map<string, Row>;
  failures: FuzzFailure[];
}

export function newTally(): Tally {
  return { rows: new Map(), failures: [] };
}

export function row(tally: Tally, family: string): Row {
  let r = tally.rows.get(family);
  if (!r) tally.rows.set(family, (r = { requests: 0, s2xx: 0, s3xx: 0, s4xx: 0, s5xx: 0, closed: 0 }));
  return r;
}

const ID_PARAM: Record<string, string> = {
  site: 'site_id',
  dev: 'device_id',
  snr: 'sensor_id',
  chn: 'channel_id',
  evt: 'event_id',
  rpt: 'report_id',
  rsc: 'schedule_id',
  sil: 'silence_id',
  int: 'integration_id',
  wh: 'webhook_id',
  brg: 'bridge_id',
  tok: 'token_id',
};
const ID_SHAPE = /^([a-z]+)_[0-9A-Za-z]{20,24}$/;

/** The operations of the document, each with its path, query and body schemas resolved. */
export function operationsOf(doc: OpenApiDocument): Operation[] {
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const params = op.parameters ?? [];
      const segments = template.split('/');
      ops.push({
        method: method.toUpperCase(),
        path: template,
        family:
          segments[1] === 'v1'
            ? (segments[2] ?? 'v1')
            : segments[1] === 'api'
              ? `api/${segments[2] ?? ''}`
              : (segments[1] ?? '/'),
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: params
          .filter((p) => p.in === 'query')
          .map((p) => ({ name: p.name, schema: p.schema ?? {}, required: !!p.required })),
        body: op.requestBody?.content?.['application/json']?.schema ?? null,
      });
    }
  }
  return ops;
}

/** The routes of the dashboard's `/app/api` surface, as the cloud's route table lists them. */
export interface DashboardRoute {
  method: string;
  path: string;
}

/**
 * The operations of the dashboard's `/app/api` surface, which the OpenAPI document (it describes
 * `/v1`) leaves out. Each is derived from its `/v1` twin (same handler, same schemas), so it gets
 * the twin's query and body schemas; the event stream has no twin.
 */
export function dashboardOperationsOf(v1: Operation[], routes: readonly DashboardRoute[]): Operation[] {
  return routes.map((route) => {
    const method = route.method.toUpperCase();
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    const twin = v1.find((op) => op.method === method && op.path === `/v1${path.slice('/app/api'.length)}`);
    const stream = !twin && method === 'GET' && path.endsWith('/stream');
    return {
      method,
      path,
      family: stream ? 'app/api/stream' : 'app/api',
      pathParams: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!),
      query: twin?.query ?? [],
      body: twin?.body ?? null,
      dashboard: true,
      stream,
    };
  });
}

/** An arbitrary of values that satisfy a JSON schema (as zod writes them), `depth` bounding nesting. */
export function valueOf(schema: Schema, root: Schema = schema, depth = 0): fc.Arbitrary<unknown> {
  if (depth > 5) return fc.constant(null);
  if (schema.$ref) {
    const target = schema.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], root);
    return target ? valueOf(target, root, depth + 1) : fc.anything();
  }
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const union = schema.anyOf ?? schema.oneOf;
  if (union?.length) return fc.oneof(...union.map((s) => valueOf(s, root, depth + 1)));
  if (schema.allOf?.length) return valueOf(schema.allOf[0]!, root, depth + 1);
  const type = Array.isArray(schema.type) ? fc.constantFrom(...schema.type) : null;
  if (type) return type.chain((t) => valueOf({ ...schema, type: t }, root, depth + 1));
  switch (schema.type) {
    case 'string':
      return stringOf(schema);
    case 'integer':
      return fc.integer({
        min: Math.max(Math.ceil(schema.minimum ?? schema.exclusiveMinimum ?? -1e6), -2_147_483_648),
        max: Math.min(Math.floor(schema.maximum ?? schema.exclusiveMaximum ?? 1e6), 2_147_483_647),
      });
    case 'number':
      return fc.double({
        min: schema.minimum ?? schema.exclusiveMinimum ?? -1e6,
        max: schema.maximum ?? schema.exclusiveMaximum ?? 1e6,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(schema.items ? valueOf(schema.items, root, depth + 1) : fc.jsonValue(), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 5, 5),
      });
    case 'object': {
      const props = schema.properties ?? {};
      const keys = Object.keys(props);
      if (keys.length === 0) return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }));
      return fc.record(Object.fromEntries(keys.map((k) => [k, valueOf(props[k]!, root, depth + 1)])), {
        requiredKeys: (schema.required ?? []).filter((k: string) => keys.includes(k)),
      });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function stringOf(schema: Schema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.min(schema.maxLength ?? 40, 200);
  switch (schema.format) {
    case 'date-time':
      return fc
        .date({
          min: new Date('2020-01-01T00:00:00Z'),
          max: new Date('2030-01-01T00:00:00Z'),
          noInvalidDate: true,
        })
        .map((d) => d.toISOString());
    case 'email':
      return fc.emailAddress();
    case 'uri':
    case 'url':
      return fc.webUrl();
    case 'uuid':
      return fc.uuid();
  }
  if (schema.pattern) {
    try {
      return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length <= 500);
    } catch {
      // a pattern JavaScript cannot compile: fall back to any text
    }
  }
  return fc.string({ minLength, maxLength: Math.max(minLength, maxLength), unit: 'grapheme' });
}

/** Values at and just past a schema's edges. */
function boundaryOf(schema: Schema): fc.Arbitrary<unknown> {
  const edges: unknown[] = ['', null, 0, -1, 2 ** 53, -(2 ** 53), 1e308, -1e-308, '0', 'true', [], {}];
  if (typeof schema.maxLength === 'number')
    edges.push('x'.repeat(schema.maxLength), 'x'.repeat(schema.maxLength + 1));
  if (typeof schema.minLength === 'number') edges.push('x'.repeat(Math.max(0, schema.minLength - 1)));
  for (const v of [schema.minimum, schema.maximum, schema.exclusiveMinimum, schema.exclusiveMaximum]) {
    if (typeof v === 'number') edges.push(v, v - 1, v + 1, v - 1e-9, v + 1e-9);
  }
  if (typeof schema.maxItems === 'number') edges.push(Array.from({ length: schema.maxItems + 1 }, () => 1));
  if (Array.isArray(schema.enum))
    edges.push(`${String(schema.enum[0])} `, String(schema.enum[0]).toUpperCase());
  edges.push('2026-02-30T25:61:00Z', '9999-12-31T23:59:59.999999999Z', '1969-12-31T23:59:59Z');
  return fc.constantFrom(...edges);
}

/** One request as sent on the wire. */
interface WireRequest {
  family: string;
  method: string;
  path: string;
  headers: Record<string, string | string[]>;
  body: Buffer | null;
  /** Read the status only, then drop the connection (an event stream stays open otherwise). */
  stream?: boolean;
}

type Auth = 'admin' | 'device' | 'session' | 'none';

function authHeader(world: FuzzWorld, auth: Auth): Record<string, string> {
  if (auth === 'admin') return { authorization: `Bearer ${world.adminToken}` };
  if (auth === 'device') return { authorization: `Bearer ${world.deviceToken}` };
  if (auth === 'session') return { cookie: `os_session=${world.sessionCookie}` };
  return {};
}

/** Known ids by path parameter name, learned from every answer; refreshed as the run goes. */
export class IdPool {
  readonly byParam = new Map<string, string[]>();

  learn(text: string): void {
    for (const match of text.matchAll(/"([a-z]+_[0-9A-Za-z]{20,24})"/g)) {
      const id = match[1]!;
      const param = ID_PARAM[ID_SHAPE.exec(id)?.[1] ?? ''];
      if (!param) continue;
      const list = this.byParam.get(param) ?? [];
      if (!list.includes(id)) {
        list.push(id);
        if (list.length > 50) list.shift();
        this.byParam.set(param, list);
      }
    }
  }
}

const DEEP = Buffer.from('['.repeat(100_000) + ']'.repeat(100_000));
const HUGE = Buffer.from(JSON.stringify({ name: 'x'.repeat(300 * 1024) }));
const BAD_UTF8 = [
  Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
  Buffer.from('{"name":"\\ud800"}'),
];
const ODD_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/xml',
  'application/octet-stream',
  'APPLICATION/JSON',
  'application/merge-patch+json',
  ';;;',
  'application/json, text/plain',
];

/**
 * An ingest body the device token's own device may send: its `local_id`, a time within the last day
 * or none, and 1 to 32 measurements of known kinds inside their sanity ranges (labels and units
 * sometimes), so generated ingest reaches the write, the journal and the rule engine instead of
 * stopping at `device_not_in_token` or `out_of_range`.
 */
function acceptedIngestOf(world: FuzzWorld): fc.Arbitrary<unknown> {
  const measurement = fc.constantFrom(...MEASUREMENT_KINDS).chain((type) => {
    const volts = type === 'battery' ? fc.boolean() : fc.constant(false);
    return volts.chain((inVolts) => {
      const range = sanityRange(type, inVolts ? 'V' : undefined);
      const value =
        type === 'leak'
          ? fc.constantFrom(0, 1)
          : fc.double({ min: range.min, max: range.max, noNaN: true, noDefaultInfinity: true });
      const label = fc.option(fc.string({ maxLength: 64 }), { nil: undefined });
      return fc
        .record({ type: fc.constant(type), value, label })
        .map((m) => (inVolts ? { ...m, unit: 'V' } : m));
    });
  });
  return fc.record(
    {
      device: fc.constant(world.deviceLocalId),
      ts: fc
        .integer({ min: 0, max: 86_400_000 })
        .map((ago) => new Date(world.startedAtMs - ago).toISOString()),
      measurements: fc.array(measurement, { minLength: 1, maxLength: MAX_MEASUREMENTS }),
    },
    { requiredKeys: ['device', 'measurements'] },
  );
}

/** The arbitrary of one request to `op`. */
function requestOf(op: Operation, world: FuzzWorld, pool: IdPool): fc.Arbitrary<WireRequest> {
  // The credentials the run relies on are never deleted, rotated or moved, and the device token's
  // device keeps its local_id, which accepted ingest bodies name.
  const protect =
    op.method === 'DELETE' ||
    /rotate-token|move$/.test(op.path) ||
    (op.method === 'PATCH' && op.path.endsWith('/devices/{device_id}'));
  const idFor = (param: string): fc.Arbitrary<string> => {
    const known = (pool.byParam.get(param) ?? []).filter((id) => !(protect && world.protectedIds.has(id)));
    const junk = fc.oneof(
      fc.string({ maxLength: 30 }).map((s) => encodeURIComponent(s) || 'x'),
      fc.constantFrom('%00', '..', '%2e%2e', 'x'.repeat(5000), '%E0%A4%A', '%ff%fe', 'null', '-1', '0'),
    );
    return known.length ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...known) }, junk) : junk;
  };
  const path = fc
    .tuple(...op.pathParams.map(idFor))
    .map((ids) => op.path.replace(/\{(\w+)\}/g, () => ids.shift() ?? 'x'));
  // A query parameter naming ids (`channel_ids`, `site_id`) gets known ones three times in four, as a
  // path parameter does: drawn from the schema alone it would never name a real row.
  const queryValueOf = (q: { name: string; schema: Schema }): fc.Arbitrary<unknown> => {
    const param = q.name.endsWith('_ids') ? q.name.slice(0, -1) : q.name;
    const known = pool.byParam.get(param) ?? [];
    if (known.length === 0) return valueOf(q.schema);
    const ids =
      param === q.name
        ? fc.constantFrom(...known)
        : fc.uniqueArray(fc.constantFrom(...known), { minLength: 1, maxLength: 3 }).map((l) => l.join(','));
    return fc.oneof({ weight: 3, arbitrary: ids }, valueOf(q.schema));
  };
  const queryValid = fc.record(Object.fromEntries(op.query.map((q) => [q.name, queryValueOf(q)])), {
    requiredKeys: op.query.filter((q) => q.required).map((q) => q.name),
  });
  const query = fc.oneof(
    { weight: 4, arbitrary: queryValid.map((q) => encodeQuery(q)) },
    {
      weight: 1,
      arbitrary: fc
        .record(Object.fromEntries(op.query.map((q) => [q.name, boundaryOf(q.schema)])))
        .map(encodeQuery),
    },
    {
      weight: 1,
      arbitrary: fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 30 })).map(encodeQuery),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '?' + 'a=1&'.repeat(5000),
        '?x=' + 'y'.repeat(20_000),
        '?limit=%00',
        '?limit[]=1&limit[]=2',
        '?from[a]=1',
        '?%ff=%fe',
        '?cursor=' + encodeURIComponent('\u0000\uffff'),
        '?=&&==',
      ),
    },
  );
  const bodySchema = op.body;
  const json = (v: fc.Arbitrary<unknown>) => v.map((x) => Buffer.from(JSON.stringify(x) ?? 'null'));
  const ingest = op.method === 'POST' && op.path === '/v1/ingest';
  const accepted = ingest
    ? [
        {
          weight: 12,
          arbitrary: json(acceptedIngestOf(world)).map((data) => ({ kind: 'accepted-ingest', data })),
        },
      ]
    : [];
  const body: fc.Arbitrary<{ kind: string; data: Buffer | null; type?: string }> = fc.oneof(
    ...accepted,
    {
      weight: 5,
      arbitrary: json(bodySchema ? valueOf(bodySchema) : fc.constant({})).map((data) => ({
        kind: 'valid',
        data,
      })),
    },
    {
      weight: 2,
      arbitrary: (bodySchema?.properties
        ? fc
            .tuple(
              valueOf(bodySchema),
              fc.constantFrom(...Object.keys(bodySchema.properties as object)),
              fc.oneof(
                boundaryOf(bodySchema.properties[Object.keys(bodySchema.properties)[0]!] ?? {}),
                fc.anything(),
              ),
            )
            .map(([v, k, b]) => ({ ...(v as object), [k]: b }))
        : fc.anything()
      ).map((v) => ({ kind: 'boundary', data: Buffer.from(JSON.stringify(v) ?? 'null') })),
    },
    {
      weight: 1,
      arbitrary: fc
        .anything()
        .map((v) => ({ kind: 'wrong-type', data: Buffer.from(JSON.stringify(v) ?? '1') })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { kind: 'huge', data: HUGE },
        { kind: 'deep', data: DEEP },
        { kind: 'deep-object', data: Buffer.from('{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000)) },
        ...BAD_UTF8.map((data) => ({ kind: 'bad-utf8', data })),
        { kind: 'nul', data: Buffer.from('{"name":"a\\u0000b","vertical":"\\u0000"}') },
        { kind: 'nul-raw', data: Buffer.from('{"name":"a\u0000b"}') },
        { kind: 'truncated', data: Buffer.from('{"name":') },
        { kind: 'empty', data: Buffer.alloc(0) },
        {
          kind: 'proto',
          data: Buffer.from('{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}'),
        },
        { kind: 'big-number', data: Buffer.from('{"value":1e999,"limit":123456789012345678901234567890}') },
        { kind: 'dup-keys', data: Buffer.from('{"name":"a","name":{"x":1}}') },
      ),
    },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ maxLength: 200 })
        .map((b) => ({ kind: 'random-bytes', data: Buffer.from(b) })),
    },
  );
  const headers = fc.oneof(
    { weight: 6, arbitrary: fc.constant({}) },
    {
      weight: 1,
      arbitrary: fc.constantFrom<Record<string, string | string[]>>(
        { 'content-type': 'application/json', 'x-long': 'x'.repeat(12_000) },
        { authorization: 'Bearer' },
        { authorization: 'Bearer ' + 'ua_live_'.padEnd(4000, 'A') },
        { authorization: 'Basic Zm9vOmJhcg==' },
        { authorization: ['Bearer a', 'Bearer b'] },
        { cookie: 'os_session=' + 'oss_'.padEnd(5000, 'z') },
        { cookie: '=;=;;os_session' },
        { 'idempotency-key': 'k'.repeat(200) },
        { 'idempotency-key': '' },
        { 'x-forwarded-for': '999.1.1.1, ::ffff:zz' },
        { 'content-encoding': 'gzip' },
        { 'content-encoding': 'br' },
        { accept: '*/*;q=x' },
        { 'accept-encoding': 'gzip;q=1e9' },
        { 'x-requested-with': 'XMLHttpRequest', origin: 'null' },
        { 'if-none-match': '"' + 'x'.repeat(3000) },
        { range: 'bytes=-1-2' },
        { 'last-event-id': 'abc' },
        { expect: '100-continue' },
      ),
    },
  );
  // The run's own session is never signed out, or every later dashboard request would be a 401.
  const signsOut = /\/auth\/logout(-all)?$/.test(op.path);
  return fc
    .record({
      auth: ingest
        ? fc.constantFrom<Auth>('device', 'device', 'device', 'device', 'admin', 'none')
        : op.dashboard
          ? signsOut
            ? fc.constantFrom<Auth>('admin', 'none')
            : fc.constantFrom<Auth>('session', 'session', 'session', 'admin', 'none')
          : signsOut
            ? fc.constantFrom<Auth>('admin', 'device', 'none')
            : fc.constantFrom<Auth>('admin', 'admin', 'device', 'session', 'none'),
      path,
      query,
      body,
      headers,
      type: fc.oneof(
        { weight: 8, arbitrary: fc.constant('application/json') },
        fc.constantFrom(...ODD_TYPES),
      ),
      longPath: fc.integer({ min: 0, max: 40 }),
    })
    .map(({ auth, path, query, body, headers, type, longPath }) => {
      let p = path + (op.query.length || longPath === 1 ? query : '');
      if (longPath === 0) p = p + '/' + 'a'.repeat(20_000);
      const withBody = op.method !== 'GET' && op.method !== 'DELETE';
      const h: Record<string, string | string[]> = { ...authHeader(world, auth), ...headers };
      if (withBody) h['content-type'] ??= type;
      if (op.path.startsWith('/app/api') && op.method !== 'GET') h['x-requested-with'] ??= 'XMLHttpRequest';
      return {
        family: op.family,
        method: op.method,
        path: p,
        headers: h,
        body: withBody ? body.data : null,
        stream: op.stream,
      };
    });
}

function encodeQuery(q: Record<string, unknown>): string {
  const parts = Object.entries(q)
    .filter(([, v]) => v !== undefined)
    .map(
      ([k, v]) =>
        `${encodeURIComponent(k)}=${encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v))}`,
    );
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Random bytes (and truncated JSON) on the ChirpStack webhook as protobuf, with the integration token. */
function chirpstackOf(world: FuzzWorld): fc.Arbitrary<WireRequest> {
  return fc
    .record({
      bytes: fc.oneof(
        { weight: 4, arbitrary: fc.uint8Array({ maxLength: 512 }) },
        { weight: 1, arbitrary: fc.uint8Array({ minLength: 1000, maxLength: 5000 }) },
      ),
      event: fc.constantFrom(
        'up',
        'up',
        'join',
        'status',
        'ack',
        'txack',
        'log',
        'location',
        'integration',
        'bogus',
        '',
      ),
      type: fc.constantFrom('application/octet-stream', 'application/x-protobuf', 'application/protobuf', ''),
      auth: fc.constantFrom('integration', 'integration', 'integration', 'device', 'none'),
    })
    .map(({ bytes, event, type, auth }) => ({
      family: 'webhooks/chirpstack (protobuf)',
      method: 'POST',
      path: `/v1/webhooks/chirpstack?event=${event}`,
      headers: {
        ...(type ? { 'content-type': type } : {}),
        ...(auth === 'integration'
          ? { authorization: `Bearer ${world.integrationToken}` }
          : auth === 'device'
            ? { authorization: `Bearer ${world.deviceToken}` }
            : {}),
      },
      body: Buffer.from(bytes),
    }));
}

interface Answer {
  status: number;
  text: string;
}

function send(base: URL, agent: http.Agent, r: WireRequest): Promise<Answer | 'closed' | 'refused'> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      req = http.request({
        host: base.hostname,
        port: base.port,
        method: r.method,
        path: r.path,
        headers: r.body ? { ...r.headers, 'content-length': String(r.body.length) } : r.headers,
        agent,
      });
    } catch {
      resolve('refused'); // the client itself would not send it (an invalid header or path)
      return;
    }
    req.setTimeout(60_000, () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve('closed'));
    req.on('response', (res) => {
      if (r.stream && res.statusCode === 200) {
        // An open event stream: its status is the answer; the stream itself is not waited for.
        resolve({ status: 200, text: '' });
        res.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        if (chunks.length < 64) chunks.push(c);
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', () => resolve('closed'));
    });
    req.end(r.body ?? undefined);
  });
}

export interface HttpFuzzOptions {
  requests: number;
  seed: number;
  concurrency?: number;
}

/** Sends `requests` generated requests, spread over every operation, and tallies the answers. */
export async function fuzzHttp(world: FuzzWorld, tally: Tally, options: HttpFuzzOptions): Promise<void> {
  const base = new URL(world.t.url);
  const doc = (await world.t.http.get('/v1/openapi.json')).json as OpenApiDocument;
  const v1 = operationsOf(doc);
  const ops = [...v1, ...dashboardOperationsOf(v1, world.t.cloud.dashboardRoutes)];
  const hasChirpstack = ops.some((op) => op.path === '/v1/webhooks/chirpstack');
  if (!hasChirpstack)
    console.log('note: POST /v1/webhooks/chirpstack is absent; its protobuf fuzzing is skipped');
  const pool = new IdPool();
  pool.learn(JSON.stringify({ ...world, t: null }));
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency ?? 8 });
  const batch = 50;
  let sent = 0;
  let round = 0;
  try {
    while (sent < options.requests) {
      // A batch per operation per round, generated afresh so ids learnt in the last round are used.
      const requests: WireRequest[] = [];
      for (const [i, op] of ops.entries()) {
        requests.push(
          ...fc.sample(requestOf(op, world, pool), { numRuns: batch, seed: options.seed + round * 1000 + i }),
        );
      }
      if (hasChirpstack)
        requests.push(...fc.sample(chirpstackOf(world), { numRuns: batch, seed: options.seed + round }));
      shuffle(requests, options.seed + round);
      const take = requests.slice(0, options.requests - sent);
      let next = 0;
      const worker = async () => {
        while (next < take.length) {
          const r = take[next++]!;
          const answer = await send(base, agent, r);
          const family = row(tally, r.family);
          if (answer === 'refused') continue;
          family.requests++;
          if (answer === 'closed') {
            family.closed++;
            continue;
          }
          const s = answer.status;
          if (s >= 200 && s < 300) {
            family.s2xx++;
            pool.learn(answer.text);
          } else if (s < 400) family.s3xx++;
          else if (s < 500) family.s4xx++;
          else {
            family.s5xx++;
            const dbDown = s === 503 && answer.text.includes('"db_unavailable"');
            if (!dbDown)
              tally.failures.push({
                what: `${r.method} ${r.path.slice(0, 200)} [${String(r.headers['content-type'] ?? '')}] body=${(r.body ?? Buffer.alloc(0)).subarray(0, 200).toString('utf8')}`,
                status: s,
                body: answer.text.slice(0, 500),
              });
          }
        }
      };
      await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
      sent += take.length;
      round++;
    }
  } finally {
    agent.destroy();
  }
}

/** Shuffles in place (seeded), so a run cut short still reaches every operation. */
function shuffle<T>(list: T[], seed: number): void {
  let state = seed >>> 0 || 1;
  for (let i = list.length - 1; i > 0; i--) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    const j = state % (i + 1);
    [list[i], list[j]] = [list[j]!, list[i]!];
  }
}

/** The table of a run: route family, requests, 2xx, 3xx, 4xx, 5xx, connections closed. */
export function formatTable(tally: Tally): string {
  const header = ['family', 'requests', '2xx', '3xx', '4xx', '5xx', 'closed'];
  const lines = [...tally.rows.entries()]
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([f, r]) => [f, r.requests, r.s2xx, r.s3xx, r.s4xx, r.s5xx, r.closed].map(String));
  const total = [...tally.rows.values()].reduce(
    (t, r) => t.map((v, i) => v + [r.requests, r.s2xx, r.s3xx, r.s4xx, r.s5xx, r.closed][i]!),
    [0, 0, 0, 0, 0, 0],
  );
  lines.push(['total', ...total.map(String)]);
  const all = [header, ...lines];
  const widths = header.map((_, i) => Math.max(...all.map((l) => l[i]!.length)));
  const fmt = (l: string[]) =>
    `| ${l.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [
    fmt(header),
    `|${widths.map((w, i) => (i === 0 ? '-' : '') + '-'.repeat(w) + (i === 0 ? '-' : ':')).join('|')}|`,
    ...lines.map(fmt),
  ].join('\n');
}
