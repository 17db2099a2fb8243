import autocannon from 'autocannon';
import {
  chirpstackUpJson,
  chirpstackUpProtobuf,
  type ChirpstackUp,
} from '../../hardware/emulators/lorawan-webhook.ts';
import { cayenneLpp } from '../../hardware/emulators/payloads.ts';
import {
  cpuMicros,
  median,
  setUpAccount,
  startServer,
  tempDir,
  throwawayPostgres,
  type ServerProcess,
  roundKnobs,
} from './lib.ts';

/**
 * LoRaWAN webhook deliveries (`BENCH_ONLY=integrations npm run bench`): ChirpStack `up` events,
 * JSON and protobuf, posted to `POST /v1/webhooks/chirpstack?event=up` by 50 concurrent
 * connections (a network server delivering for 50 sensors at once), against the plain HTTP ingest
 * route carrying the same three measurements (`POST /v1/ingest`, 50 devices) measured in the same
 * rounds on the same server. ChirpStack and The Things Stack never retry, so the figure that
 * matters beside throughput is the 99th percentile of the answer time (target: under 100 ms).
 *
 * autocannon is the generator here, whatever else is installed: it reports latency percentiles.
 * Every delivery is a new uplink (its own `deduplicationId` and time), so each is a real write.
 * The loads take turns in each round (the order rotates), after a warm-up each; a row shows the
 * rounds' median and their spread.
 */
const { durationS: DURATION_S, rounds: ROUNDS, warmUpS: WARM_UP_S } = roundKnobs(2);
const CONNECTIONS = 50;
const DEVICES = 50;
const STEP_MS = 10;

export interface IntegrationRound {
  uplinksPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuMicrosPerUplink: number;
  non2xx: number;
  errors: number;
}

export interface IntegrationRow {
  database: string;
  load: string;
  medianUplinksPerSec: number;
  minUplinksPerSec: number;
  maxUplinksPerSec: number;
  medianP99Ms: number;
  maxP99Ms: number;
  cpuMicrosPerUplink: number;
  /** Median uplinks/s over the plain ingest route's median in the same rounds. */
  ratioToIngest: number;
  goal: string;
  non2xx: number;
  rounds: IntegrationRound[];
}

interface Load {
  name: string;
  /** Makes the bodies of about `count` requests ahead of a run, where that is costly. */
  prepare?: (count: number) => void;
  request: () => autocannon.Request;
}

/** Bodies made ahead per second of a run: above what the server answers on this machine. */
const PREPARED_PER_SECOND = 6000;

const INGEST = 'POST /v1/ingest (3 measurements)';
const WEBHOOK_JSON = 'ChirpStack webhook, JSON';
const WEBHOOK_PROTOBUF = 'ChirpStack webhook, protobuf';

function loads(ingestDevices: { localId: string; token: string }[], integrationToken: string): Load[] {
  const base = Date.now() - 60_000;
  let seq = 0;
  /** Each request a fresh time per device: STEP_MS apart from a minute ago. */
  const next = () => {
    const n = seq++;
    return { n, device: n % DEVICES, ms: base + Math.floor(n / DEVICES) * STEP_MS };
  };
  const devEuis = Array.from({ length: DEVICES }, (_, i) => `a8404100${i.toString(16).padStart(8, '0')}`);
  const data = cayenneLpp(4.2, 61);
  const object = { temperatureSensor: { '1': 4.2 }, humiditySensor: { '2': 61 } };
  const up = (devEui: string, extra: Partial<ChirpstackUp> = {}): ChirpstackUp => ({
    devEui,
    fPort: 2,
    data,
    object,
    rx: [{ gatewayId: '0016c001f153a14c', rssi: -97, snr: 7.5 }],
    ...extra,
  });
  // The JSON body is made once per device and completed per request with an id and a time.
  const jsonPieces = devEuis.map((d) =>
    chirpstackUpJson(up(d, { deduplicationId: '@@ID@@', time: null })).split('"@@ID@@"'),
  );
  const webhook =
    (contentType: string, body: (n: number, device: number, ms: number) => string | Buffer) => () => ({
      method: 'POST' as const,
      path: '/v1/webhooks/chirpstack?event=up',
      setupRequest: (req: autocannon.Request) => {
        const { n, device, ms } = next();
        return {
          ...req,
          headers: { authorization: `Bearer ${integrationToken}`, 'content-type': contentType },
          body: body(n, device, ms),
        };
      },
    });
  const protobufBodies: Buffer[] = [];
  let protobufNext = 0;
  const measurements = JSON.stringify([
    { type: 'temperature', value: 4.2, label: '1' },
    { type: 'humidity', value: 61, label: '2' },
    { type: 'signal', value: -97 },
  ]);
  return [
    {
      name: INGEST,
      request: () => ({
        method: 'POST',
        path: '/v1/ingest',
        setupRequest: (req) => {
          const { device, ms } = next();
          const d = ingestDevices[device]!;
          return {
            ...req,
            headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' },
            body: `{"device":"${d.localId}","ts":"${new Date(ms).toISOString()}","measurements":${measurements}}`,
          };
        },
      }),
    },
    {
      name: WEBHOOK_JSON,
      request: webhook('application/json', (n, device, ms) => {
        const [head, tail] = jsonPieces[device]!;
        return `${head}"bench-${n}","time":"${new Date(ms).toISOString()}"${tail}`;
      }),
    },
    {
      name: WEBHOOK_PROTOBUF,
      // Made before the load starts (`prepare`): building a body with the jspb classes costs the
      // generator, which shares the machine with the server, several times what the server spends.
      prepare: (count: number) => {
        protobufBodies.length = 0;
        for (let i = 0; i < count; i++) {
          const { n, device, ms } = next();
          protobufBodies.push(
            chirpstackUpProtobuf(up(devEuis[device]!, { deduplicationId: `bench-${n}`, time: ms })),
          );
        }
        protobufNext = 0;
      },
      request: () => ({
        method: 'POST' as const,
        path: '/v1/webhooks/chirpstack?event=up',
        setupRequest: (req: autocannon.Request) => ({
          ...req,
          headers: {
            authorization: `Bearer ${integrationToken}`,
            'content-type': 'application/octet-stream',
          },
          // Past the bodies made, a body is sent again: a redelivery, stored once.
          body: protobufBodies[protobufNext++ % protobufBodies.length]!,
        }),
      }),
    },
  ];
}

async function runLoad(server: ServerProcess, load: Load, durationS: number): Promise<IntegrationRound> {
  load.prepare?.(PREPARED_PER_SECOND * durationS);
  const cpuBefore = cpuMicros(server.pid);
  const result = await autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: durationS,
    requests: [load.request()],
  });
  const cpu = cpuMicros(server.pid) - cpuBefore;
  const total = result.requests.total;
  return {
    uplinksPerSec: (total - result.non2xx) / durationS,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    cpuMicrosPerUplink: total > 0 ? cpu / total : 0,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function benchOne(database: string, env: Record<string, string>): Promise<IntegrationRow[]> {
  const dataDir = tempDir('bench-integrations-');
  const server = await startServer('cloud/src/main.ts', {
    DATA_DIR: dataDir,
    RATE_LIMIT_INGEST_PER_MIN: '100000000',
    RATE_LIMIT_MGMT_PER_MIN: '100000',
    ...env,
  });
  try {
    const account = await setUpAccount(server.url, dataDir, DEVICES);
    const created = await fetch(`${server.url}/v1/integrations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'chirpstack', site_id: account.siteId, name: 'bench' }),
    });
    const integration = (await created.json()) as { token: string };
    const all = loads(account.devices, integration.token);
    for (const load of all) await runLoad(server, load, WARM_UP_S); // creates the devices and channels
    const rounds = new Map<string, IntegrationRound[]>(all.map((l) => [l.name, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < all.length; i++) {
        const load = all[(r + i) % all.length]!;
        const round = await runLoad(server, load, DURATION_S);
        if (round.non2xx + round.errors > 0)
          console.log(
            `${database} ${load.name}: ${round.non2xx} non-2xx, ${round.errors} errors (${server.logFile})`,
          );
        rounds.get(load.name)!.push(round);
      }
    }
    const ingestMedian = median(rounds.get(INGEST)!.map((r) => r.uplinksPerSec));
    return all.map((load) => {
      const rs = rounds.get(load.name)!;
      const rps = rs.map((r) => r.uplinksPerSec);
      const p99 = rs.map((r) => r.p99Ms);
      const webhook = load.name !== INGEST;
      return {
        database,
        load: load.name,
        medianUplinksPerSec: Math.round(median(rps)),
        minUplinksPerSec: Math.round(Math.min(...rps)),
        maxUplinksPerSec: Math.round(Math.max(...rps)),
        medianP99Ms: median(p99),
        maxP99Ms: Math.max(...p99),
        cpuMicrosPerUplink: Math.round(median(rs.map((r) => r.cpuMicrosPerUplink))),
        ratioToIngest: Math.round((median(rps) / ingestMedian) * 100) / 100,
        goal: webhook ? `p99 < 100 ms: ${median(p99) < 100 ? 'met' : 'NOT met'}` : 'baseline',
        non2xx: rs.reduce((n, r) => n + r.non2xx + r.errors, 0),
        rounds: rs,
      };
    });
  } finally {
    await server.stop();
  }
}

export async function benchIntegrations(postgresUrl: string | null): Promise<IntegrationRow[]> {
  const rows = await benchOne('SQLite', {});
  if (postgresUrl) {
    const db = await throwawayPostgres(postgresUrl);
    try {
      rows.push(...(await benchOne('PostgreSQL', { DATABASE_URL: db.url })));
    } finally {
      await db.drop();
    }
  }
  return rows;
}

export function integrationsTable(rows: IntegrationRow[]): [string[], (string | number)[][]] {
  return [
    [
      'database',
      'load (50 connections)',
      'uplinks/s median (min-max)',
      'ratio to ingest',
      'p99 ms median (max)',
      'server CPU µs/uplink',
      'goal',
      'non-2xx',
    ],
    rows.map((r) => [
      r.database,
      r.load,
      `${r.medianUplinksPerSec} (${r.minUplinksPerSec}-${r.maxUplinksPerSec})`,
      r.ratioToIngest,
      `${r.medianP99Ms} (${r.maxP99Ms})`,
      r.cpuMicrosPerUplink,
      r.goal,
      r.non2xx,
    ]),
  ];
}
