import express from 'express';

/**
 * The baseline of the ingest benchmark: Express parsing the same JSON body (same 256 KiB limit) and
 * answering 200, with nothing else. Prints `(HTTP port N)` like the cloud does.
 */
const app = express();
app.disable('x-powered-by');
app.use(express.json({ limit: 256 * 1024 }));
app.post('/v1/ingest', (req, res) => {
  res
    .status(200)
    .json({ accepted: Array.isArray((req.body as { measurements?: unknown[] }).measurements) ? 1 : 0 });
});
const server = app.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(
    `bare express listening (HTTP port ${typeof address === 'object' && address ? address.port : 0})\n`,
  );
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
