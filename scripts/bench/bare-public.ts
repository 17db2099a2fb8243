import fs from 'node:fs';
import express from 'express';

/**
 * The baseline of the public API benchmark: a bare Express route answering
 * `GET /api/public/sensors?bbox=...` from the same pins held in memory (read from the JSON file
 * PINS_FILE names), filtered per request and serialised with res.json: no database, limit, cache,
 * ETag or log. Prints `(HTTP port N)` like the cloud does.
 */
interface Pin {
  lat: number;
  lon: number;
}
const pins = JSON.parse(fs.readFileSync(process.env.PINS_FILE!, 'utf8')) as Pin[];
const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.get('/api/public/sensors', (req, res) => {
  const [south, west, north, east] = (typeof req.query.bbox === 'string' ? req.query.bbox : '')
    .split(',')
    .map(Number) as [number, number, number, number];
  res.json(pins.filter((p) => p.lat >= south && p.lat <= north && p.lon >= west && p.lon <= east));
});
const server = app.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(
    `bare express listening (HTTP port ${typeof address === 'object' && address ? address.port : 0})\n`,
  );
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
