import http from 'node:http';
import type { Logger } from './logger.ts';
import type { CollectorCounters, StatusSnapshot } from './status.ts';
import { escapeHtml } from '../../shared/html.ts';

/**
 * The status page on the LAN (`http://<pi>:8080/`): the uplink, the buffer, each collector's
 * counters and the last readings, as one self-contained HTML page (inline style, no script, no
 * external asset) that reloads itself every 10 s, so an installer can check a site from a phone on
 * the site's network. `/status.json` serves the same snapshot as JSON. Read-only: anything but GET
 * and HEAD is refused. A port that cannot be bound is logged and the gateway runs on without it:
 * the page is a convenience, collecting readings is the job.
 */
export class StatusPage {
  private server: http.Server | null = null;

  constructor(
    private readonly deps: {
      host: string;
      port: number;
      gatewayId: string;
      version: string;
      snapshot: () => StatusSnapshot;
      log: Logger;
      now?: () => number;
    },
  ) {}

  /** The bound port, once listening (null otherwise). */
  get port(): number | null {
    const address = this.server?.address();
    return address && typeof address === 'object' ? address.port : null;
  }

  async start(): Promise<void> {
    if (this.server) return;
    const server = http.createServer((req, res) => this.handle(req, res));
    server.keepAliveTimeout = 5000;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(this.deps.port, this.deps.host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      this.deps.log.error(
        { host: this.deps.host, port: this.deps.port, err: (err as Error).message },
        'status page not available: cannot listen',
      );
      return;
    }
    this.server = server;
    this.deps.log.info({ host: this.deps.host, port: this.port }, 'status page listening');
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
      res.end('method not allowed\n');
      return;
    }
    const headers = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
    if (path === '/') {
      const body = renderStatusPage(this.deps.snapshot(), {
        gatewayId: this.deps.gatewayId,
        version: this.deps.version,
        now: (this.deps.now ?? Date.now)(),
      });
      res.writeHead(200, {
        ...headers,
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    if (path === '/status.json') {
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify(this.deps.snapshot()));
      return;
    }
    res.writeHead(404, { ...headers, 'content-type': 'text/plain; charset=utf-8' });
    res.end('not found\n');
  }
}

/** "3 s", "4 min", "2 h 5 min", "3 d 4 h": an age for a person. */
export function formatAge(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

const UPLINK_WORDS: Record<string, string> = {
  connected: 'connected to the cloud',
  connecting: 'connecting to the cloud',
  waiting: 'cloud unreachable: retrying',
  stopped: 'stopped',
};

function counterCells(c: CollectorCounters): string {
  return [c.received, c.accepted, c.invalid, c.refused, c.lost, c.errors]
    .map((n) => `<td class="n">${n}</td>`)
    .join('');
}

/** The page itself: every value from the snapshot is escaped. */
export function renderStatusPage(
  status: StatusSnapshot,
  info: { gatewayId: string; version: string; now: number },
): string {
  const e = escapeHtml;
  const { uplink, buffer } = status;
  const uplinkOk = uplink.state === 'connected';
  const since = formatAge((info.now - uplink.since) / 1000);
  const fullPercent = buffer.capacity > 0 ? (buffer.depth / buffer.capacity) * 100 : 0;
  const collectors = Object.entries(status.collectors);
  const lostAny = collectors.some(([, c]) => c.lost > 0);
  const rows = collectors
    .map(([name, c]) => `<tr><th scope="row">${e(name)}</th><td>${e(c.state)}</td>${counterCells(c)}</tr>`)
    .join('\n');
  const recent = status.recent
    .map((r) => {
      const values = r.measurements
        .map((m) => `${e(m.kind)}${m.label ? `.${e(m.label)}` : ''} ${m.value} ${e(m.unit)}`)
        .join(', ');
      return `<tr><td>${e(r.device)}</td><td>${e(new Date(r.at).toISOString().replace('.000Z', 'Z'))}</td><td>${formatAge((info.now - r.at) / 1000)} ago</td><td>${values}</td></tr>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="10">
<title>Gateway ${e(info.gatewayId)}: ${uplinkOk ? 'online' : 'cloud unreachable'}</title>
<style>
body{font:15px/1.4 system-ui,sans-serif;margin:1rem auto;max-width:60rem;padding:0 1rem;color:#1a1a1a}
h1{font-size:1.3rem}h2{font-size:1.1rem;margin-top:1.5rem}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.25rem .5rem;border-bottom:1px solid #ddd}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#0a6b2b}.bad{color:#a30d0d}.muted{color:#555}
dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{font-weight:600}dd{margin:0}
</style>
</head>
<body>
<h1>Gateway ${e(info.gatewayId)}</h1>
<p class="muted">Version ${e(info.version)}. This page reloads every 10 s.</p>
<h2>Uplink</h2>
<dl>
<dt>State</dt><dd id="uplink-state" class="${uplinkOk ? 'ok' : 'bad'}">${e(UPLINK_WORDS[uplink.state] ?? uplink.state)} (${since})</dd>
<dt>Published</dt><dd>${uplink.published} messages, ${uplink.rejected} refused by the cloud, ${uplink.deferrals} pauses while the cloud was busy, ${uplink.inflight} in flight</dd>
<dt>Connections</dt><dd>${uplink.connects}</dd>
${uplink.lastError ? `<dt>Last error</dt><dd>${e(uplink.lastError)}</dd>` : ''}
</dl>
<h2>Buffer</h2>
<dl>
<dt>Waiting to send</dt><dd id="buffer-depth">${buffer.depth} of ${buffer.capacity} readings (${fullPercent < 1 && buffer.depth > 0 ? '&lt;1' : Math.round(fullPercent)} % full)</dd>
<dt>Oldest waiting</dt><dd>${buffer.oldestAgeSeconds === null ? 'none' : `${formatAge(buffer.oldestAgeSeconds)} old`}</dd>
<dt>Dead letters</dt><dd>${buffer.deadLetters}</dd>
</dl>
<h2>Collectors</h2>
${
  collectors.length === 0
    ? '<p>No collector is enabled.</p>'
    : `<table>
<thead><tr><th>collector</th><th>state</th><th>received</th><th>accepted</th><th>invalid</th><th>refused</th><th>lost</th><th>errors</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>${lostAny ? '\n<p class="bad">Readings were lost: the buffer was full or not writable when they came.</p>' : ''}`
}
<h2>Last readings</h2>
${
  status.recent.length === 0
    ? '<p>No reading since the gateway started.</p>'
    : `<table>
<thead><tr><th>device</th><th>taken (UTC)</th><th>age</th><th>values</th></tr></thead>
<tbody>
${recent}
</tbody>
</table>`
}
</body>
</html>
`;
}
