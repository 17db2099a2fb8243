import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { Redis } from 'ioredis';
import mqemitterRedis from 'mqemitter-redis';
import type { RedisSettings } from '../config.ts';

/**
 * The MQTT bridge's distributed pieces when REDIS_URL is set (docs/design/mqtt.md, "Replicas"):
 * aedes' own `mqemitter-redis` carries every publish between the replicas' brokers (a downlink
 * through replica A reaches a bridge connected to B), and `aedes-persistence-redis` keeps sessions,
 * their subscriptions and queued QoS 1 messages, retained messages and wills in Redis, so a bridge
 * that reconnects to another replica resumes its session there. Without REDIS_URL aedes keeps all of
 * it in the process.
 */

/** aedes 2 wants the persistence's async interface, which the package's main export wraps in callbacks. */
const require = createRequire(import.meta.url);
const AsyncRedisPersistence = require('aedes-persistence-redis/asyncPersistence.js') as new (opts: {
  conn: Redis;
}) => {
  destroy(): Promise<void>;
  createRetainedStreamCombi(patterns: string[]): AsyncIterable<unknown>;
};

/**
 * aedes 2.0.0-beta.1 pipes the retained messages a SUBSCRIBE matches with `.pipe()`, and
 * aedes-persistence-redis answers an async iterable there (its other streams go through
 * `pipeline()`, which takes iterables): a Readable made from it is what aedes expects.
 * test/cloud/mqtt/cluster.test.ts subscribes through it.
 */
class RedisPersistence extends AsyncRedisPersistence {
  override createRetainedStreamCombi(patterns: string[]): AsyncIterable<unknown> {
    return Readable.from(super.createRetainedStreamCombi(patterns));
  }
}

export interface ClusterPieces {
  mq: ReturnType<typeof mqemitterRedis>;
  persistence: unknown;
  /** Closes the persistence's connection (aedes closes the emitter itself). */
  close(): Promise<void>;
}

export function clusterPieces(settings: RedisSettings, onError: (err: unknown) => void): ClusterPieces {
  const mq = mqemitterRedis({ connectionString: settings.url });
  (mq as unknown as { state: NodeJS.EventEmitter }).state.on('error', onError);
  const conn = new Redis(settings.url, { keyPrefix: settings.prefix });
  conn.on('error', onError);
  const persistence = new RedisPersistence({ conn });
  return {
    mq,
    persistence,
    close: async () => {
      // After aedes closed (and with it the emitter): the broadcast unsubscribe may find it closed.
      await persistence.destroy().catch(() => undefined);
      conn.disconnect();
    },
  };
}
