import net from 'node:net';
import type { CheckResult } from '../collector.ts';

/**
 * The `--check` of a collector that listens (Shelly HTTP, Shelly MQTT): binds a TCP server to
 * `host:port` and closes it again, so a port in use or an address the machine does not have is
 * reported before the gateway starts. `listensFor` says what the port is for, for a person.
 */
export async function checkListen(host: string, port: number, listensFor: string): Promise<CheckResult> {
  const server = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return { ok: true, details: [`can listen on ${host}:${port} for ${listensFor}`] };
  } catch (err) {
    return { ok: false, details: [`cannot listen on ${host}:${port}: ${(err as Error).message}`] };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
