/**
 * PostgreSQL advisory locks form one key space per database, not per schema. Installations kept in
 * separate schemas of one database (and the test suite, one schema per test) must not queue behind
 * each other's locks, so every advisory lock the service takes is keyed by a 64-bit hash of the
 * schema's name and the lock's own name, computed by the server (`hashtextextended`). Names are
 * constants of the code, never input.
 */

const CURRENT_SCHEMA = "coalesce(current_schema(), '')";

/** The SQL expression of the key of lock `name` (an SQL text expression) in `schema` (one too). */
function keyOf(schema: string, name: string): string {
  return `hashtextextended(${schema} || ':' || ${name}, 0)`;
}

function literal(name: string): string {
  if (!/^[a-z0-9_-]+$/.test(name)) throw new Error(`invalid advisory lock name ${name}`);
  return `'${name}'`;
}

/** The statement that takes lock `name` of the connection's current schema for the transaction. */
export function advisoryXactLock(name: string): string {
  return `SELECT pg_advisory_xact_lock(${keyOf(CURRENT_SCHEMA, literal(name))})`;
}

/** The same for the schema named by the query's parameter `$1` (one that may not exist yet). */
export function advisoryXactLockOfSchemaParam(name: string): string {
  return `SELECT pg_advisory_xact_lock(${keyOf('$1::text', literal(name))})`;
}

/**
 * The key of lock `prefix:<k>` in the current schema, where `k` is an SQL integer expression (one
 * lock per row key, e.g. per channel).
 */
export function advisoryKeyPer(prefix: string, k: string): string {
  return keyOf(CURRENT_SCHEMA, `${literal(prefix)} || ':' || ${k}`);
}
