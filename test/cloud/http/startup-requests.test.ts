import net from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { Cloud } from '../../../cloud/src/cloud.ts';
import { loadConfig } from '../../../cloud/src/config.ts';
import { createLogger } from '../../../cloud/src/logger.ts';
import { DATABASES, testDatabase, type DbKind } from '../../helpers/databases.ts';

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The first connection the port accepts, trying every few milliseconds. */
async function connectWhenListening(port: number, deadlineMs: number): Promise<net.Socket> {
  const deadline = performance.now() + deadlineMs;
  for (;;) {
    const socket = await new Promise<net.Socket | null>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => resolve(s));
      s.once('error', () => resolve(null));
    });
    if (socket) return socket;
    if (performance.now() > deadline) throw new Error(`nothing listened on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/**
 * One start of a cloud with a request sent on the first connection the port accepts: answers
 * whether that connection was taken before start() resolved, and the answer's status line.
 */
async function requestWhileStarting(db: DbKind): Promise<{ early: boolean; status: string }> {
  const database = testDatabase(db);
  const port = await freePort();
  const cloud = new Cloud({
    config: loadConfig({
      PORT: String(port),
      HOST: '127.0.0.1',
      MQTT_PORT: '0',
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.url,
    }),
    log: createLogger('error'),
    database: { schema: database.schema },
  });
  let started = false;
  const starting = cloud.start().then(() => (started = true));
  let socket: net.Socket | undefined;
  try {
    socket = await connectWhenListening(port, 60_000);
    const early = !started;
    const answer = new Promise<string>((resolve, reject) => {
      let text = '';
      socket!.on('data', (c: Buffer) => {
        text += c.toString();
        if (text.includes('\r\n\r\n')) resolve(text.split('\r\n')[0]!);
      });
      socket!.once('close', () => reject(new Error(`closed without an answer: ${text}`)));
      setTimeout(() => reject(new Error('no answer 60 s after the connection')), 60_000).unref();
    });
    socket.write('GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n');
    await starting;
    return { early, status: await answer };
  } finally {
    socket?.destroy();
    await starting.catch(() => undefined);
    await cloud.stop();
    await database.dispose();
  }
}

/**
 * The cloud listens before its services exist (the base URL needs the real port). A request that
 * arrives in between (a client retrying against a restarting process) is answered once the
 * services are up, never left without an answer. The window is the time start() waits for the
 * database: on PostgreSQL (round trips to the server) a connection lands in it within a few tries;
 * on SQLite the services start without waiting for I/O and the window is usually empty, so there
 * the request is only required to be answered.
 */
describe.each(DATABASES)('a request that arrives while the cloud starts, on %s', (db) => {
  it('is answered once the cloud has started', async () => {
    const outcomes: { early: boolean; status: string }[] = [];
    for (let attempt = 0; attempt < 5; attempt++) {
      const outcome = await requestWhileStarting(db);
      outcomes.push(outcome);
      if (outcome.early || db === 'sqlite') break;
    }
    for (const o of outcomes) expect(o.status).toBe('HTTP/1.1 200 OK');
    if (db === 'postgres') expect(outcomes.some((o) => o.early)).toBe(true);
  }, 300_000);
});
