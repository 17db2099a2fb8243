import { climate, type ClimateValues } from './values.ts';
import { Repeat } from './repeat.ts';

/**
 * A Shelly H&T first generation (SHHT-1) sending its "report sensor values" URL action:
 * `GET <url>?hum=61&temp=4.25&id=shellyht-EE45E9` with the firmware's User-Agent
 * (reference/protocols.md, "Gen1 H&T"). Point `url` at the gateway's Shelly HTTP listener.
 */
export class ShellyHtGen1Emulator {
  private readonly repeat: Repeat;
  private readonly values: () => ClimateValues;
  /** Every report and the HTTP status it got, in order. */
  readonly sent: { query: string; status: number }[] = [];

  constructor(
    private readonly options: {
      url: string;
      id: string;
      intervalMs?: number;
      onSent?: (query: string, status: number) => void;
    },
  ) {
    this.repeat = new Repeat(async () => void (await this.report()), options.intervalMs ?? 10_000);
    this.values = climate(4);
  }

  /** Sends one report (given values, or the next of the random walk) and returns the HTTP status. */
  async report(values: Partial<ClimateValues> = {}): Promise<number> {
    const v = { ...this.values(), ...values };
    const query = `hum=${Math.round(v.humidity)}&temp=${v.temperature}&id=${encodeURIComponent(this.options.id)}`;
    const url = `${this.options.url}${this.options.url.includes('?') ? '&' : '?'}${query}`;
    let status: number;
    try {
      const res = await fetch(url, {
        headers: { 'user-agent': 'Shelly/20230913-112531/v1.14.0-gcb84623 (SHHT-1)' },
      });
      await res.arrayBuffer();
      status = res.status;
    } catch {
      status = 0; // the gateway is unreachable: a real H&T simply tries again at its next wake-up
    }
    this.sent.push({ query, status });
    this.options.onSent?.(query, status);
    return status;
  }

  start(): void {
    this.repeat.start();
  }

  stop(): void {
    this.repeat.stop();
  }
}
