/**
 * The narrow SQL surface the repositories are written against, once, for both backends.
 * Statements use `?` placeholders (the PostgreSQL executor numbers them) and only SQL that both
 * SQLite 3.35+ and PostgreSQL 13+ accept; the few dialect differences live in the migrations.
 */
export type Dialect = 'sqlite' | 'postgres';
export type Row = Record<string, unknown>;

export interface SqlExecutor {
  readonly dialect: Dialect;
  /** Rows of a statement. */
  all<T = Row>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** Affected row count of a statement. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /** Runs a parameterless multi-statement script (migrations). */
  script(sql: string): Promise<void>;
  /** Runs `fn` in one transaction: all of it commits or none of it does. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
}

/** Timestamps come back as ISO strings from SQLite and as Dates from PostgreSQL. */
export function toIso(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v.toISOString() : String(v);
}

/** Numbers come back as numbers from SQLite and as strings for bigint / COUNT from PostgreSQL. */
export function toNum(v: unknown): number {
  return typeof v === 'number' ? v : Number(v ?? 0);
}
