import { afterEach, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Intake } from '../../gateway/src/buffer/intake.ts';
import { ShellyHttpCollector } from '../../gateway/src/collectors/shelly-http/shelly-http.collector.ts';
import { GatewayStatus } from '../../gateway/src/status.ts';
import { ReadingQueue } from '../../gateway/src/buffer/reading-queue.ts';
import { wallClock, type Clock } from '../../gateway/src/clock.ts';
import { createLogger } from '../../gateway/src/logger.ts';
import { tempDir } from '../helpers/databases.ts';
import { noMemory } from './helpers/gateway.ts';

const BOOT = Date.UTC(2026, 10, 20, 6, 0, 0); // what a Pi without a battery clock last saved
const SYNCED = Date.UTC(2026, 10, 29, 14, 0, 0); // what NTP says once the network is up

/** A wall clock and a monotonic clock the test moves. */
function clocks(wallStart: number) {
  const at = { wall: wallStart, mono: 1000 };
  const clock = wallClock(
    () => at.wall,
    () => at.mono,
  );
  const advance = (ms: number) => {
    at.wall += ms;
    at.mono += ms;
  };
  return { at, clock, advance };
}

describe("the gateway's clock", () => {
  it('follows a step of the wall clock (NTP after boot), forward and back, keeping sub-millisecond resolution', () => {
    const { at, clock, advance } = clocks(BOOT);
    expect(clock.nowMicros()).toBe(BOOT * 1000);
    advance(0.25);
    expect(clock.nowMicros()).toBe(BOOT * 1000 + 250);
    // NTP steps the wall clock nine days ahead; the monotonic clock does not move.
    at.wall = SYNCED;
    expect(clock.nowMicros()).toBe(SYNCED * 1000);
    advance(10_000.5);
    expect(clock.nowMicros()).toBe((SYNCED + 10_000) * 1000 + 500);
    // And back, as a wrong server or an operator's `date -s` would.
    at.wall -= 3_600_000;
    expect(clock.nowMicros()).toBe((SYNCED + 10_000 - 3_600_000) * 1000 + 500);
  });

  it('keeps the monotonic clock for the wall clock’s millisecond ticks (no jitter below the step)', () => {
    const { at, clock } = clocks(BOOT);
    at.mono += 0.6;
    at.wall += 1; // Date.now() rounds to the millisecond
    expect(clock.nowMicros()).toBe(BOOT * 1000 + 600);
  });
});

describe('the intake while the clock reads before 2000', () => {
  let dir: string;
  let queue: ReadingQueue;
  afterEach(() => {
    queue.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function intakeAt(clock: Clock): Intake {
    dir = tempDir('sm-clock-');
    const log = createLogger('error', new Writable({ write: (_c, _e, done) => done() }));
    queue = new ReadingQueue({ file: path.join(dir, 'buffer.db'), capacity: 100, log });
    queue.open();
    return new Intake({ queue, clock, log });
  }

  it('refuses readings, states and infos (clock_unset) and buffers nothing; accepts once the clock is set', async () => {
    const { at, clock } = clocks(Date.UTC(1970, 0, 1, 0, 0, 42));
    const intake = intakeAt(clock);
    const reading = {
      device: 'fridge-1',
      ts: Date.UTC(2026, 10, 29) * 1000,
      measurements: [{ kind: 'temperature' as const, label: null, value: 4, unit: '°C' }],
    };
    await expect(intake.accept(reading)).rejects.toMatchObject({
      code: 'clock_unset',
      message: expect.stringContaining('1970-01-01T00:00:42.000Z, before 2000'),
    });
    await expect(
      intake.deviceState({ device: 'fridge-1', status: 'online', at: 42_000_000 }),
    ).rejects.toMatchObject({ code: 'clock_unset' });
    await expect(intake.deviceInfo({ device: 'fridge-1', model: 'shelly-plus-ht' })).rejects.toMatchObject({
      code: 'clock_unset',
    });
    expect(queue.peek(0, 10)).toEqual([]);

    at.wall = SYNCED;
    await intake.accept(reading);
    await intake.accept({ ...reading, ts: null });
    expect(queue.peek(0, 10).map((r) => r.ts)).toEqual([reading.ts, SYNCED * 1000]);
  });

  it('follows the clock stepped back, instead of stamping every later reading one microsecond apart', async () => {
    const { at, clock, advance } = clocks(SYNCED);
    const intake = intakeAt(clock);
    const reading = {
      device: 'fridge-1',
      ts: null,
      measurements: [{ kind: 'temperature' as const, label: null, value: 4, unit: '°C' }],
    };
    await intake.accept(reading);
    await intake.accept(reading); // the same microsecond: one later
    at.wall -= 3_600_000; // an operator's `date -s`, an hour back
    await intake.accept(reading);
    advance(60_000);
    await intake.accept(reading);
    expect(queue.peek(0, 10).map((r) => r.ts)).toEqual([
      SYNCED * 1000,
      SYNCED * 1000 + 1,
      (SYNCED - 3_600_000) * 1000,
      (SYNCED - 3_600_000 + 60_000) * 1000,
    ]);
  });
});

describe('a Shelly report while the clock reads before 2000', () => {
  it('is 503 clock_unset (sent again later), also with a ts= of its own, not 400 for a time "in the future"', async () => {
    const { clock } = clocks(Date.UTC(1970, 0, 1, 0, 0, 42));
    const accepted: unknown[] = [];
    const collector = new ShellyHttpCollector({
      config: { enabled: true, host: '127.0.0.1', port: 0, devices: {} },
      sink: {
        accept: (r) => Promise.resolve(void accepted.push(r)),
        deviceInfo: () => Promise.resolve(),
        deviceState: () => Promise.resolve(),
      },
      clock,
      log: createLogger('error', new Writable({ write: (_c, _e, done) => done() })),
      counters: new GatewayStatus().collector('shelly-http'),
      memory: noMemory,
    });
    await collector.start(new AbortController().signal);
    try {
      for (const query of ['id=hall&temp=4.5', `id=hall&temp=4.5&ts=${Math.floor(SYNCED / 1000)}`]) {
        const answer = await fetch(`http://127.0.0.1:${collector.port}/?${query}`);
        expect([answer.status, answer.headers.get('retry-after')]).toEqual([503, '60']);
        expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('clock_unset');
      }
      expect(accepted).toEqual([]);
    } finally {
      await collector.stop();
    }
  });
});
