/**
 * PostgreSQL advisory locks form one key space per database, not per schema. Installations kept in
 * separate schemas of one database (and the test suite, one schema per test) must not queue behind
 * each other's locks, so every advisory lock the service takes is keyed by a 64-bit hash of the
 * schema's name and the lock's own name, computed by the server (`hashtextextended`). Names are
 * constants of the code, never input.
 */

/** The SQL expression of the key of lock `name` (an SQL text expression) in the schema `schema` (one too). */
function keyOf(schema: string, name: string): string {
  return `hashtextextended(${schema} || ':' || ${name}, 0)`;
}

const CURRENT_SCHEMA = "coalesce(current_schema(), '')";

/** The key of the lock `name` in the connection's current schema, as SQL. */
export function advisoryKey(name: string): string {
  if (!/^[a-z0-9:_-]+$/.test(name)) throw new Error(`invalid advisory lock name ${name}`);
  return keyOf(CURRENT_SCHEMA, `'${name}'`);
}

/** The key of lock `name` in the schema whose name is the query's parameter `$1` (before it exists). */
export function advisoryKeyOfSchemaParam(name: string): string {
  if (!/^[a-z0-9:_-]+$/.test(name)) throw new Error(`invalid advisory lock name ${name}`);
  return keyOf('$1::text', `'${name}'`);
}

/**
 * The key of lock `prefix:<k>` in the current schema, where `k` is an SQL integer expression (one
 * lock per row key, e.g. per channel).
 */
export function advisoryKeyPer(prefix: string, k: string): string {
  if (!/^[a-z0-9_-]+$/.test(prefix)) throw new Error(`invalid advisory lock prefix ${prefix}`);
  return keyOf(CURRENT_SCHEMA, `'${prefix}:' || ${k}`);
}
