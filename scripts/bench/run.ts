import fs from 'node:fs';
import { benchGateway, gatewayTable } from './gateway.ts';
import { benchGatewayBundle, gatewayBundleTable } from './gateway-bundle.ts';
import { benchIngest, ingestTable } from './ingest.ts';
import { benchIntegrations, integrationsTable } from './integrations.ts';
import { printTable, writeResults } from './lib.ts';
import { benchMqtt, mqttTable } from './mqtt.ts';
import { benchPublicApi, publicApiTable } from './public-api.ts';
import { benchReplicas, replicasTable, replicasWaits } from './replicas.ts';
import { benchReports, reportsTable } from './reports.ts';
import { benchShed, shedTable } from './shed.ts';
import {
  benchReadRate,
  benchReads,
  benchRollupCost,
  exportTable,
  readRateTable,
  readsTable,
  rollupCostTable,
} from './reads.ts';

/**
 * `npm run bench`: every benchmark, each against its baseline measured in the same run.
 * PostgreSQL runs when BENCH_DATABASE_URL (or TEST_DATABASE_URL) names a server, InfluxDB (ingest)
 * when influxd is installed (scripts/bench/influx.ts); BENCH_ONLY picks one benchmark by name
 * (`read-rate` is the first part of `reads` alone; `public-api` is the public map's bbox read).
 */
const postgres =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/test';
const only = process.env.BENCH_ONLY;

async function main(): Promise<void> {
  const results: Record<string, unknown> = {
    at: new Date().toISOString(),
    cpus: (await import('node:os')).cpus().length,
  };
  if (!only || only === 'ingest') {
    const rows = await benchIngest(postgres === 'none' ? null : postgres);
    results.ingest = rows;
    printTable('Ingest (POST /v1/ingest; InfluxDB: POST /write; keep-alive)', ...ingestTable(rows));
  }
  if (!only || only === 'integrations') {
    const rows = await benchIntegrations(postgres === 'none' ? null : postgres);
    results.integrations = rows;
    printTable(
      'LoRaWAN webhook deliveries (ChirpStack up events vs POST /v1/ingest, same server, same rounds)',
      ...integrationsTable(rows),
    );
  }
  if (!only || only === 'rollup-cost') {
    const rows = await benchRollupCost(postgres === 'none' ? null : postgres);
    results.rollupCost = rows;
    printTable('Rollup step cost at ingest (same groups, with and without it)', ...rollupCostTable(rows));
  }
  if (!only || only === 'reads' || only === 'read-rate') {
    const rows = await benchReadRate(postgres === 'none' ? null : postgres);
    results.readRate = rows;
    printTable(
      'Read requests/s (rate-limit counter per request vs batched; baseline: plain GROUP BY)',
      ...readRateTable(rows),
    );
  }
  if (!only || only === 'reads') {
    const { reads, exports } = await benchReads(postgres === 'none' ? null : postgres);
    results.reads = reads;
    results.export = exports;
    printTable(
      'Reads (GET /v1/channels/{id}/measurements vs a plain GROUP BY, same database)',
      ...readsTable(reads),
    );
    printTable(
      'Account export (POST /v1/accounts/me/export, server RSS while streaming)',
      ...exportTable(exports),
    );
  }
  if (!only || only === 'shed') {
    const rows = await benchShed(postgres === 'none' ? null : postgres);
    if (rows) {
      results.shed = rows;
      printTable(
        'Refusing under overload (POST /v1/ingest from 50 devices, pipelined 16 deep on 256 connections; every answer 503)',
        ...shedTable(rows),
      );
    } else console.log('\nshed: skipped (needs PostgreSQL and wrk)');
  }
  if (!only || only === 'mqtt') {
    const rows = await benchMqtt(postgres === 'none' ? null : postgres);
    results.mqtt = rows;
    printTable(
      'MQTT bridge (QoS 1 over mutual TLS, PUBACK after commit; baselines without ingest)',
      ...mqttTable(rows),
    );
  }
  if (!only || only === 'gateway') {
    const rows = await benchGateway();
    results.gateway = rows;
    printTable('Gateway (buffer, drain of a backlog to a local cloud, RSS)', ...gatewayTable(rows));
  }
  if (!only || only === 'gateway-bundle') {
    const rows = await benchGatewayBundle();
    results.gatewayBundle = rows;
    printTable(
      'Gateway production build vs the tsx start (RSS idle and draining a backlog; rounds alternate)',
      ...gatewayBundleTable(rows),
    );
  }
  if (!only || only === 'reports') {
    const rows = await benchReports(postgres === 'none' ? null : postgres);
    results.reports = rows;
    printTable(
      'Reports (haccp_monthly, 31 days x 50 channels of 1-minute data; baseline: one raw read of every row)',
      ...reportsTable(rows),
    );
  }
  if (!only || only === 'public-api') {
    const rows = await benchPublicApi();
    results.publicApi = rows;
    printTable(
      'Public API (GET /api/public/sensors?bbox over 10,000 public pins, SQLite; baseline: a bare Express route)',
      ...publicApiTable(rows),
    );
  }
  // Needs HAProxy (Debian's package), Redis and PostgreSQL.
  if ((!only && postgres !== 'none' && fs.existsSync('/usr/sbin/haproxy')) || only === 'replicas') {
    const rows = await benchReplicas(postgres);
    results.replicas = rows;
    printTable(
      'Replicas behind HAProxy on PostgreSQL, MQTT clustered through Redis (ratio: median of 2 replicas / median of 1)',
      ...replicasTable(rows),
    );
    const waits = replicasWaits(rows);
    if (waits.length > 0)
      console.log(`\nPostgreSQL's backends during the rounds (BENCH_PG_WAITS=1):\n${waits.join('\n')}`);
  }
  const file = writeResults('bench', results);
  console.log(`\nresults written to ${file}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
