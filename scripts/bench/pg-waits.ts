import pg from 'pg';

/**
 * What PostgreSQL's backends of one database do while a load runs (`BENCH_PG_WAITS=1`): a sampler
 * reads `pg_stat_activity` every SAMPLE_MS on a connection of its own and counts, per sample, the
 * backends in each state: running (active, no wait event), waiting on a named event (active, e.g.
 * `Lock:transactionid`, `LWLock:WALWrite`, `IO:WALSync`), or idle inside a transaction (the client
 * holds it open between statements). Idle connections are not counted. A count divided by the
 * number of samples is the average number of backends in that state over the load (PostgreSQL's
 * "average active sessions"), so states compare across layouts whatever their throughput. The
 * statements that waited most are kept too (their first words), and the database's commits.
 * When the server loads `pg_stat_statements` (shared_preload_libraries), each statement's calls and
 * execution time in the database over the load are kept as well.
 */
const SAMPLE_MS = 20;

export interface PgWaits {
  samples: number;
  /** Backends seen per state, summed over the samples. */
  states: Record<string, number>;
  /** Waiting backends per (state, statement's first words), summed over the samples. */
  statements: Record<string, number>;
  /** Transactions committed in the database meanwhile. */
  commits: number;
  /** Per statement (first words): calls and execution time (ms), when pg_stat_statements is loaded. */
  statementTime: Record<string, { calls: number; ms: number }>;
}

function statementOf(query: string): string {
  return query.replace(/\s+/g, ' ').trim().slice(0, 70);
}

/** Starts sampling the database named `database`; the returned function stops and answers. */
export async function sampleWaits(adminUrl: string, database: string): Promise<() => Promise<PgWaits>> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  const commits = async () =>
    Number(
      (
        await client.query<{ n: string }>(
          'SELECT xact_commit AS n FROM pg_stat_database WHERE datname = $1',
          [database],
        )
      ).rows[0]?.n ?? 0,
    );
  // The statistics are a snapshot per transaction: each read is a transaction of its own (autocommit).
  const before = await commits();
  const loaded = (
    await client.query<{ s: string }>("SELECT current_setting('shared_preload_libraries') AS s")
  ).rows[0]!.s.includes('pg_stat_statements');
  if (loaded) await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const statementTimes = async () => {
    const times = new Map<string, { calls: number; ms: number }>();
    if (!loaded) return times;
    const { rows } = await client.query<{ query: string; calls: string; ms: number }>(
      `SELECT query, calls, total_exec_time AS ms FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`,
      [database],
    );
    for (const r of rows) {
      const key = statementOf(r.query);
      const t = times.get(key) ?? { calls: 0, ms: 0 };
      times.set(key, { calls: t.calls + Number(r.calls), ms: t.ms + r.ms });
    }
    return times;
  };
  const timesBefore = await statementTimes();
  const result: PgWaits = { samples: 0, states: {}, statements: {}, commits: 0, statementTime: {} };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const started = Date.now();
      const { rows } = await client.query<{
        state: string | null;
        wait_event_type: string | null;
        wait_event: string | null;
        query: string;
      }>(
        `SELECT state, wait_event_type, wait_event, query FROM pg_stat_activity
         WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
           AND state IN ('active', 'idle in transaction')`,
        [database],
      );
      result.samples++;
      for (const row of rows) {
        const state =
          row.state === 'idle in transaction'
            ? 'idle in transaction'
            : row.wait_event_type
              ? `${row.wait_event_type}:${row.wait_event}`
              : 'running';
        result.states[state] = (result.states[state] ?? 0) + 1;
        if (state !== 'running' && state !== 'idle in transaction') {
          const key = `${state} | ${statementOf(row.query)}`;
          result.statements[key] = (result.statements[key] ?? 0) + 1;
        }
      }
      await new Promise((r) => setTimeout(r, Math.max(0, SAMPLE_MS - (Date.now() - started))));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    result.commits = (await commits()) - before;
    for (const [key, t] of await statementTimes()) {
      const b = timesBefore.get(key) ?? { calls: 0, ms: 0 };
      if (t.calls > b.calls) result.statementTime[key] = { calls: t.calls - b.calls, ms: t.ms - b.ms };
    }
    await client.end();
    return result;
  };
}

/** Sums several rounds' samples. */
export function mergeWaits(all: PgWaits[]): PgWaits {
  const out: PgWaits = { samples: 0, states: {}, statements: {}, commits: 0, statementTime: {} };
  for (const w of all) {
    for (const [k, t] of Object.entries(w.statementTime)) {
      const o = out.statementTime[k] ?? { calls: 0, ms: 0 };
      out.statementTime[k] = { calls: o.calls + t.calls, ms: o.ms + t.ms };
    }
    out.samples += w.samples;
    out.commits += w.commits;
    for (const [k, n] of Object.entries(w.states)) out.states[k] = (out.states[k] ?? 0) + n;
    for (const [k, n] of Object.entries(w.statements)) out.statements[k] = (out.statements[k] ?? 0) + n;
  }
  return out;
}

/** The states as average backends (two decimals), largest first, the first `top` of them. */
export function averageBackends(
  counts: Record<string, number>,
  samples: number,
  top = 8,
): [string, number][] {
  return Object.entries(counts)
    .map(([k, n]): [string, number] => [k, Math.round((n / Math.max(1, samples)) * 100) / 100])
    .filter(([, n]) => n >= 0.01)
    .sort((a, b) => b[1] - a[1])
    .slice(0, top);
}
