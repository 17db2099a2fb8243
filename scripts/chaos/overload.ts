import http from 'node:http';
import { check } from './checker.ts';
import {
  prepareInstallation,
  startCloud,
  stopCloud,
  storedKeys,
  type CloudRun,
  type Installation,
} from './installation.ts';
import { isoMicros, readingMicros } from './load.ts';
import { sleep } from './result.ts';
import { readingKey, type Scenario, type ScenarioOptions, type ScenarioResult } from './types.ts';

const DEVICES = 20;
/**
 * Senders of the sustainable-rate measure, each waiting for its answer: enough that the cloud's
 * ingest groups fill (its throughput, not the round trip, is the limit).
 */
const MEASURE_SENDERS = 64;
/** Requests open at once, at most: the harness's own budget of sockets (and the devices it plays). */
const MAX_OPEN = 4000;
/** How much more than the sustainable rate the overload offers. */
const FACTOR = 10;
/** Memory the cloud may reach under overload: far above its working set, far below a small host's RAM. */
const RSS_LIMIT = 1024 * 1024 * 1024;

/**
 * Scenario 5: ten times the sustainable ingest rate. The sustainable rate is measured first (HTTP
 * readings acknowledged per second by MEASURE_SENDERS senders that each wait for their answer); then readings
 * arrive at ten times that rate whatever the answers (an open loop, as a fleet of devices sends), for
 * the scenario's duration; then the measure is taken again. Answers must be 2xx, 429 or 503 only,
 * the process must live, its memory stay under RSS_LIMIT, and the rate after must be back to at
 * least half the rate before (in the short form: readings acknowledged again). Recovery: from the end of the overload until every request of it was answered (the
 * backlog drained). The checker runs as in every scenario: an acknowledged reading is stored once.
 */
export const overload: Scenario = {
  name: 'overload',
  description: `${FACTOR}x the sustainable HTTP ingest rate, open loop; answers only 2xx/429/503, memory bounded`,
  async run(options: ScenarioOptions): Promise<ScenarioResult> {
    const overloadMs = options.durationMs ?? (options.full ? 60_000 : 2000);
    const measureMs = options.full ? 10_000 : 1000;
    const inst = await prepareInstallation({ db: options.db, httpDevices: DEVICES });
    const startedAt = performance.now();
    const cloud = await startCloud(inst);
    const sender = new Sender(inst, cloud);
    try {
      await sender.closedLoop(MEASURE_SENDERS, options.full ? 2000 : 300); // warm up: channels made, statements prepared
      const before = await sender.closedLoop(MEASURE_SENDERS, measureMs);
      const rssBefore = cloud.rss();
      const rate = before * FACTOR;
      options.log(
        `sustainable: ${before.toFixed(0)} readings/s; offering ${rate.toFixed(0)}/s for ${overloadMs} ms`,
      );
      let peakRss = rssBefore;
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, cloud.rss())), 100);
      const offered = await sender.openLoop(rate, overloadMs);
      const overEnd = performance.now();
      await sender.drained();
      const recoveryMs = performance.now() - overEnd;
      clearInterval(sampler);
      peakRss = Math.max(peakRss, cloud.rss());
      const after = await sender.closedLoop(MEASURE_SENDERS, measureMs);
      options.log(`after: ${after.toFixed(0)} readings/s; peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`);

      const checked = check(sender.readings(), await storedKeys(inst));
      const failed: string[] = [];
      if (cloud.child.exitCode !== null || cloud.child.signalCode !== null) failed.push('the cloud died');
      if (peakRss > RSS_LIMIT) failed.push(`peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB over the limit`);
      // On a shared machine two measures of a few seconds vary several times over: the short form
      // asks only that readings are acknowledged again, the full one that the rate is back to half.
      if (after <= 0 || (options.full && after < before * 0.5))
        failed.push(`throughput after ${after.toFixed(0)}/s, before ${before.toFixed(0)}/s`);
      const notes: ScenarioResult['notes'] = {
        'sustainable /s': Math.round(before),
        'offered /s': Math.round(offered.rate),
        'answered /s during': Math.round(offered.answeredRate),
        'after /s': Math.round(after),
        'RSS before MiB': Math.round(rssBefore / 2 ** 20),
        'peak RSS MiB': Math.round(peakRss / 2 ** 20),
        'not sent (client at its open limit)': offered.notSent,
        'error log lines': cloud.errors.count,
      };
      for (const [what, n] of Object.entries(sender.answers).sort()) notes[what] = n;
      for (const [i, e] of sender.serverErrors.slice(0, 3).entries()) notes[`example ${i + 1}`] = e;
      if (failed.length > 0) notes.failed = failed.join('; ');
      const code = await stopCloud(cloud);
      if (code !== 0)
        notes.failed = [notes.failed, `the cloud did not stop cleanly: exit ${code}`]
          .filter(Boolean)
          .join('; ');
      return {
        scenario: this.name,
        db: options.db,
        faults: 1,
        durationMs: Math.round(performance.now() - startedAt),
        sent: sender.sent,
        acknowledged: checked.acknowledged,
        stored: checked.stored,
        lost: checked.lost.length,
        duplicated: checked.duplicated.length,
        unexpected: checked.unexpected.length,
        http5xx: sender.serverErrors.length,
        recoveryMs: Math.round(recoveryMs),
        examples: {
          lost: checked.lost.slice(0, 20),
          duplicated: checked.duplicated.slice(0, 20),
          unexpected: checked.unexpected.slice(0, 20),
        },
        notes,
      };
    } finally {
      sender.close();
      if (cloud.child.exitCode === null) cloud.child.kill('SIGKILL');
      await cloud.exited;
      await inst.dispose();
    }
  },
};

/** HTTP ingest requests of one reading each, every one recorded for the checker. */
class Sender {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1000 });
  private readonly ledger = new Map<string, boolean>();
  private readonly next = new Array<number>(DEVICES).fill(0);
  private turn = 0;
  private open = 0;
  private drainWaiters: (() => void)[] = [];
  readonly answers: Record<string, number> = {};
  readonly serverErrors: string[] = [];

  constructor(
    private readonly inst: Installation,
    private readonly cloud: CloudRun,
  ) {}

  get sent(): number {
    return this.ledger.size;
  }

  readings() {
    return [...this.ledger].map(([key, acknowledged]) => ({ key, acknowledged }));
  }

  close(): void {
    this.agent.destroy();
  }

  /** One new reading of the next device; resolves with its status (0: no answer). */
  send(): Promise<number> {
    const d = this.turn++ % DEVICES;
    const device = this.inst.devices[d]!;
    const us = readingMicros(d, this.next[d]!++);
    const key = readingKey(device.localId, 'temperature', us);
    this.ledger.set(key, false);
    const body = JSON.stringify({
      device: device.localId,
      ts: isoMicros(us),
      measurements: [{ type: 'temperature', value: 4 }],
    });
    this.open++;
    return new Promise<number>((resolve) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: this.inst.httpPort,
          path: '/v1/ingest',
          method: 'POST',
          agent: this.agent,
          timeout: 60_000,
          headers: {
            authorization: `Bearer ${device.token}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            if (status === 200) this.ledger.set(key, true);
            else if (status !== 429 && status !== 503)
              this.serverErrors.push(`HTTP ${status}: ${text.slice(0, 300)}`);
            this.done(String(status), resolve, status);
          });
          res.on('error', () => this.done('connection error', resolve, 0));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (err) =>
        this.done(err.message === 'timeout' ? 'timeout' : 'connection error', resolve, 0),
      );
      req.end(body);
    });
  }

  private done(what: string, resolve: (status: number) => void, status: number): void {
    this.answers[what] = (this.answers[what] ?? 0) + 1;
    this.open--;
    if (this.open === 0) for (const w of this.drainWaiters.splice(0)) w();
    resolve(status);
  }

  /** Resolves once every request sent has been answered (or has failed). */
  drained(): Promise<void> {
    if (this.open === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** `senders` each sending a reading once the previous one is answered; acknowledged readings per second. */
  async closedLoop(senders: number, ms: number): Promise<number> {
    const end = performance.now() + ms;
    let acked = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: senders }, async () => {
        while (performance.now() < end) if ((await this.send()) === 200) acked++;
      }),
    );
    return acked / ((performance.now() - started) / 1000);
  }

  /**
   * Readings started at `rate` per second for `ms`, whatever the answers (in ticks of 10 ms), up to
   * MAX_OPEN open at once: the offered rate achieved and the answers' rate while it ran.
   */
  async openLoop(rate: number, ms: number): Promise<{ rate: number; answeredRate: number; notSent: number }> {
    const started = performance.now();
    let started_ = 0;
    let notSent = 0;
    let answered = 0;
    for (;;) {
      const elapsed = performance.now() - started;
      if (elapsed >= ms) break;
      const due = Math.floor((elapsed / 1000) * rate);
      while (started_ < due) {
        started_++;
        if (this.open >= MAX_OPEN) {
          notSent++;
          continue;
        }
        void this.send().then((status) => status !== 0 && answered++);
      }
      if (this.cloud.child.exitCode !== null) break;
      await sleep(10);
    }
    const seconds = (performance.now() - started) / 1000;
    return { rate: (started_ - notSent) / seconds, answeredRate: answered / seconds, notSent };
  }
}
