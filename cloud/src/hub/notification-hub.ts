/**
 * Change notifications inside the cloud: publishers say what changed (a sensor's value or state, an
 * alarm event, a session ended), subscribers (the dashboard's live stream) hear about it for the
 * topics they listen to. Messages are small JSON objects naming what changed by id; a subscriber
 * reads the current state itself, so a message may be late, merged with others or repeated without
 * harm.
 *
 * This is the one place the cloud's processes would share notifications: the in-process hub below
 * serves one process; several replicas would put Redis pub/sub or PostgreSQL LISTEN/NOTIFY behind
 * the same interface (messages are JSON for that reason).
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
