import { randomUUID } from 'node:crypto';
import { MAX_NOTIFY_BYTES, type NotifyChannel } from '../storage/notify-channel.ts';

/**
 * Change notifications inside the cloud: publishers say what changed (a sensor's value or state, an
 * alarm event, a session ended), subscribers (the dashboard's live stream) hear about it for the
 * topics they listen to. Messages are small JSON objects naming what changed by id; a subscriber
 * reads the current state itself, so a message may be late, merged with others or repeated without
 * harm.
 *
 * This is the one place the cloud's processes share notifications: `ChannelHub` delivers to this
 * process's subscribers at once and, when the database's notify channel is shared (PostgreSQL
 * LISTEN/NOTIFY), to every other replica's too (messages are JSON for that reason).
 */

export interface HubMessage {
  /** What happened, e.g. `sensors.changed`. */
  type: string;
  [field: string]: unknown;
}

export type HubListener = (message: HubMessage) => void;

export interface NotificationHub {
  /** Delivers `message` to the topic's subscribers, after the caller's commit; never throws. */
  publish(topic: string, message: HubMessage): void;
  /** Listens to a topic until the returned function is called. */
  subscribe(topic: string, listener: HubListener): () => void;
  /**
   * Whether anyone may be listening to the topic: publishers skip the work of naming what changed
   * when nobody is. A hub shared between processes answers true when it cannot know.
   */
  listened(topic: string): boolean;
  /** Whether anyone may be listening at all. */
  active(): boolean;
}

/** The topic of everything an account's people may see change. */
export function accountTopic(accountId: string): string {
  return `account:${accountId}`;
}

/** One process's hub: listeners are called synchronously, each failure logged and contained. */
export class InProcessHub implements NotificationHub {
  private readonly topics = new Map<string, Set<HubListener>>();

  constructor(private readonly deps: { onError: (err: unknown, topic: string) => void }) {}

  publish(topic: string, message: HubMessage): void {
    const listeners = this.topics.get(topic);
    if (!listeners) return;
    for (const listener of [...listeners]) {
      try {
        listener(message);
      } catch (err) {
        this.deps.onError(err, topic);
      }
    }
  }

  subscribe(topic: string, listener: HubListener): () => void {
    let listeners = this.topics.get(topic);
    if (!listeners) this.topics.set(topic, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.topics.get(topic) === listeners) this.topics.delete(topic);
    };
  }

  listened(topic: string): boolean {
    return this.topics.has(topic);
  }

  active(): boolean {
    return this.topics.size > 0;
  }
}

/** The notify channel's name for hub messages. */
const HUB_CHANNEL = 'sm_hub';

/**
 * The hub of a cloud process: subscribers of this process hear a message at once (synchronously, as
 * `InProcessHub`); when the database's notify channel is shared, messages also go to the other
 * replicas, batched per tick into as few notifications as fit the channel's payload limit. A
 * message that alone exceeds the limit is split by its `ids` (sensors.changed) or dropped with a
 * logged error. The other replicas' listeners are unknown here, so `listened` and `active` answer
 * true while the channel is shared.
 */
export class ChannelHub implements NotificationHub {
  private readonly local: InProcessHub;
  private readonly origin = randomUUID();
  private queue: string[] = [];
  private flush: Promise<void> | null = null;
  private unlisten: (() => void) | null = null;

  constructor(
    private readonly deps: {
      channel: NotifyChannel;
      onError: (err: unknown, topic: string) => void;
    },
  ) {
    this.local = new InProcessHub({ onError: deps.onError });
  }

  /** Listens to the other replicas' messages; resolves once the channel listens. */
  async start(): Promise<void> {
    const { channel } = this.deps;
    if (!channel.shared || this.unlisten) return;
    this.unlisten = channel.listen(HUB_CHANNEL, (payload) => this.heard(payload));
    await channel.ready();
  }

  /** Sends what is queued and stops listening. */
  async stop(): Promise<void> {
    await this.flush;
    this.unlisten?.();
    this.unlisten = null;
  }

  private heard(payload: string): void {
    let parsed: { o: string; m: [string, HubMessage][] };
    try {
      parsed = JSON.parse(payload) as typeof parsed;
    } catch (err) {
      this.deps.onError(err, HUB_CHANNEL);
      return;
    }
    if (parsed.o === this.origin) return; // delivered here when it was published
    for (const [topic, message] of parsed.m) this.local.publish(topic, message);
  }

  publish(topic: string, message: HubMessage): void {
    this.local.publish(topic, message);
    if (!this.deps.channel.shared) return;
    this.enqueue(topic, message);
    this.flush ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.send());
  }

  private enqueue(topic: string, message: HubMessage): void {
    const item = JSON.stringify([topic, message]);
    if (Buffer.byteLength(item) <= MAX_NOTIFY_BYTES - 100) {
      this.queue.push(item);
      return;
    }
    const ids = message.ids;
    if (Array.isArray(ids) && ids.length > 1) {
      const half = Math.ceil(ids.length / 2);
      this.enqueue(topic, { ...message, ids: ids.slice(0, half) });
      this.enqueue(topic, { ...message, ids: ids.slice(half) });
      return;
    }
    this.deps.onError(new Error(`a hub message of ${item.length} bytes exceeds the notify limit`), topic);
  }

  private async send(): Promise<void> {
    const items = this.queue;
    this.queue = [];
    this.flush = null;
    const head = `{"o":${JSON.stringify(this.origin)},"m":[`;
    let batch: string[] = [];
    let size = head.length + 2;
    const sends: Promise<void>[] = [];
    const sendBatch = () => {
      if (batch.length === 0) return;
      const payload = `${head}${batch.join(',')}]}`;
      sends.push(
        this.deps.channel
          .send(HUB_CHANNEL, payload)
          .catch((err: unknown) => this.deps.onError(err, HUB_CHANNEL)),
      );
      batch = [];
      size = head.length + 2;
    };
    for (const item of items) {
      const bytes = Buffer.byteLength(item) + 1;
      if (size + bytes > MAX_NOTIFY_BYTES) sendBatch();
      batch.push(item);
      size += bytes;
    }
    sendBatch();
    await Promise.all(sends);
  }

  subscribe(topic: string, listener: HubListener): () => void {
    return this.local.subscribe(topic, listener);
  }

  listened(topic: string): boolean {
    return this.deps.channel.shared || this.local.listened(topic);
  }

  active(): boolean {
    return this.deps.channel.shared || this.local.active();
  }
}
