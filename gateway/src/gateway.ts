import fs from 'node:fs';
import path from 'node:path';
import { Intake } from './buffer/intake.ts';
import { ReadingQueue } from './buffer/reading-queue.ts';
import { systemClock, type Clock } from './clock.ts';
import type { CheckResult, Collector, CollectorDeps, IdentifyResult } from './collector.ts';
import { createCollectors } from './collectors/index.ts';
import type { GatewayConfig } from './config.ts';
import type { Logger } from './logger.ts';
import type { ReadingSink } from './reading.ts';
import { StatusPage } from './status-page.ts';
import { GatewayStatus, type StatusSnapshot } from './status.ts';
import { probeUplink, Uplink } from './uplink/uplink.ts';

/** Set by the production build (scripts/build-gateway.ts), which has no package.json beside it. */
declare const GATEWAY_BUILD_VERSION: string | undefined;

export const GATEWAY_VERSION: string =
  typeof GATEWAY_BUILD_VERSION === 'string'
    ? GATEWAY_BUILD_VERSION
    : (
        JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../package.json'), 'utf8')) as {
          version: string;
        }
      ).version;

export interface CheckReport {
  ok: boolean;
  sections: { name: string; result: CheckResult }[];
  status: StatusSnapshot;
}

/**
 * The gateway process: the durable buffer, the collectors the configuration enables, and the
 * uplink that drains the buffer to the cloud. Nothing happens in the constructor; `start` opens
 * everything, `stop` closes it in the order that loses nothing (inputs first, then the uplink, then
 * the buffer) and is safe to call twice.
 */
export class Gateway {
  readonly status = new GatewayStatus();
  readonly queue: ReadingQueue;
  readonly intake: Intake;
  collectors: Collector[] = [];
  readonly uplink: Uplink;
  readonly statusPage: StatusPage | null;
  private readonly log: Logger;
  private abort: AbortController | null = null;
  private statusTimer: NodeJS.Timeout | null = null;
  private stopping: Promise<void> | null = null;
  private readonly collectorDeps: (name: string) => CollectorDeps;

  constructor(private readonly deps: { config: GatewayConfig; log: Logger; clock?: Clock }) {
    const { config, log } = deps;
    const clock = deps.clock ?? systemClock;
    this.log = log.child({ module: 'gateway' });
    this.queue = new ReadingQueue({
      file: path.join(config.dataDir, 'buffer.db'),
      capacity: config.bufferCapacity,
      log: log.child({ module: 'buffer' }),
    });
    this.intake = new Intake({ queue: this.queue, clock, log: log.child({ module: 'intake' }) });
    // The intake, noting each buffered reading for the status page's "last readings".
    const sink: ReadingSink = {
      accept: (reading) =>
        this.intake.accept(reading).then(() =>
          this.status.noteReading({
            device: reading.device,
            at: Math.floor((reading.ts ?? clock.nowMicros()) / 1000),
            measurements: reading.measurements.map(({ kind, label, value, unit }) => ({
              kind,
              label,
              value,
              unit,
            })),
          }),
        ),
      deviceState: (state) => this.intake.deviceState(state),
      deviceInfo: (info) => this.intake.deviceInfo(info),
    };
    this.collectorDeps = (name) => ({
      sink,
      clock,
      log: log.child({ module: `collector:${name}` }),
      counters: this.status.collector(name),
      memory: {
        recall: () => this.queue.recall(name),
        remember: (key, value) => void this.queue.remember(name, key, value),
      },
    });
    this.uplink = new Uplink({
      config: config.uplink,
      gatewayId: config.gatewayId,
      version: GATEWAY_VERSION,
      queue: this.queue,
      status: this.status,
      log: log.child({ module: 'uplink' }),
      identify: (device) => this.identify(device),
    });
    this.statusPage = config.statusPage
      ? new StatusPage({
          ...config.statusPage,
          gatewayId: config.gatewayId,
          version: GATEWAY_VERSION,
          snapshot: () => this.status.snapshot(),
          log: log.child({ module: 'status-page' }),
        })
      : null;
    this.status.setBufferProbe(() => {
      const oldest = this.queue.oldestTs();
      return {
        depth: this.queue.depth,
        capacity: this.queue.capacity,
        oldestAgeSeconds:
          oldest === null ? null : Math.max(0, Math.round((clock.nowMicros() - oldest) / 1e6)),
        deadLetters: this.queue.deadLetterCount,
      };
    });
  }

  collector<T extends Collector>(name: string): T {
    const found = this.collectors.find((c) => c.name === name);
    if (!found) throw new Error(`collector ${name} is not enabled`);
    return found as T;
  }

  async start(): Promise<void> {
    if (this.abort) return;
    this.abort = new AbortController();
    this.collectors = await createCollectors(this.deps.config, this.collectorDeps);
    this.queue.open();
    for (const c of this.collectors) await c.start(this.abort.signal);
    this.uplink.start();
    await this.statusPage?.start();
    this.statusTimer = setInterval(() => this.logStatus(), this.deps.config.statusIntervalMs);
    this.statusTimer.unref();
    this.log.info(
      {
        gatewayId: this.deps.config.gatewayId,
        version: GATEWAY_VERSION,
        collectors: this.collectors.map((c) => c.name),
        statusPort: this.statusPage?.port ?? null,
      },
      'gateway started',
    );
  }

  /** The periodic status line: the snapshot without the last readings (the page shows those). */
  logStatus(): void {
    const { recent: _recent, ...status } = this.status.snapshot();
    this.log.info({ status, clockFallbacks: this.intake.clockFallbacks }, 'status');
  }

  /** Routes a `cmd/identify` downlink to the collector that knows the device. */
  async identify(device: string): Promise<IdentifyResult> {
    const owner = this.collectors.find((c) => c.owns(device));
    if (!owner) return 'unreachable';
    return owner.identify(device);
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    if (!this.abort) return;
    this.abort.abort();
    if (this.statusTimer) clearInterval(this.statusTimer);
    this.statusTimer = null;
    await this.statusPage?.stop();
    for (const c of this.collectors) {
      try {
        await c.stop();
      } catch (err) {
        this.log.error({ err, collector: c.name }, 'collector did not stop cleanly');
      }
    }
    await this.uplink.stop();
    this.queue.close();
    const { recent: _recent, ...status } = this.status.snapshot();
    this.log.info({ status }, 'gateway stopped');
  }

  /** `--check`: the buffer, the uplink and each collector, probed without running the gateway. */
  async check(signal: AbortSignal): Promise<CheckReport> {
    const { config } = this.deps;
    const sections: CheckReport['sections'] = [];
    this.collectors = await createCollectors(config, this.collectorDeps);
    try {
      this.queue.open();
      sections.push({
        name: 'buffer',
        result: {
          ok: true,
          details: [
            `${path.join(config.dataDir, 'buffer.db')}: ${this.queue.depth} readings waiting, capacity ${this.queue.capacity}`,
            `${this.queue.deadLetterCount} messages in the dead-letter table`,
          ],
        },
      });
    } catch (err) {
      sections.push({
        name: 'buffer',
        result: { ok: false, details: [`cannot open: ${(err as Error).message}`] },
      });
    }
    sections.push({ name: 'uplink', result: await probeUplink(config.uplink, config.gatewayId, signal) });
    for (const c of this.collectors) sections.push({ name: c.name, result: await c.check(signal) });
    const status = this.status.snapshot();
    this.queue.close();
    return { ok: sections.every((s) => s.result.ok), sections, status };
  }
}
