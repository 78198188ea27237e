import type { Clock } from '../time/index.ts';
import { SqlAudit } from './audit.ts';
import { BatchGuard, pruneAppliedBatches } from './batch-guard.ts';
import { SqlClicks } from './clicks.ts';
import { ClusterStore } from './cluster-store.ts';
import { SqlConversions } from './conversions.ts';
import { addCounters, streamDays } from './counters.ts';
import { MIGRATIONS } from './migrations.ts';
import type { QueryStats } from './query-stats.ts';
import type { ReportStore } from './report-store.ts';
import { SqlReports } from './reports.ts';
import { SqlFlows, SqlOperators, SqlStreams } from './repositories.ts';
import { SqlSightings } from './sightings.ts';
import { type SqlExecutor, type SqlReader, toNum } from './sql.ts';
import type { SqliteWriter } from './sqlite-writer.ts';
import type {
  Aggregates,
  AuditStore,
  ClickStore,
  ConversionStore,
  CounterBatch,
  DbSection,
  FlowStore,
  InvalidationListener,
  OperatorStore,
  SightingStore,
  Storage,
  StorageDriver,
  StreamStore,
} from './types.ts';

/** Backend specifics the shared storage needs: pool figures, cross-node notification, closing. */
export interface Backend {
  driver: StorageDriver;
  exec: SqlExecutor;
  stats: QueryStats;
  pool(): DbSection['pool'];
  /** Statements to run first inside the migration transaction (locks, schema). */
  migrationPreamble: string[];
  publish(slug: string): Promise<void>;
  subscribe(listener: InvalidationListener): void;
  isOpen(): boolean;
  close(): Promise<void>;
  /** Long reads off the main thread (SQLite on a file); absent: `exec` reads. */
  reader?: SqlReader;
  /**
   * Click and counter batches and postbacks' upserts off the main thread (a SQLite node); absent:
   * `exec` writes them.
   */
  writer?: SqliteWriter;
  /** What the checkpoint thread has done (SQLite on a file, when the node runs one). */
  checkpoints?(): NonNullable<DbSection['checkpoints']>;
}

const KNOWN_VERSIONS: ReadonlySet<number> = new Set(MIGRATIONS.map((m) => m.version));

/** The database was migrated by a newer Sluice than this one: it must not be written by this one. */
export class SchemaTooNew extends Error {
  override name = 'SchemaTooNew';
  /** The migrations applied to the database that this version does not have (`version name`). */
  readonly unknown: readonly string[];
  constructor(unknown: readonly string[]) {
    super(
      `the database was migrated by a newer Sluice (migrations this version does not know: ${unknown.join(', ')}); run that version or a later one, or restore a backup taken before the upgrade`,
    );
    this.unknown = unknown;
  }
}

/** Storage written once over {@link SqlExecutor}; SQLite and PostgreSQL differ only in their Backend. */
export class SqlStorage implements Storage {
  readonly driver: StorageDriver;
  readonly operators: OperatorStore;
  readonly flows: FlowStore;
  readonly streams: StreamStore;
  readonly cluster: ClusterStore;
  readonly clicks: ClickStore;
  readonly conversions: ConversionStore;
  readonly audit: AuditStore;
  readonly sightings: SightingStore;
  readonly reports: ReportStore;
  readonly #b: Backend;
  readonly #clock: Clock;
  readonly #guard: BatchGuard;

  constructor(backend: Backend, clock: Clock) {
    this.#b = backend;
    this.#clock = clock;
    this.driver = backend.driver;
    this.operators = new SqlOperators(backend.exec, clock);
    this.flows = new SqlFlows(backend.exec, clock, backend.reader);
    this.streams = new SqlStreams(backend.exec, clock, backend.reader);
    this.cluster = new ClusterStore(backend.exec, clock);
    this.#guard = new BatchGuard(backend.exec, clock);
    this.clicks = new SqlClicks(backend.exec, this.#guard, backend.reader, backend.writer);
    this.conversions = new SqlConversions(backend.exec, clock, backend.reader, backend.writer?.statements);
    this.reports = new SqlReports(backend.exec, backend.reader, backend.writer);
    this.audit = new SqlAudit(backend.exec, clock);
    this.sightings = new SqlSightings(backend.exec, backend.writer);
  }

  async migrate(): Promise<void> {
    const dialect = this.#b.exec.dialect;
    await this.#b.exec.transaction(async (tx) => {
      for (const sql of this.#b.migrationPreamble) await tx.script(sql);
      await tx.script(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
      );
      const rows = await tx.all<{ version: unknown; name: unknown }>(
        'SELECT version, name FROM schema_migrations ORDER BY version',
      );
      const applied = new Set(rows.map((r) => toNum(r.version)));
      // A newer Sluice migrated this database: this version would write it without what the newer
      // one keeps in step (a deleted flow's currency, say), silently. Refused before anything runs.
      const unknown = rows.filter((r) => !KNOWN_VERSIONS.has(toNum(r.version)));
      if (unknown.length > 0)
        throw new SchemaTooNew(unknown.map((r) => `${toNum(r.version)} ${String(r.name)}`));
      for (const m of MIGRATIONS) {
        if (applied.has(m.version)) continue;
        await tx.script(m[dialect]);
        await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
          m.version,
          m.name,
          new Date(this.#clock.now()).toISOString(),
        ]);
      }
    });
  }

  async ping(): Promise<void> {
    await this.#b.exec.all('SELECT 1 AS ok');
  }

  async secret(name: string, make: () => string): Promise<string> {
    await this.#b.exec.run(
      'INSERT INTO deployment_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING',
      [name, make(), new Date(this.#clock.now()).toISOString()],
    );
    const rows = await this.#b.exec.all<{ value: unknown }>(
      'SELECT value FROM deployment_secrets WHERE name = ?',
      [name],
    );
    return String(rows[0]!.value);
  }

  async readSecret(name: string): Promise<string | undefined> {
    const rows = await this.#b.exec.all<{ value: unknown }>(
      'SELECT value FROM deployment_secrets WHERE name = ?',
      [name],
    );
    return rows[0] === undefined ? undefined : String(rows[0].value);
  }

  async replaceSecret(name: string, expected: string | null, value: string): Promise<boolean> {
    const at = new Date(this.#clock.now()).toISOString();
    const changed =
      expected === null
        ? await this.#b.exec.run(
            'INSERT INTO deployment_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING',
            [name, value, at],
          )
        : await this.#b.exec.run(
            'UPDATE deployment_secrets SET value = ?, created_at = ? WHERE name = ? AND value = ?',
            [value, at, name, expected],
          );
    return changed === 1;
  }

  addCounters(batch: CounterBatch): Promise<boolean> {
    return this.#b.writer?.addCounters(batch) ?? addCounters(this.#guard, batch);
  }

  streamDays(pairs: readonly { stream_id: string; day: string }[]): Promise<Map<string, number>> {
    return streamDays(this.#b.exec, pairs);
  }

  pruneAppliedBatches(before: string): Promise<number> {
    return pruneAppliedBatches(this.#b.exec, before);
  }

  async aggregates(): Promise<Aggregates> {
    const rows = await this.#b.exec.all<{ name: string; total: unknown; active: unknown }>(
      'SELECT name, total, active FROM totals',
    );
    const of = (name: string) => {
      const r = rows.find((x) => x.name === name);
      return { total: toNum(r?.total), active: toNum(r?.active) };
    };
    return { streams: of('streams'), traffic_flows: of('traffic_flows') };
  }

  publishInvalidation(slug: string): Promise<void> {
    return this.#b.publish(slug);
  }

  onInvalidation(listener: InvalidationListener): void {
    this.#b.subscribe(listener);
  }

  stats(): DbSection {
    const st = this.#b.stats;
    const e = st.recorder.entry();
    return {
      driver: this.driver,
      status: st.up && this.#b.isOpen() ? 'up' : 'down',
      pool: this.#b.pool(),
      queries: e.count,
      errors: e.errors,
      avg_ms: e.avg_ms,
      p95_ms: e.p95_ms,
      last_error: st.lastError,
      checkpoints: this.#b.checkpoints?.() ?? null,
    };
  }

  close(): Promise<void> {
    return this.#b.close();
  }
}
