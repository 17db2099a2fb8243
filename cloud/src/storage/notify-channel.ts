import pg from 'pg';

/**
 * Short messages between the cloud's processes on one database: PostgreSQL `LISTEN/NOTIFY` when the
 * database is PostgreSQL (every replica on the same database hears them), and a channel inside the
 * process on SQLite (one process serves a SQLite file). `openDatabase` picks the implementation;
 * feature code sees only this interface (the notification hub and bridge revocations use it).
 *
 * Delivery is at most once and in order per sender: a process that was disconnected from the
 * database misses what was sent meanwhile, so every user of the channel keeps a slower path that
 * reads the database (the bridge's periodic sweep, the dashboard's reload).
 */
export interface NotifyChannel {
  /** Whether other processes hear what this one sends. */
  readonly shared: boolean;
  /** Sends `payload` (at most MAX_NOTIFY_BYTES of UTF-8) to every process listening to `name`. */
  send(name: string, payload: string): Promise<void>;
  /** Calls `handler` with every payload sent to `name` (by this process too) until the returned function is called. */
  listen(name: string, handler: (payload: string) => void): () => void;
  /** Resolves once every name listened to so far is heard (at once for one process's channel). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

/** PostgreSQL's limit on a NOTIFY payload is 8000 bytes; a margin is kept for the channel's framing. */
export const MAX_NOTIFY_BYTES = 7900;

type Handlers = Map<string, Set<(payload: string) => void>>;

function deliver(handlers: Handlers, name: string, payload: string, onError: (err: unknown) => void): void {
  for (const handler of [...(handlers.get(name) ?? [])]) {
    try {
      handler(payload);
    } catch (err) {
      onError(err);
    }
  }
}

function addHandler(handlers: Handlers, name: string, handler: (payload: string) => void): () => void {
  let set = handlers.get(name);
  if (!set) handlers.set(name, (set = new Set()));
  set.add(handler);
  return () => {
    set.delete(handler);
    if (set.size === 0 && handlers.get(name) === set) handlers.delete(name);
  };
}

/** One process's channel: a payload reaches this process's listeners, on the next tick. */
export class LocalNotifyChannel implements NotifyChannel {
  readonly shared = false;
  private readonly handlers: Handlers = new Map();

  constructor(private readonly onError: (err: unknown) => void = () => undefined) {}

  send(name: string, payload: string): Promise<void> {
    queueMicrotask(() => deliver(this.handlers, name, payload, this.onError));
    return Promise.resolve();
  }

  listen(name: string, handler: (payload: string) => void): () => void {
    return addHandler(this.handlers, name, handler);
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.handlers.clear();
    return Promise.resolve();
  }
}

/** How long the listening connection waits before connecting again after it was lost. */
const RECONNECT_MS = 1000;

/**
 * PostgreSQL's `LISTEN/NOTIFY`: one dedicated connection listens (opened at the first `listen`,
 * opened again after a loss), sends go through the pool. Channel names get the schema's name, so
 * installations in separate schemas of one database (the tests) do not hear each other.
 */
export class PostgresNotifyChannel implements NotifyChannel {
  readonly shared = true;
  private readonly handlers: Handlers = new Map();
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly deps: {
      url: string;
      pool: pg.Pool;
      schema: string | undefined;
      onError: (err: unknown) => void;
    },
  ) {}

  private channelName(name: string): string {
    return this.deps.schema ? `${name}_${this.deps.schema}` : name;
  }

  async send(name: string, payload: string): Promise<void> {
    await this.deps.pool.query('SELECT pg_notify($1, $2)', [this.channelName(name), payload]);
  }

  listen(name: string, handler: (payload: string) => void): () => void {
    const first = !this.handlers.has(name);
    const remove = addHandler(this.handlers, name, handler);
    if (first) {
      if (this.client) this.query(`LISTEN ${pg.escapeIdentifier(this.channelName(name))}`);
      else void this.connect();
    }
    return remove;
  }

  ready(): Promise<void> {
    return this.connecting ?? Promise.resolve();
  }

  private query(text: string): void {
    this.client?.query(text).catch((err: unknown) => this.deps.onError(err));
  }

  private connect(): Promise<void> {
    if (this.connecting || this.closed) return this.connecting ?? Promise.resolve();
    this.connecting = (async () => {
      const client = new pg.Client({ connectionString: this.deps.url });
      client.on('notification', (msg) => {
        const name = [...this.handlers.keys()].find((n) => this.channelName(n) === msg.channel);
        if (name) deliver(this.handlers, name, msg.payload ?? '', this.deps.onError);
      });
      client.on('error', (err) => {
        this.deps.onError(err);
        this.lost(client);
      });
      client.on('end', () => this.lost(client));
      try {
        await client.connect();
        for (const name of this.handlers.keys()) {
          await client.query(`LISTEN ${pg.escapeIdentifier(this.channelName(name))}`);
        }
        if (this.closed) {
          await client.end();
          return;
        }
        this.client = client;
      } catch (err) {
        this.deps.onError(err);
        this.lost(client);
      }
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private lost(client: pg.Client): void {
    if (this.client === client) this.client = null;
    client.removeAllListeners('end');
    client.end().catch(() => undefined);
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.handlers.size > 0) void this.connect();
    }, RECONNECT_MS);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    await this.connecting;
    const client = this.client;
    this.client = null;
    this.handlers.clear();
    if (client) {
      client.removeAllListeners('end');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
    }
  }
}
