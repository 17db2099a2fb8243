import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { Aedes } from 'aedes';

/**
 * The MQTT benchmark's baseline: the same aedes version on the same mutual-TLS server, every publish
 * authorised at once, no ingest, no database. Certificates from BENCH_PKI_DIR (the cloud's pki/).
 */
const dir = process.env.BENCH_PKI_DIR;
if (!dir) throw new Error('BENCH_PKI_DIR is required');
const broker = await Aedes.createBroker({
  authorizePublish: (_client, _packet, cb) => cb(null),
});
const server = tls.createServer(
  {
    requestCert: true,
    rejectUnauthorized: true,
    ca: fs.readFileSync(`${dir}/ca.crt`),
    cert: fs.readFileSync(`${dir}/server.crt`),
    key: fs.readFileSync(`${dir}/server.key`),
    minVersion: 'TLSv1.2',
  },
  (socket) => broker.handle(socket),
);
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`bare aedes listening (MQTT port ${(server.address() as AddressInfo).port})\n`);
});
process.on('SIGTERM', () => {
  server.close();
  broker.close(() => process.exit(0));
});
