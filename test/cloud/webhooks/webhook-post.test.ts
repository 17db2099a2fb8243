import { afterEach, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { post } from '../../../cloud/src/webhooks/webhook-delivery.ts';

const servers: net.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.close();
    (s as http.Server).closeAllConnections?.();
  }
});

async function listen(server: net.Server): Promise<URL> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`);
}

/** A receiver that keeps its answer going with a few bytes every 50 ms, forever. */
function trickle(out: net.Socket | http.ServerResponse, bytes: string): void {
  const timer = setInterval(() => out.write(bytes), 50);
  out.on('close', () => clearInterval(timer));
  out.on('error', () => clearInterval(timer));
}

describe('post(): the outbound client of webhooks and chat messages', () => {
  it('answers with the status as soon as the headers arrive, not when the receiver ends its body', async () => {
    const url = await listen(
      http.createServer((req, res) => {
        req.resume();
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        trickle(res, '.');
      }),
    );
    const started = performance.now();
    expect(await post(url, '{}', {}, true, 2_000)).toEqual({ status: 200, error: null });
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  it('gives up once the whole exchange passes its deadline, though bytes keep coming', async () => {
    const url = await listen(
      net.createServer((socket) => {
        socket.on('data', () => undefined);
        socket.write('HTTP/1.1 200 OK\r\n');
        trickle(socket, 'X-Slow: 1\r\n'); // headers that never end
      }),
    );
    const started = performance.now();
    const result = await post(url, '{}', {}, true, 500);
    expect(result).toEqual({ status: null, error: 'no answer within 0.5 s' });
    expect(performance.now() - started).toBeLessThan(1_500);
  });
});
