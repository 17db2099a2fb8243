import { SerialPort } from 'serialport';
import { IngestValidationError } from '../../../../shared/ingest.ts';
import type { CheckResult, Collector, CollectorDeps, IdentifyResult } from '../../collector.ts';
import type { SerialConfig, SerialPortConfig } from '../../config.ts';
import type { Logger } from '../../logger.ts';
import { ReadingRefused } from '../../reading.ts';
import { LineSplitter } from './line-splitter.ts';
import { LineError, parseLine } from './lines.ts';

/** Lines longer than this are not sensor lines (a wrong baud rate produces endless garbage). */
const MAX_LINE = 1024;

/**
 * One serial port: opens it, reads lines, and reopens it with a growing delay whenever it fails to
 * open or disappears (a USB adapter unplugged, a pseudo-terminal closed), until stopped.
 */
class PortSession {
  private port: SerialPort | null = null;
  private reopenTimer: NodeJS.Timeout | null = null;
  private delay: number;
  private stopped = false;
  readonly devices = new Set<string>();

  constructor(
    private readonly config: SerialPortConfig,
    private readonly deps: CollectorDeps,
    private readonly log: Logger,
  ) {
    this.delay = config.reopen_min_ms;
  }

  get isOpen(): boolean {
    return this.port?.isOpen ?? false;
  }

  start(): void {
    this.devices.add(this.config.device);
    this.open();
  }

  private open(): void {
    this.reopenTimer = null;
    if (this.stopped) return;
    const port = new SerialPort({ path: this.config.path, baudRate: this.config.baud_rate, autoOpen: false });
    const lines = port.pipe(new LineSplitter(MAX_LINE));
    lines.on('data', (line: string) => this.onLine(line));
    lines.on('overlong', () => this.ignored({ maxLength: MAX_LINE }, 'serial line too long: ignored'));
    lines.on('unended', () => this.ignored({}, 'serial line cut off by the port closing: ignored'));
    port.on('error', (err) =>
      this.log.warn({ path: this.config.path, err: err.message }, 'serial port error'),
    );
    port.on('close', (err?: Error & { disconnected?: boolean }) => {
      if (this.port !== port) return;
      this.port = null;
      this.deps.counters.errors++;
      this.log.warn(
        { path: this.config.path, err: err?.message },
        'serial port closed: waiting for it to come back',
      );
      this.scheduleReopen();
    });
    this.port = port;
    port.open((err) => {
      if (this.port !== port) return;
      if (err) {
        this.port = null;
        this.deps.counters.state = 'waiting for port';
        this.log.debug(
          { path: this.config.path, err: err.message, retryInMs: this.delay },
          'serial port not available',
        );
        this.scheduleReopen();
        return;
      }
      this.delay = this.config.reopen_min_ms;
      this.deps.counters.state = 'open';
      this.log.info(
        { path: this.config.path, baudRate: this.config.baud_rate, format: this.config.format },
        'serial port open',
      );
    });
  }

  private scheduleReopen(): void {
    if (this.stopped || this.reopenTimer) return;
    this.deps.counters.state = 'waiting for port';
    this.reopenTimer = setTimeout(() => this.open(), this.delay);
    this.delay = Math.min(this.delay * 2, this.config.reopen_max_ms);
  }

  /** A line the splitter dropped: received, invalid, logged. */
  private ignored(fields: Record<string, unknown>, msg: string): void {
    this.deps.counters.received++;
    this.deps.counters.invalid++;
    this.log.info({ path: this.config.path, ...fields }, msg);
  }

  private onLine(line: string): void {
    if (line.trim() === '') return;
    const { counters, sink } = this.deps;
    counters.received++;
    let parsed;
    try {
      parsed = parseLine(this.config.format, line);
    } catch (err) {
      if (!(err instanceof IngestValidationError || err instanceof LineError)) throw err;
      counters.invalid++;
      this.log.info({ path: this.config.path, line, reason: err.message }, 'serial line refused');
      return;
    }
    if (parsed.measurements.length === 0) {
      counters.invalid++;
      this.log.info({ path: this.config.path, line }, 'serial line without a measurement');
      return;
    }
    const device = parsed.device ?? this.config.device;
    // The model first (same commit), so a device the cloud creates on this reading gets it.
    Promise.all([
      sink.deviceInfo({ device, model: this.config.model }),
      sink.accept({ device, ts: parsed.ts, measurements: parsed.measurements }),
    ]).then(
      () => {
        counters.accepted++;
        this.devices.add(device);
      },
      (err: unknown) => {
        if (err instanceof ReadingRefused && err.code === 'invalid') {
          counters.invalid++;
          this.log.info({ path: this.config.path, device, line, reason: err.message }, 'serial line refused');
          return;
        }
        // A serial sensor cannot be told to resend: a line the buffer refuses is lost, counted
        // in the status (`refused` and `lost`) and logged with the line itself.
        counters.refused++;
        counters.lost++;
        this.log.error(
          {
            path: this.config.path,
            device,
            line,
            code: err instanceof ReadingRefused ? err.code : undefined,
            err: (err as Error).message,
            lost: counters.lost,
          },
          'serial reading lost: not accepted',
        );
      },
    );
  }

  identify(): Promise<IdentifyResult> {
    const command = this.config.identify_command;
    if (command === undefined) return Promise.resolve('unsupported');
    const port = this.port;
    if (!port?.isOpen) return Promise.resolve('unreachable');
    return new Promise((resolve) => {
      port.write(`${command}\n`, (err) => {
        if (err) {
          this.log.warn({ path: this.config.path, err: err.message }, 'identify command not written');
          resolve('unreachable');
        } else resolve('sent');
      });
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    this.reopenTimer = null;
    const port = this.port;
    this.port = null;
    if (port?.isOpen) await new Promise<void>((resolve) => port.close(() => resolve()));
    else port?.destroy();
  }
}

/**
 * Serial: line-based sensors on serial ports (node-serialport), in the `kv` or `vaisala` line
 * format (see lines.ts). Each port reopens by itself when it disappears and comes back. A reading
 * carries the gateway's receive time unless the line has its own `ts=`.
 */
export class SerialCollector implements Collector {
  readonly name = 'serial';
  private sessions: PortSession[] = [];

  constructor(private readonly deps: CollectorDeps & { config: SerialConfig }) {}

  async start(_signal: AbortSignal): Promise<void> {
    if (this.sessions.length > 0) return;
    this.sessions = this.deps.config.ports.map(
      (p) => new PortSession(p, this.deps, this.deps.log.child({ port: p.path })),
    );
    for (const s of this.sessions) s.start();
  }

  owns(device: string): boolean {
    return this.sessions.some((s) => s.devices.has(device));
  }

  identify(device: string): Promise<IdentifyResult> {
    const session = this.sessions.find((s) => s.devices.has(device));
    return session ? session.identify() : Promise.resolve('unsupported');
  }

  /** Opens each port and waits up to 5 s for one line, printing how it parses. */
  async check(signal: AbortSignal): Promise<CheckResult> {
    const details: string[] = [];
    let ok = true;
    for (const p of this.deps.config.ports) {
      const line = await firstLine(p, signal, 5000);
      if (line.error) {
        ok = false;
        details.push(`${p.path}: ${line.error}`);
        continue;
      }
      if (line.text === null) {
        details.push(`${p.path}: open at ${p.baud_rate} baud, but no line within 5 s`);
        continue;
      }
      try {
        const parsed = parseLine(p.format, line.text);
        const values = parsed.measurements.map(
          (m) => `${m.kind}${m.label ? `.${m.label}` : ''}=${m.value} ${m.unit}`,
        );
        details.push(
          `${p.path}: ${JSON.stringify(line.text)} → ${parsed.device ?? p.device}: ${values.join(', ') || 'no measurement'}`,
        );
        if (values.length === 0) ok = false;
      } catch (err) {
        ok = false;
        details.push(
          `${p.path}: ${JSON.stringify(line.text)} does not parse as ${p.format}: ${(err as Error).message}`,
        );
      }
    }
    return { ok, details };
  }

  async stop(): Promise<void> {
    const sessions = this.sessions;
    this.sessions = [];
    await Promise.all(sessions.map((s) => s.stop()));
    this.deps.counters.state = 'stopped';
  }
}

function firstLine(
  config: SerialPortConfig,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<{ text: string | null; error?: string }> {
  return new Promise((resolve) => {
    const port = new SerialPort({ path: config.path, baudRate: config.baud_rate, autoOpen: false });
    const parser = port.pipe(new LineSplitter(MAX_LINE));
    let done = false;
    const finish = (result: { text: string | null; error?: string }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (port.isOpen) port.close(() => resolve(result));
      else resolve(result);
    };
    const onAbort = () => finish({ text: null, error: 'aborted' });
    const timer = setTimeout(() => finish({ text: null }), timeoutMs);
    signal.addEventListener('abort', onAbort);
    port.on('error', (err) => finish({ text: null, error: err.message }));
    parser.on('data', (line: string) => {
      if (line.trim() !== '') finish({ text: line });
    });
    port.open((err) => {
      if (err) finish({ text: null, error: `cannot open: ${err.message}` });
    });
  });
}
