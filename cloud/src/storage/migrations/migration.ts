/** The two databases the cloud runs on. */
export type Dialect = 'sqlite' | 'postgres';

/** What a migration's statements may differ by between the two databases. */
export interface DialectSql {
  dialect: Dialect;
  /** An integer primary key the database numbers itself. */
  autoIncrementKey: string;
}

/** One versioned step of the schema: a name, recorded once applied, and its DDL statements. */
export interface Migration {
  name: string;
  statements: (d: DialectSql) => string[];
}
