import http from 'node:http';

/**
 * The baseline of the shedding benchmark: Node's own HTTP server answering every request 503 with
 * the cloud's `overloaded` envelope and headers, without reading the body, and nothing else: the
 * least a Node process can do per refused request. Prints `(HTTP port N)` like the cloud does.
 */
const body = JSON.stringify({
  error: {
    code: 'overloaded',
    message: 'ingest is over capacity; nothing was stored; retry after Retry-After seconds',
    request_id: 'req_000000000000000000000000',
  },
});
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(503, {
    'X-Request-Id': 'req_000000000000000000000000',
    'X-Content-Type-Options': 'nosniff',
    'Retry-After': '1',
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
  });
  res.end(body);
});
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(
    `bare shedding server listening (HTTP port ${typeof address === 'object' && address ? address.port : 0})\n`,
  );
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
