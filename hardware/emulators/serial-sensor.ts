import { spawn, type ChildProcess } from 'node:child_process';
import { Repeat } from './repeat.ts';
import fs from 'node:fs';
import { climate, type ClimateValues } from './values.ts';

/**
 * A line-based serial sensor on a pseudo-terminal pair made by socat (Debian package `socat`):
 * the emulator writes lines to `sensorPath`, and the gateway reads them from `gatewayPath`, a real
 * tty as a USB serial adapter would be. `unplug()` ends socat, so both ends vanish as an adapter
 * pulled from the Pi does; `plug()` makes the pair again under the same names.
 *
 * Formats: `kv` (`temperature=4.25 humidity=61.0 battery=87`) and `vaisala`
 * (`RH= 61.0 %RH T= 4.25 'C`), as gateway/src/collectors/serial/lines.ts reads them.
 */
export class SerialSensorEmulator {
  private socat: ChildProcess | null = null;
  private out: fs.WriteStream | null = null;
  private readonly repeat: Repeat;
  private readonly values: () => ClimateValues;

  constructor(
    private readonly options: {
      sensorPath: string;
      gatewayPath: string;
      format?: 'kv' | 'vaisala';
      intervalMs?: number;
    },
  ) {
    this.repeat = new Repeat(async () => void (await this.send()), options.intervalMs ?? 10_000);
    this.values = climate(6);
  }

  get gatewayPath(): string {
    return this.options.gatewayPath;
  }

  /** Starts socat and resolves once both ends exist. */
  async plug(): Promise<void> {
    if (this.socat) return;
    const { sensorPath, gatewayPath } = this.options;
    const socat = spawn(
      'socat',
      ['-d', '-d', `pty,raw,echo=0,link=${sensorPath}`, `pty,raw,echo=0,link=${gatewayPath}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.socat = socat;
    await new Promise<void>((resolve, reject) => {
      let err = '';
      const onData = (chunk: Buffer) => {
        err += chunk.toString();
        // socat logs "starting data transfer loop" once both ptys exist.
        if (err.includes('starting data transfer loop')) {
          socat.stderr.off('data', onData);
          resolve();
        }
      };
      socat.stderr.on('data', onData);
      socat.once('error', reject);
      socat.once('exit', (code) => reject(new Error(`socat exited (${code}): ${err}`)));
    });
    socat.stderr.resume();
    this.out = fs.createWriteStream(sensorPath, { flags: 'w' });
    this.out.on('error', () => undefined); // writes after an unplug fail, as they would on a cable
  }

  /** Ends socat: both ends of the pair disappear. Resolves once socat has exited. */
  async unplug(): Promise<void> {
    const socat = this.socat;
    this.socat = null;
    this.out?.destroy();
    this.out = null;
    if (!socat || socat.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => socat.once('exit', () => resolve()));
    socat.kill('SIGTERM');
    await exited;
  }

  line(values: Partial<ClimateValues> & { extra?: string } = {}): string {
    const v = { ...this.values(), ...values };
    const text =
      this.options.format === 'vaisala'
        ? `RH= ${v.humidity.toFixed(1)} %RH T= ${v.temperature.toFixed(2)} 'C`
        : `temperature=${v.temperature} humidity=${v.humidity} battery=${Math.round(v.battery)}`;
    return values.extra ? `${text} ${values.extra}` : text;
  }

  /** Writes one line (CR LF, as most sensors end them); resolves once it is written to the pty. */
  send(values: Partial<ClimateValues> & { extra?: string } = {}): Promise<string> {
    const out = this.out;
    const text = this.line(values);
    if (!out) return Promise.reject(new Error('unplugged'));
    return new Promise((resolve, reject) =>
      out.write(`${text}\r\n`, (err) => (err ? reject(err) : resolve(text))),
    );
  }

  start(): void {
    this.repeat.start();
  }

  async stop(): Promise<void> {
    this.repeat.stop();
    await this.unplug();
  }
}
