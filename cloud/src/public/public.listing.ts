import { createHash } from 'node:crypto';
import { formatMicros, MICROS_PER_HOUR, MICROS_PER_MINUTE } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import { notFound } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { bucketStart } from '../measurements/rollups.ts';
import type { Point, SeriesQuery } from '../measurements/measurements.service.ts';
import type { Db } from '../storage/database.ts';
import type { PinRecord, PublicRepository } from './public.repository.ts';
import { pinDetailView, pinView, readingView } from './public.view.ts';

/** An answer ready to send: its JSON text and the ETag of that text. */
export interface CachedAnswer {
  json: string;
  etag: string;
}

/** `south,west,north,east`; `west > east` crosses the antimeridian. */
export interface Bbox {
  south: number;
  west: number;
  north: number;
  east: number;
}

export const RANGES = {
  '24h': { span: 24 * MICROS_PER_HOUR, width: 5 * MICROS_PER_MINUTE, ttlMs: 30_000 },
  '7d': { span: 7 * 24 * MICROS_PER_HOUR, width: MICROS_PER_HOUR, ttlMs: 120_000 },
  '30d': { span: 30 * 24 * MICROS_PER_HOUR, width: 6 * MICROS_PER_HOUR, ttlMs: 600_000 },
} as const;
export type Range = keyof typeof RANGES;

export const METRICS = [
  'coldest_now',
  'hottest_now',
  'highest_co2',
  'active_24h',
  'longest_running',
] as const;
export type Metric = (typeof METRICS)[number];

/** Leaderboard size (the spec's "public leaderboard size"). */
export const LEADERBOARD_SIZE = 50;
/** `*_now` boards count pins whose latest reading is at most this old. */
const NOW_WINDOW = 2 * MICROS_PER_HOUR;
/** How long the pins are reused before they are read again for fresh values (the epoch aside). */
const PINS_TTL_MS = 5_000;
/**
 * Pins older than `PINS_TTL_MS` (of the current epoch) are still served while newer ones are read
 * in the background, up to this age; older still (the reads failing or stuck), requests wait.
 */
const PINS_STALE_MAX_MS = 30_000;
/** How long the boards that count readings or time are reused. */
const SLOW_BOARD_TTL_MS = 60_000;
/** Answers kept per process; the oldest goes first. */
const MAX_ANSWERS = 2_000;

/** The pins at one moment, sorted by latitude for bbox searches. */
interface Snapshot {
  epoch: number;
  /** Grows with each load: answers made from the pins name the snapshot they were made from. */
  generation: number;
  loadedAt: number;
  pins: PinRecord[];
  byId: Map<string, PinRecord>;
}

interface Entry extends CachedAnswer {
  /** The epoch of the pins it was made from: an entry of another epoch is never served. */
  epoch: number;
  /**
   * `pins`: the answer is a function of the pins alone and lives exactly as long as the snapshot
   * of this generation is served; a number: it lives until then (ms, `nowMs`) within its epoch.
   */
  until: { pins: number } | number;
}

/**
 * The answers of the public API, cached per process (docs/design/public-api.md). All pins are read
 * together and kept for `PINS_TTL_MS` (then read again in the background while still answered);
 * bbox, detail, stats and boards are computed from them, serialised once and kept with their ETag. Each request first reads the public epoch (one row):
 * when it moved (a device made private or deleted, a sensor hidden, on any replica) the pins and
 * every answer made from them are dropped before anything is answered, so nothing that stopped
 * being public is served again.
 */
export class PublicListing {
  private snapshot: Snapshot | null = null;
  private loading: Promise<Snapshot> | null = null;
  private generations = 0;
  private readonly answers = new Map<string, Entry>();

  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      log: Logger;
      publicRepository: PublicRepository;
      /** Bucketed reads of a channel (`MeasurementsService.stream`). */
      readings: { stream(seq: number, q: SeriesQuery): AsyncGenerator<Point[]> };
      /** Folds ingest's journal so the pins' last values include every answered write. */
      catchUp: () => Promise<void>;
      /** Milliseconds, for cache ages (real time even when the clock is a test's). */
      nowMs?: () => number;
    },
  ) {}

  /** Drops every cached answer of this process (after a change here; other replicas see the epoch). */
  invalidate(): void {
    this.snapshot = null;
    this.answers.clear();
  }

  async sensors(bbox: Bbox | null, kind: string | null): Promise<CachedAnswer> {
    const snapshot = await this.current();
    const key = bbox
      ? `s:${bbox.south},${bbox.west},${bbox.north},${bbox.east}:${kind ?? ''}`
      : `s::${kind ?? ''}`;
    return this.cached(snapshot, key, () =>
      inBbox(snapshot.pins, bbox)
        .filter((p) => kind === null || p.kind === kind)
        .map(pinView),
    );
  }

  async sensor(id: string): Promise<CachedAnswer> {
    const snapshot = await this.current();
    const pin = snapshot.byId.get(id);
    if (!pin) throw notFound('sensor');
    return this.cached(snapshot, `d:${id}`, () => pinDetailView(pin));
  }

  /** Whether `id` is a public sensor now (the flag route answers 404 otherwise). */
  async exists(id: string): Promise<boolean> {
    return (await this.current()).byId.has(id);
  }

  async readings(id: string, range: Range): Promise<CachedAnswer> {
    const snapshot = await this.current();
    const pin = snapshot.byId.get(id);
    if (!pin) throw notFound('sensor');
    const { span, width, ttlMs } = RANGES[range];
    const key = `r:${id}:${range}`;
    const hit = this.fresh(snapshot, key);
    if (hit) return hit;
    const now = this.deps.clock.nowMicros();
    const points: Point[] = [];
    const from = bucketStart(now - span, width);
    for await (const chunk of this.deps.readings.stream(pin.seq, { from, to: now + 1, width, fn: 'mean' }))
      points.push(...chunk);
    return this.store(snapshot, key, this.nowMs() + ttlMs, points.map(readingView));
  }

  async stats(): Promise<CachedAnswer> {
    const snapshot = await this.current();
    return this.cached(snapshot, 'stats', () => {
      let lastUpdate: number | null = null;
      for (const p of snapshot.pins) if (lastUpdate === null || p.ts > lastUpdate) lastUpdate = p.ts;
      return {
        sensors: snapshot.pins.length,
        locations: new Set(snapshot.pins.map((p) => p.deviceId)).size,
        orgs: new Set(snapshot.pins.map((p) => p.accountId)).size,
        lastUpdate: lastUpdate === null ? null : formatMicros(lastUpdate),
      };
    });
  }

  async leaderboard(metric: Metric): Promise<CachedAnswer> {
    const snapshot = await this.current();
    const key = `b:${metric}`;
    const hit = this.fresh(snapshot, key);
    if (hit) return hit;
    const now = this.deps.clock.nowMicros();
    const scored = await this.scores(metric, snapshot.pins, now);
    const rows = scored
      .sort((a, b) => (metric === 'coldest_now' ? a.metric - b.metric : b.metric - a.metric))
      .slice(0, LEADERBOARD_SIZE)
      .map((r, i) => ({ ...pinView(r.pin), rank: i + 1, metric: r.metric }));
    const slow = metric === 'active_24h' || metric === 'longest_running';
    const until = slow ? this.nowMs() + SLOW_BOARD_TTL_MS : { pins: snapshot.generation };
    return this.store(snapshot, key, until, rows);
  }

  /** Each pin's score for a board, pins without one left out; ties keep pin order (sequence). */
  private async scores(
    metric: Metric,
    pins: PinRecord[],
    now: number,
  ): Promise<{ pin: PinRecord; metric: number }[]> {
    const recent = (kind: string) =>
      pins
        .filter((p) => p.kind === kind && p.ts >= now - NOW_WINDOW)
        .map((pin) => ({ pin, metric: pin.value }));
    switch (metric) {
      case 'coldest_now':
      case 'hottest_now':
        return recent('temperature');
      case 'highest_co2':
        return recent('co2');
      case 'active_24h': {
        // The current hour and the 23 before it, from the hourly rollups.
        const fromHour = bucketStart(now, MICROS_PER_HOUR) - 23 * MICROS_PER_HOUR;
        await this.deps.catchUp();
        const counts = await this.deps.publicRepository.readingsSince(
          this.deps.db,
          pins.map((p) => p.seq),
          fromHour,
        );
        return pins.map((pin) => ({ pin, metric: counts.get(pin.seq) ?? 0 })).filter((r) => r.metric > 0);
      }
      case 'longest_running':
        return pins.map((pin) => ({ pin, metric: Math.max(0, Math.floor((now - pin.since) / 1_000_000)) }));
    }
  }

  /**
   * The pins as of the current epoch. Of the current epoch and younger than `PINS_TTL_MS`, they
   * are reused; older, they are still answered while newer ones are read in the background (up to
   * `PINS_STALE_MAX_MS`), so no request waits for that read. Of another epoch (something stopped or
   * started being public), they are never answered: the request waits for pins read after the
   * change. One read at a time; concurrent requests share it.
   */
  private async current(): Promise<Snapshot> {
    const epoch = await this.deps.publicRepository.epoch(this.deps.db);
    const s = this.snapshot;
    if (s && s.epoch === epoch) {
      const age = this.nowMs() - s.loadedAt;
      if (age < PINS_TTL_MS) return s;
      if (age < PINS_STALE_MAX_MS) {
        void this.refresh(epoch);
        return s;
      }
    }
    if (s && s.epoch !== epoch) this.invalidate();
    for (;;) {
      const loaded = await this.refresh(epoch);
      // A load begun before the epoch moved may hold what is no longer public: read again.
      if (loaded.epoch >= epoch) return loaded;
    }
  }

  /** The read of the pins under way, or a new one at `epoch`. */
  private refresh(epoch: number): Promise<Snapshot> {
    if (!this.loading) {
      const loading = this.load(epoch).finally(() => {
        this.loading = null;
      });
      // Nobody may wait for a background read: its failure is logged here, and the next request
      // past the stale limit reads again and gets the error.
      loading.catch((err: unknown) => this.deps.log.warn({ err }, 'reading the public pins failed'));
      this.loading = loading;
    }
    return this.loading;
  }

  private async load(epoch: number): Promise<Snapshot> {
    await this.deps.catchUp();
    const pins = await this.deps.publicRepository.pins(this.deps.db);
    pins.sort((a, b) => a.lat - b.lat);
    const snapshot: Snapshot = {
      epoch,
      generation: ++this.generations,
      loadedAt: this.nowMs(),
      pins,
      byId: new Map(pins.map((p) => [p.id, p])),
    };
    if (!this.snapshot || this.snapshot.epoch <= epoch) this.snapshot = snapshot;
    return snapshot;
  }

  /** The answer `make` gives from the pins, made once per snapshot. */
  private cached(snapshot: Snapshot, key: string, make: () => unknown): CachedAnswer {
    return this.fresh(snapshot, key) ?? this.store(snapshot, key, { pins: snapshot.generation }, make());
  }

  private fresh(snapshot: Snapshot, key: string): CachedAnswer | null {
    const entry = this.answers.get(key);
    if (!entry) return null;
    const live =
      typeof entry.until === 'number' ? entry.until > this.nowMs() : entry.until.pins === snapshot.generation;
    if (entry.epoch === snapshot.epoch && live) return entry;
    this.answers.delete(key);
    return null;
  }

  /** Keeps an answer made from `snapshot`, unless the epoch has moved on meanwhile. */
  private store(snapshot: Snapshot, key: string, until: Entry['until'], body: unknown): CachedAnswer {
    const json = JSON.stringify(body);
    const entry: Entry = { json, etag: etagOf(json), epoch: snapshot.epoch, until };
    if (this.snapshot !== null && this.snapshot.epoch > snapshot.epoch) return entry;
    if (this.answers.size >= MAX_ANSWERS) this.answers.delete(this.answers.keys().next().value!);
    this.answers.set(key, entry);
    return entry;
  }

  private nowMs(): number {
    return this.deps.nowMs ? this.deps.nowMs() : performance.now();
  }
}

/** A strong ETag of an answer's bytes. */
export function etagOf(json: string): string {
  return `"${createHash('sha1').update(json).digest('base64url')}"`;
}

/** The pins inside the box (all of them without one), found by binary search on latitude. */
export function inBbox(pins: readonly PinRecord[], bbox: Bbox | null): PinRecord[] {
  if (!bbox) return [...pins];
  let lo = 0;
  let hi = pins.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (pins[mid]!.lat < bbox.south) lo = mid + 1;
    else hi = mid;
  }
  const out: PinRecord[] = [];
  const wraps = bbox.west > bbox.east;
  for (let i = lo; i < pins.length && pins[i]!.lat <= bbox.north; i++) {
    const lon = pins[i]!.lon;
    if (wraps ? lon >= bbox.west || lon <= bbox.east : lon >= bbox.west && lon <= bbox.east)
      out.push(pins[i]!);
  }
  return out;
}

/** `south,west,north,east` as numbers, or null when malformed or south > north. */
export function parseBbox(text: string): Bbox | null {
  const parts = text.split(',');
  if (parts.length !== 4) return null;
  if (!parts.every((p) => /^\s*-?(\d+(\.\d*)?|\.\d+)\s*$/.test(p))) return null;
  const [south, west, north, east] = parts.map(Number) as [number, number, number, number];
  const lat = (v: number) => v >= -90 && v <= 90;
  const lon = (v: number) => v >= -180 && v <= 180;
  if (!lat(south) || !lat(north) || !lon(west) || !lon(east) || south > north) return null;
  return { south, west, north, east };
}
