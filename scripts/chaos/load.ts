import mqtt, { type MqttClient } from 'mqtt';
import { publish } from '../../test/helpers/mqtt.ts';
import type { Installation } from './installation.ts';
import { readingKey, type SentReading } from './types.ts';

/**
 * Steady ingest load on an installation while a scenario injects faults: HTTP senders (one device
 * each, `POST /v1/ingest`) and MQTT senders (one mutual-TLS MQTT 5 connection with the bridge's
 * certificate and one device topic each, QoS 1). Each sender sends one reading at a time and, like a
 * gateway, sends a reading again until it is acknowledged (so a reading stored before a crash whose
 * answer was lost comes back: the cloud must deduplicate it). Every attempt and what the sender was
 * told is recorded for the checker.
 */
export interface LoadOptions {
  httpSenders: number;
  mqttSenders: number;
  /** Pause between one acknowledged reading and the next, per sender (0: as fast as answers come). */
  pauseMs?: number;
  /** How long one attempt may wait for its answer before it is given up and sent again. */
  attemptTimeoutMs?: number;
}

export interface LoadTally {
  /** HTTP answers by status, MQTT PUBACKs by reason code (`puback 0x80`), and `connection error`. */
  answers: Record<string, number>;
  /** 5xx answers and 0x80 PUBACKs that the scenario did not expect, with an example of each. */
  serverErrors: string[];
  /** 503s `db_unavailable` answered without `Retry-After`. */
  bad503: string[];
  /** Valid readings refused with a 4xx other than 429 or a PUBACK other than 0x80/0x97. */
  refused: string[];
}

/**
 * A reading's time in microseconds: two days ago, plus 1,000 s per sender, plus 1 µs per reading
 * (distinct for every sender and reading, a billion readings per sender before they overlap).
 */
const BASE_MICROS = (Date.now() - 2 * 24 * 3600 * 1000) * 1000;
export function readingMicros(sender: number, n: number): number {
  return BASE_MICROS + sender * 1_000_000_000 + n;
}

/** Microseconds since the epoch as RFC 3339 UTC with all six digits. */
export function isoMicros(us: number): string {
  return `${new Date(Math.floor(us / 1000)).toISOString().slice(0, -1)}${String(us % 1000).padStart(3, '0')}Z`;
}

export class Load {
  private readonly ledger = new Map<string, boolean>();
  private stopping = false;
  private readonly running: Promise<void>[] = [];
  private readonly clients: MqttClient[] = [];
  private ackWaiters: ((at: number) => void)[] = [];
  acks = 0;
  readonly tally: LoadTally = { answers: {}, serverErrors: [], bad503: [], refused: [] };
  /** While true, a 503 `db_unavailable` and a PUBACK 0x80 are expected (a database outage). */
  outage = false;

  constructor(
    /** Where the senders go: the installation's ports, or a balancer in front of its replicas. */
    private readonly inst: Pick<Installation, 'url' | 'mqttUrl' | 'topicRoot' | 'bridge' | 'devices'>,
    private readonly options: LoadOptions,
  ) {}

  start(): void {
    const { httpSenders, mqttSenders } = this.options;
    if (httpSenders > this.inst.devices.length) throw new Error('more HTTP senders than devices');
    for (let i = 0; i < httpSenders; i++) this.running.push(this.httpSender(i));
    for (let i = 0; i < mqttSenders; i++) this.running.push(this.mqttSender(i));
  }

  /** Resolves with the time (performance.now()) of the next acknowledgement. */
  nextAck(timeoutMs = 120_000): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no reading acknowledged for ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.ackWaiters.push((at) => {
        clearTimeout(timer);
        resolve(at);
      });
    });
  }

  /** Resolves once `n` more readings have been acknowledged. */
  async acksMore(n: number, timeoutMs = 120_000): Promise<void> {
    const target = this.acks + n;
    while (this.acks < target) await this.nextAck(timeoutMs);
  }

  /** Stops sending: each sender finishes the attempt it is in. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
    await Promise.all(this.clients.map((c) => c.endAsync(true).catch(() => undefined)));
  }

  /** Every reading sent, with whether its sender was told it was accepted. */
  readings(): SentReading[] {
    return [...this.ledger].map(([key, acknowledged]) => ({ key, acknowledged }));
  }

  get sent(): number {
    return this.ledger.size;
  }

  private count(what: string): void {
    this.tally.answers[what] = (this.tally.answers[what] ?? 0) + 1;
  }

  private record(key: string, acknowledged: boolean): void {
    this.ledger.set(key, (this.ledger.get(key) ?? false) || acknowledged);
    if (!acknowledged) return;
    this.acks++;
    const at = performance.now();
    const waiters = this.ackWaiters;
    this.ackWaiters = [];
    for (const w of waiters) w(at);
  }

  private async pause(ms: number): Promise<void> {
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  }

  private async httpSender(index: number): Promise<void> {
    const device = this.inst.devices[index]!;
    const timeout = this.options.attemptTimeoutMs ?? 30_000;
    for (let n = 0; !this.stopping; n++) {
      const us = readingMicros(index, n);
      const key = readingKey(device.localId, 'temperature', us);
      const body = JSON.stringify({
        device: device.localId,
        ts: isoMicros(us),
        measurements: [{ type: 'temperature', value: (n % 40) - 10 }],
      });
      // Sent again until acknowledged; once stopping, the attempt under way is the last.
      for (let attempt = 0; ; attempt++) {
        if (attempt > 0 && this.stopping) break;
        let status: number;
        let text: string;
        let retryAfter: string | null;
        try {
          const response = await fetch(`${this.inst.url}/v1/ingest`, {
            method: 'POST',
            headers: { authorization: `Bearer ${device.token}`, 'content-type': 'application/json' },
            body,
            signal: AbortSignal.timeout(timeout),
          });
          status = response.status;
          text = await response.text();
          retryAfter = response.headers.get('retry-after');
        } catch (err) {
          const cause = (err as { cause?: { code?: string; message?: string } }).cause;
          this.count(`connection error (${cause?.code ?? cause?.message ?? (err as Error).name})`);
          this.record(key, false);
          await this.pause(50);
          continue;
        }
        this.count(String(status));
        if (status === 200) {
          this.record(key, true);
          break;
        }
        this.record(key, false);
        if (status >= 500) this.judge5xx(status, text, retryAfter);
        else if (status !== 429) {
          // A refusal of a valid reading: nothing to retry; it shows as "rejected" in the notes.
          this.tally.refused.push(`HTTP ${status} for a valid reading: ${text.slice(0, 300)}`);
          break;
        }
        await this.pause(status === 429 || status === 503 ? 200 : 50);
      }
      await this.pause(this.options.pauseMs ?? 0);
    }
  }

  private judge5xx(status: number, text: string, retryAfter: string | null): void {
    // Load shed by admission control: a correct refusal (nothing stored, sent again) in any scenario.
    if (status === 503 && text.includes('"overloaded"')) {
      if (retryAfter === null || !/^\d+$/.test(retryAfter))
        this.tally.bad503.push(`503 without Retry-After: ${text.slice(0, 200)}`);
      return;
    }
    const dbUnavailable = status === 503 && text.includes('"db_unavailable"');
    if (dbUnavailable && this.outage) {
      if (retryAfter === null || !/^\d+$/.test(retryAfter))
        this.tally.bad503.push(`503 without Retry-After: ${text.slice(0, 200)}`);
      return;
    }
    this.tally.serverErrors.push(`HTTP ${status}: ${text.slice(0, 300)}`);
  }

  private async mqttSender(index: number): Promise<void> {
    const { bridge, mqttUrl, topicRoot } = this.inst;
    const localId = `mqtt-${index}`;
    const client = mqtt.connect(mqttUrl, {
      protocolVersion: 5,
      clientId: `chaos-${index}`,
      clean: true,
      reconnectPeriod: 100,
      connectTimeout: 10_000,
      cert: bridge.cert_pem,
      key: bridge.key_pem,
      ca: bridge.ca_pem,
    });
    client.on('error', () => undefined); // refused connections are retried by mqtt.js
    this.clients.push(client);
    const timeout = this.options.attemptTimeoutMs ?? 30_000;
    const topic = `${topicRoot}/${localId}`;
    for (let n = 0; !this.stopping; n++) {
      const us = readingMicros(100 + index, n);
      const key = readingKey(localId, 'temperature', us);
      const payload = {
        ts: isoMicros(us),
        measurements: [{ type: 'temperature', value: (n % 40) - 10 }],
      };
      for (let attempt = 0; ; attempt++) {
        if (attempt > 0 && this.stopping) break;
        if (!client.connected) {
          // mqtt.js would queue the publish until it reconnects; waiting here keeps one attempt per connection.
          await new Promise<void>((resolve) => {
            const done = () => {
              clearInterval(poll);
              client.off('connect', done);
              resolve();
            };
            const poll = setInterval(() => this.stopping && done(), 100);
            client.once('connect', done);
          });
          if (this.stopping) {
            if (attempt === 0) this.record(key, false);
            break;
          }
        }
        const answer = await publishOnce(client, topic, payload, timeout);
        if (answer === null || answer === 'timeout') {
          this.count(answer === null ? 'connection error' : 'puback timeout');
          this.record(key, false);
          continue;
        }
        const code = `puback 0x${answer.reasonCode.toString(16).padStart(2, '0')}`;
        this.count(code);
        if (answer.reasonCode === 0) {
          this.record(key, true);
          break;
        }
        this.record(key, false);
        if (answer.reasonCode === 0x80 && !this.outage)
          this.tally.serverErrors.push(`${code}: ${answer.reasonString ?? ''}`);
        if (answer.reasonCode !== 0x80 && answer.reasonCode !== 0x97) {
          this.tally.refused.push(`${code} for a valid reading: ${answer.reasonString ?? ''}`);
          break;
        }
        await this.pause(200);
      }
      await this.pause(this.options.pauseMs ?? 0);
    }
  }
}

/** One attempt: the PUBACK, `null` when the connection closed first, `timeout` when none came in time. */
async function publishOnce(
  client: MqttClient,
  topic: string,
  payload: unknown,
  timeoutMs: number,
): Promise<Awaited<ReturnType<typeof publish>> | null | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  let onClose: (() => void) | undefined;
  try {
    return await Promise.race([
      publish(client, topic, payload).catch(() => null),
      new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs))),
      new Promise<null>((resolve) => client.once('close', (onClose = () => resolve(null)))),
    ]);
  } finally {
    clearTimeout(timer);
    if (onClose) client.off('close', onClose);
  }
}
