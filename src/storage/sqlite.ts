import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Role } from '../config/index.ts';
import { ApiError, describeCause } from '../errors/index.ts';
import { Recorder } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import { MIGRATIONS } from './migrations.ts';
import type { DbSection, OperatorRecord, OperatorStore, Storage } from './types.ts';

export interface SqliteOptions {
  path: string;
  clock: Clock;
}

const BUSY_TIMEOUT_MS = 5000;

/**
 * Embedded storage on `node:sqlite`, in WAL mode so the CLI can write (e.g. revoke an operator)
 * while a node reads. Calls are synchronous underneath; the async interface matches PostgreSQL's.
 */
export class SqliteStorage implements Storage {
  readonly driver = 'sqlite' as const;
  readonly operators: OperatorStore;
  readonly #db: DatabaseSync;
  readonly #clock: Clock;
  readonly #recorder = new Recorder([]);
  #lastError: string | null = null;
  #up = true;

  constructor(opts: SqliteOptions) {
    this.#clock = opts.clock;
    const path = opts.path === ':memory:' ? opts.path : resolve(opts.path);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    try {
      this.#db = new DatabaseSync(path);
      this.#db.exec(
        `PRAGMA journal_mode = WAL; PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}; PRAGMA foreign_keys = ON;`,
      );
    } catch (err) {
      throw new ApiError('db.unavailable', `cannot open SQLite database at ${path}`, { cause: err });
    }
    this.operators = new SqliteOperators(this);
  }

  /** Runs one timed statement; failures are counted and surface as ApiErrors. */
  query<T>(fn: (db: DatabaseSync) => T): T {
    const start = this.#clock.monotonic();
    try {
      const out = fn(this.#db);
      this.#recorder.record(this.#clock.monotonic() - start, false);
      this.#up = true;
      return out;
    } catch (err) {
      this.#recorder.record(this.#clock.monotonic() - start, true);
      this.#lastError = describeCause(err);
      if (err instanceof ApiError) throw err;
      const code = (err as { errcode?: number }).errcode;
      // SQLITE_CONSTRAINT (19) and its extended codes: a duplicate, not an outage.
      if (code !== undefined && (code & 0xff) === 19)
        throw new ApiError('resource.conflict', undefined, { cause: err });
      if (code !== undefined && [5, 6, 10, 11, 13, 14, 26].includes(code & 0xff)) {
        this.#up = false;
        throw new ApiError('db.unavailable', undefined, { cause: err });
      }
      throw err;
    }
  }

  now(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  async migrate(): Promise<void> {
    this.query((db) => {
      db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`);
      const applied = new Set(
        (db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map(
          (r) => r.version,
        ),
      );
      for (const m of MIGRATIONS) {
        if (applied.has(m.version)) continue;
        db.exec('BEGIN IMMEDIATE');
        try {
          db.exec(m.sqlite);
          db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
            m.version,
            m.name,
            this.now(),
          );
          db.exec('COMMIT');
        } catch (err) {
          db.exec('ROLLBACK');
          throw err;
        }
      }
    });
  }

  async ping(): Promise<void> {
    this.query((db) => db.prepare('SELECT 1').get());
  }

  stats(): DbSection {
    const e = this.#recorder.entry();
    return {
      driver: 'sqlite',
      status: this.#up && this.#db.isOpen ? 'up' : 'down',
      pool: { size: 1, idle: 1, waiting: 0 },
      queries: e.count,
      errors: e.errors,
      avg_ms: e.avg_ms,
      p95_ms: e.p95_ms,
      last_error: this.#lastError,
    };
  }

  async close(): Promise<void> {
    if (this.#db.isOpen) this.#db.close();
  }
}

interface OperatorRow {
  id: number;
  name: string;
  role: Role;
  created_at: string;
  revoked_at: string | null;
}

const toOperator = (r: OperatorRow): OperatorRecord => ({
  id: Number(r.id),
  name: r.name,
  role: r.role,
  created_at: r.created_at,
  revoked_at: r.revoked_at,
});

class SqliteOperators implements OperatorStore {
  readonly #s: SqliteStorage;
  constructor(s: SqliteStorage) {
    this.#s = s;
  }

  async create(name: string, role: Role, tokenSha256: string): Promise<OperatorRecord> {
    const row = this.#s.query(
      (db) =>
        db
          .prepare(
            'INSERT INTO operators (name, role, token_sha256, created_at) VALUES (?, ?, ?, ?) RETURNING id, name, role, created_at, revoked_at',
          )
          .get(name, role, tokenSha256.toLowerCase(), this.#s.now()) as unknown as OperatorRow,
    );
    return toOperator(row);
  }

  async list(): Promise<OperatorRecord[]> {
    const rows = this.#s.query(
      (db) =>
        db
          .prepare('SELECT id, name, role, created_at, revoked_at FROM operators ORDER BY id')
          .all() as unknown as OperatorRow[],
    );
    return rows.map(toOperator);
  }

  async findActiveByTokenHash(tokenSha256: string): Promise<OperatorRecord | undefined> {
    const row = this.#s.query(
      (db) =>
        db
          .prepare(
            'SELECT id, name, role, created_at, revoked_at FROM operators WHERE token_sha256 = ? AND revoked_at IS NULL',
          )
          .get(tokenSha256) as unknown as OperatorRow | undefined,
    );
    return row && toOperator(row);
  }

  async revoke(name: string): Promise<boolean> {
    const res = this.#s.query((db) =>
      db
        .prepare('UPDATE operators SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL')
        .run(this.#s.now(), name),
    );
    return Number(res.changes) > 0;
  }

  async countActive(): Promise<number> {
    const row = this.#s.query(
      (db) =>
        db.prepare('SELECT COUNT(*) AS n FROM operators WHERE revoked_at IS NULL').get() as { n: number },
    );
    return Number(row.n);
  }
}
