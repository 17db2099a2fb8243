import { describe, expect, it, jest } from '@jest/globals';
import type { ValidMeasurement } from '../../../shared/ingest.ts';
import { InvalidRequest } from '../../../cloud/src/errors.ts';
import { ChannelCache } from '../../../cloud/src/ingest/channel-cache.ts';
import {
  answerItems,
  authenticate,
  authoriseDevice,
  collectPoints,
  countRateLimit,
  DEVICE_STATE_JOB,
  INGEST_STEPS,
  newGroup,
  resolveChannels,
  runIngestSteps,
  trackDeviceState,
  validateContent,
  writeGroup,
  type IngestEnv,
  type IngestGroup,
} from '../../../cloud/src/ingest/ingest.steps.ts';
import type {
  IngestDevice,
  IngestItem,
  IngestOutcome,
  IngestTx,
  IngestWrite,
  NewSensorRow,
  SensorRef,
} from '../../../cloud/src/ingest/ingest.types.ts';

/**
 * Each step of an ingest group alone, over an in-memory IngestTx: what it decides for each item
 * (the failure it answers, or what it hands the next step) and what it asks the database.
 */

const NOW = 1_763_800_000_000_000; // microseconds; a minute boundary is 1_763_799_960 s

function device(id: string, over: Partial<IngestDevice> = {}): IngestDevice {
  return {
    id,
    account_id: 'acc_1',
    site_id: 'sit_1',
    local_id: `local-${id}`,
    model: 'http-generic',
    vertical: 'pharma',
    token_hash: `hash-${id}`,
    online: 1,
    ...over,
  };
}

function temperature(value: number, label: string | null = null): ValidMeasurement {
  return { kind: 'temperature', value, label, unit: 'C' };
}

function item(over: Partial<IngestItem> = {}): IngestItem {
  return {
    credential: { kind: 'token', tokenHash: 'hash-dev_a' },
    countRate: true,
    deviceRef: null,
    receivedAt: NOW,
    ts: null,
    measurements: [temperature(4)],
    error: null,
    ...over,
  };
}

/** An IngestTx over arrays: devices, a rate counter, sensors with seqs, and the writes it was asked for. */
class MemoryTx implements IngestTx {
  sensors: SensorRef[] = [];
  inserted: NewSensorRow[] = [];
  writes: IngestWrite[] = [];
  rateCounts = new Map<string, number>();
  calls: string[] = [];
  /** Points already stored, by `seq:ts`. */
  stored = new Set<string>();

  constructor(private readonly devices: IngestDevice[]) {}

  devicesByTokenHash(hashes: string[]): IngestDevice[] {
    this.calls.push(`devicesByTokenHash ${hashes.join(',')}`);
    return this.devices.filter((d) => hashes.includes(d.token_hash!));
  }
  devicesById(ids: string[]): IngestDevice[] {
    this.calls.push(`devicesById ${ids.join(',')}`);
    return this.devices.filter((d) => ids.includes(d.id));
  }
  addRateHits(hits: { bucket: string; count: number }[]): Map<string, number> {
    this.calls.push('addRateHits');
    for (const { bucket, count } of hits)
      this.rateCounts.set(bucket, (this.rateCounts.get(bucket) ?? 0) + count);
    return new Map(hits.map(({ bucket }) => [bucket, this.rateCounts.get(bucket)!]));
  }
  findSensors(keys: { deviceId: string; kind: string; labelKey: string }[]): SensorRef[] {
    this.calls.push(`findSensors ${keys.length}`);
    return this.sensors.filter((s) =>
      keys.some((k) => k.deviceId === s.device_id && k.kind === s.kind && k.labelKey === s.label_key),
    );
  }
  insertSensors(rows: NewSensorRow[]): void {
    this.calls.push(`insertSensors ${rows.length}`);
    this.inserted.push(...rows);
    for (const r of rows) this.addSensor(r.device_id, r.kind, r.label_key, r.channel_id);
  }
  write(group: IngestWrite): Uint8Array {
    this.writes.push(group);
    const n = group.points.length / 3;
    const written = new Uint8Array(n);
    for (let r = 0; r < n; r++) {
      const key = `${group.points[r * 3]}:${group.points[r * 3 + 1]}`;
      written[r] = this.stored.has(key) ? 0 : 1;
      this.stored.add(key);
    }
    return written;
  }
  insertMeasurements(): Uint8Array {
    throw new Error('not used by ingest');
  }

  addSensor(
    deviceId: string,
    kind: string,
    labelKey = '',
    channelId = `chn_${this.sensors.length + 1}`,
  ): SensorRef {
    const s = {
      seq: this.sensors.length + 1,
      id: `snr_${this.sensors.length + 1}`,
      channel_id: channelId,
      device_id: deviceId,
      kind,
      label_key: labelKey,
    };
    this.sensors.push(s);
    return s;
  }
}

function env(over: Partial<{ limit: number; mode: 'enforce' | 'warn'; channels: ChannelCache }> = {}) {
  const warn = jest.fn();
  const e: IngestEnv = {
    config: {
      rateLimits: { ingestPerMin: over.limit ?? 100 } as never,
      rateLimitMode: over.mode ?? 'enforce',
      retentionDays: 730,
    },
    log: { warn },
    channels: over.channels ?? new ChannelCache(),
  };
  return { env: e, warn };
}

function failure(g: IngestGroup, i: number): { status: number; code: string } | null {
  const o = g.outcomes[i];
  return o && !o.ok ? { status: o.error.status, code: o.error.code } : null;
}

/** A group whose items all authenticated as the given devices (the steps after `authenticate`). */
function authenticated(items: IngestItem[], devices: (IngestDevice | null)[]): IngestGroup {
  const g = newGroup(items, NOW);
  g.devices = devices;
  g.rates = items.map(() => null);
  return g;
}

describe('ingest steps', () => {
  it('run in the order of the checks: 401, 403, 429, then content, channels, write, answers', () => {
    expect(INGEST_STEPS.map((s) => s.name)).toEqual([
      'authenticate',
      'authoriseDevice',
      'countRateLimit',
      'validateContent',
      'resolveChannels',
      'collectPoints',
      'trackDeviceState',
      'writeGroup',
      'answerItems',
    ]);
  });

  describe('authenticate', () => {
    it('finds devices by token hash and by authenticated id, one query each for the group', async () => {
      const a = device('dev_a');
      const b = device('dev_b');
      const tx = new MemoryTx([a, b]);
      const g = newGroup(
        [item(), item(), item({ credential: { kind: 'device', principal: { deviceId: 'dev_b' } as never } })],
        NOW,
      );
      await authenticate(g, tx);
      expect(g.devices).toEqual([a, a, b]);
      expect(g.outcomes).toEqual([null, null, null]);
      expect(tx.calls).toEqual(['devicesByTokenHash hash-dev_a', 'devicesById dev_b']);
    });

    it('answers 401 token_invalid for an unknown or missing token, and asks nothing for a missing one', async () => {
      const tx = new MemoryTx([device('dev_a')]);
      const g = newGroup(
        [
          item({ credential: { kind: 'token', tokenHash: 'nope' } }),
          item({ credential: { kind: 'token', tokenHash: null } }),
        ],
        NOW,
      );
      await authenticate(g, tx);
      expect(g.devices).toEqual([null, null]);
      expect([failure(g, 0), failure(g, 1)]).toEqual([
        { status: 401, code: 'token_invalid' },
        { status: 401, code: 'token_invalid' },
      ]);
      expect(tx.calls).toEqual(['devicesByTokenHash nope']);
    });
  });

  describe('authoriseDevice', () => {
    it('accepts the token’s own device by local id or id, and answers 403 for another', () => {
      const a = device('dev_a');
      const g = authenticated(
        [
          item({ deviceRef: 'local-dev_a' }),
          item({ deviceRef: 'dev_a' }),
          item({ deviceRef: null }),
          item({ deviceRef: 'other' }),
        ],
        [a, a, a, a],
      );
      authoriseDevice(g);
      expect(g.devices).toEqual([a, a, a, null]);
      expect(failure(g, 3)).toEqual({ status: 403, code: 'device_not_in_token' });
      expect(g.outcomes.slice(0, 3)).toEqual([null, null, null]);
    });

    it('leaves an item that failed authentication as it was', () => {
      const g = authenticated([item({ deviceRef: 'other' })], [null]);
      g.outcomes[0] = { ok: false, error: new InvalidRequest('x', 'earlier'), rate: null };
      authoriseDevice(g);
      expect(failure(g, 0)).toEqual({ status: 400, code: 'x' });
    });
  });

  describe('countRateLimit', () => {
    it('counts each device’s requests once per group and answers 429 past the limit', async () => {
      const a = device('dev_a');
      const tx = new MemoryTx([a]);
      const { env: e } = env({ limit: 2 });
      const g = authenticated([item(), item(), item()], [a, a, a]);
      await countRateLimit(g, tx, e);
      const resetAt = 1_763_799_960 + 60;
      expect(g.rates).toEqual([
        { limit: 2, remaining: 1, resetAt },
        { limit: 2, remaining: 0, resetAt },
        { limit: 2, remaining: 0, resetAt },
      ]);
      expect(failure(g, 2)).toEqual({ status: 429, code: 'rate_limited' });
      const third = g.outcomes[2] as Extract<IngestOutcome, { ok: false }>;
      expect(third.error.headers).toEqual({ 'Retry-After': String(resetAt - 1_763_800_000) });
      expect(third.rate).toEqual(g.rates[2]);
      expect(g.devices).toEqual([a, a, null]);
      expect(tx.calls).toEqual(['addRateHits']);
      expect(tx.rateCounts.get('ingest:dev_a')).toBe(3);
    });

    it('continues from the count earlier groups left in the window', async () => {
      const a = device('dev_a');
      const tx = new MemoryTx([a]);
      tx.rateCounts.set('ingest:dev_a', 5);
      const g = authenticated([item()], [a]);
      await countRateLimit(g, tx, env({ limit: 10 }).env);
      expect(g.rates[0]!.remaining).toBe(4);
    });

    it('stores past the limit in warn mode, with a warning', async () => {
      const a = device('dev_a');
      const { env: e, warn } = env({ limit: 1, mode: 'warn' });
      const g = authenticated([item(), item()], [a, a]);
      await countRateLimit(g, new MemoryTx([a]), e);
      expect(g.outcomes).toEqual([null, null]);
      expect(g.devices).toEqual([a, a]);
      expect(warn).toHaveBeenCalledTimes(1);
    });

    it('does not count an item the HTTP pipeline counted, nor a failed one, and asks nothing then', async () => {
      const a = device('dev_a');
      const tx = new MemoryTx([a]);
      const g = authenticated([item({ countRate: false }), item()], [a, null]);
      await countRateLimit(g, tx, env({ limit: 1 }).env);
      expect(g.rates).toEqual([null, null]);
      expect(tx.calls).toEqual([]);
    });
  });

  describe('validateContent', () => {
    it('answers an item’s content error only now, with its rate', () => {
      const a = device('dev_a');
      const rate = { limit: 10, remaining: 9, resetAt: 1 };
      const g = authenticated([item({ error: new InvalidRequest('invalid_body', 'no') }), item()], [a, a]);
      g.rates = [rate, null];
      validateContent(g, new MemoryTx([a]), env().env);
      expect(g.outcomes[0]).toMatchObject({ ok: false, error: { status: 400, code: 'invalid_body' }, rate });
      expect(g.devices).toEqual([null, a]);
      expect(g.measurements).toEqual([[], [temperature(4)]]);
    });

    it('adds a Shelly battery in the unit of the model, and answers 422 out_of_range outside its range', () => {
      const percent = device('dev_a');
      const volts = device('dev_b', { model: 'shelly-ht-gen3' });
      const g = authenticated(
        [item({ shellyBattery: 80 }), item({ shellyBattery: 3.1 }), item({ shellyBattery: 5000 })],
        [percent, volts, percent],
      );
      validateContent(g, new MemoryTx([percent, volts]), env().env);
      expect(g.measurements[0]).toEqual([
        temperature(4),
        { kind: 'battery', value: 80, label: null, unit: '%' },
      ]);
      expect(g.measurements[1]).toEqual([
        temperature(4),
        { kind: 'battery', value: 3.1, label: null, unit: 'V' },
      ]);
      expect(failure(g, 2)).toEqual({ status: 422, code: 'out_of_range' });
    });

    it('answers 400 for a time older than the retention keeps, which would be stored and then removed', () => {
      const a = device('dev_a');
      const day = 24 * 3600 * 1_000_000;
      const cutoff = Math.floor((NOW - 730 * day) / day) * day; // the retention's cutoff: a UTC day
      const g = authenticated([item({ ts: cutoff - 1 }), item({ ts: cutoff })], [a, a]);
      validateContent(g, new MemoryTx([a]), env().env);
      expect(failure(g, 0)).toEqual({ status: 400, code: 'invalid_request' });
      expect(g.outcomes[0]).toMatchObject({
        error: { message: expect.stringContaining('730 days (RETENTION_DAYS)') },
      });
      expect(g.measurements).toEqual([[], [temperature(4)]]);
    });
  });

  describe('resolveChannels', () => {
    it('takes cached channels without asking the database', async () => {
      const a = device('dev_a');
      const tx = new MemoryTx([a]);
      const cache = new ChannelCache();
      const s = tx.addSensor('dev_a', 'temperature');
      cache.add(s);
      const g = authenticated([item(), item()], [a, a]);
      g.measurements = [[temperature(4)], [temperature(5)]];
      await resolveChannels(g, tx, env({ channels: cache }).env);
      expect(g.rowSensor).toEqual([s, s]);
      expect(g.rowStart).toEqual([0, 1, 2]);
      expect(tx.calls).toEqual([]);
      expect(g.learned).toEqual([]);
    });

    it('looks up the channels not cached once for the group, and creates the missing with the vertical’s defaults', async () => {
      const a = device('dev_a');
      const tx = new MemoryTx([a]);
      const known = tx.addSensor('dev_a', 'temperature', 'fridge');
      const g = authenticated([item(), item(), item()], [a, null, a]);
      g.measurements = [[temperature(4, 'fridge'), temperature(5)], [], [temperature(6)]];
      await resolveChannels(g, tx, env().env);
      expect(tx.calls).toEqual(['findSensors 2', 'insertSensors 1', 'findSensors 2']);
      expect(tx.inserted).toEqual([
        expect.objectContaining({
          device_id: 'dev_a',
          kind: 'temperature',
          label: null,
          label_key: '',
          ok_min: 2,
          ok_max: 8,
          grace_min: 15,
          rule_enabled: 1,
          state: 'no_data',
          created_at: NOW,
        }),
      ]);
      const created = tx.sensors[1]!;
      expect(g.rowStart).toEqual([0, 2, 2, 3]);
      expect(g.rowSensor).toEqual([known, created, created]);
      expect(g.learned).toEqual(expect.arrayContaining([known, created]));
    });
  });

  it('collectPoints lays out (seq, ts, value) per measurement, at the item’s time or its receive time', () => {
    const a = device('dev_a');
    const s1 = { seq: 7, id: 's', channel_id: 'c', device_id: 'dev_a', kind: 'temperature', label_key: '' };
    const g = authenticated([item({ ts: 1000 }), item({ receivedAt: 2000 })], [a, a]);
    g.measurements = [[temperature(4)], [temperature(5)]];
    g.rowStart = [0, 1, 2];
    g.rowSensor = [s1, s1];
    collectPoints(g);
    expect([...g.points]).toEqual([7, 1000, 4, 7, 2000, 5]);
  });

  describe('trackDeviceState', () => {
    it('keeps each device’s latest receive time and flips only a device whose online state changes', () => {
      const online = device('dev_a', { online: 1 });
      const offline = device('dev_b', { online: 0 });
      const g = authenticated(
        [
          item({ receivedAt: 3000 }),
          item({ receivedAt: 2000 }),
          item({ receivedAt: 4000 }),
          item({ receivedAt: 5000, lwt: 'offline' }),
        ],
        [online, online, offline, null],
      );
      trackDeviceState(g);
      expect(
        [...g.deviceStates.values()].map(({ device: d, lastSeenAt, online: o }) => [d.id, lastSeenAt, o]),
      ).toEqual([
        ['dev_a', 3000, 1],
        ['dev_b', 4000, 1],
      ]);
      expect(g.flipped).toEqual([
        {
          accountId: 'acc_1',
          deviceId: 'dev_b',
          siteId: 'sit_1',
          localId: 'local-dev_b',
          online: true,
          at: 4000,
        },
      ]);
    });

    it('takes a last-will offline as the device going offline', () => {
      const a = device('dev_a', { online: 1 });
      const g = authenticated([item({ lwt: 'offline', measurements: [] })], [a]);
      trackDeviceState(g);
      expect(g.flipped).toEqual([expect.objectContaining({ deviceId: 'dev_a', online: false })]);
    });
  });

  describe('writeGroup', () => {
    it('writes nothing when no item has a device', async () => {
      const tx = new MemoryTx([]);
      const g = authenticated([item()], [null]);
      await writeGroup(g, tx);
      expect(tx.writes).toEqual([]);
      expect(g.written).toHaveLength(0);
    });

    it('writes the points, the devices in id order and the flips as one job', async () => {
      const tx = new MemoryTx([]);
      const g = authenticated([], []);
      g.points = new Float64Array([1, 1000, 4]);
      const b = device('dev_b');
      const a = device('dev_a');
      g.deviceStates.set('dev_b', { device: b, lastSeenAt: 10, online: 1, at: 10 });
      g.deviceStates.set('dev_a', { device: a, lastSeenAt: 20, online: 0, at: 20 });
      g.flipped.push({
        accountId: 'acc_1',
        deviceId: 'dev_a',
        siteId: 'sit_1',
        localId: 'x',
        online: false,
        at: 20,
      });
      await writeGroup(g, tx);
      expect(tx.writes).toHaveLength(1);
      const w = tx.writes[0]!;
      expect(w.devices).toEqual([
        { id: 'dev_a', lastSeenAt: 20, online: 0 },
        { id: 'dev_b', lastSeenAt: 10, online: 1 },
      ]);
      expect(w.at).toBe(NOW);
      expect(w.job).toMatchObject({ kind: DEVICE_STATE_JOB, payload: JSON.stringify(g.flipped), at: NOW });
      expect([...g.written]).toEqual([1]);
    });
  });

  it('answerItems counts accepted and deduplicated rows and lists each channel once', () => {
    const a = device('dev_a');
    const s1 = {
      seq: 1,
      id: 's1',
      channel_id: 'chn_1',
      device_id: 'dev_a',
      kind: 'temperature',
      label_key: '',
    };
    const s2 = {
      seq: 2,
      id: 's2',
      channel_id: 'chn_2',
      device_id: 'dev_a',
      kind: 'humidity',
      label_key: 'room',
    };
    const rate = { limit: 10, remaining: 3, resetAt: 60 };
    const g = authenticated([item(), item()], [a, null]);
    g.outcomes[1] = { ok: false, error: new InvalidRequest('x', 'y'), rate: null };
    g.rates = [rate, null];
    g.measurements = [
      [temperature(1), temperature(2), { kind: 'humidity', value: 50, label: 'room', unit: '%' }],
      [],
    ];
    g.rowStart = [0, 3, 3];
    g.rowSensor = [s1, s1, s2];
    g.written = new Uint8Array([1, 0, 1]);
    answerItems(g);
    expect(g.outcomes[0]).toEqual({
      ok: true,
      deviceId: 'dev_a',
      accountId: 'acc_1',
      accepted: 2,
      deduplicated: 1,
      channels: [
        { type: 'temperature', label: null, channel_id: 'chn_1' },
        { type: 'humidity', label: 'room', channel_id: 'chn_2' },
      ],
      channelsJson: JSON.stringify([
        { type: 'temperature', label: null, channel_id: 'chn_1' },
        { type: 'humidity', label: 'room', channel_id: 'chn_2' },
      ]),
      rate,
    });
    expect(failure(g, 1)).toEqual({ status: 400, code: 'x' });
  });

  it('a whole group: each item gets the first check it fails, in the order 401, 403, 429, content', async () => {
    const a = device('dev_a');
    const tx = new MemoryTx([a]);
    const bad = new InvalidRequest('invalid_body', 'bad body');
    const items = [
      item(), // stored
      item({ credential: { kind: 'token', tokenHash: 'nope' }, error: bad }), // 401 before content
      item({ deviceRef: 'other', error: bad }), // 403 before content
      item({ error: bad }), // counted, then content
      item({ error: bad }), // past the limit: 429 before content
    ];
    const outcomes = await runIngestSteps(newGroup(items, NOW), tx, env({ limit: 2 }).env);
    expect(outcomes.map((o) => (o.ok ? 'ok' : `${o.error.status} ${o.error.code}`))).toEqual([
      'ok',
      '401 token_invalid',
      '403 device_not_in_token',
      '400 invalid_body',
      '429 rate_limited',
    ]);
    expect(tx.writes).toHaveLength(1);
    expect(tx.writes[0]!.points).toHaveLength(3);
  });
});
