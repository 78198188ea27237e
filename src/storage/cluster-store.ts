import type { Clock } from '../time/index.ts';
import { type Row, type SqlExecutor, toIso, toNum } from './sql.ts';
import { storableText } from './storable.ts';

/** The leadership a node holds: the fencing token every leader-only write is checked against. */
export interface Fence {
  holder: string;
  epoch: number;
}

export interface LeaseState {
  holder: string;
  epoch: number;
  expires_at: string;
}

/**
 * A node of the registry as stored. Who leads is not part of it: a per-node flag goes stale the
 * moment a node stops or crashes, so the lease (or the local election) answers that.
 */
export interface NodeRecord {
  server_id: string;
  started_at: string;
  last_seen: string;
  version: string | null;
  commit: string;
  /** Where its peers reach it; null for a node of an older build. */
  url: string | null;
  /** Seen within the `aliveWithinMs` asked for. */
  alive: boolean;
}

export interface TaskRunRecord {
  run_id: string;
  task: string;
  server_id: string;
  epoch: number;
  started_at: string;
  finished_at: string | null;
  error: string | null;
}

const LEASE = 'sluice';

/**
 * SQL (PostgreSQL) that is true only while `fence` still holds the lease, to AND into a leader-only
 * write; empty when there is nothing to fence (local election).
 */
export function fenceClause(fence: Fence | undefined): { sql: string; params: unknown[] } {
  if (fence === undefined) return { sql: '', params: [] };
  return {
    sql: ' AND EXISTS (SELECT 1 FROM leader_lease WHERE name = ? AND holder = ? AND epoch = ? AND expires_at > clock_timestamp())',
    params: [LEASE, fence.holder, fence.epoch],
  };
}

/** How long leader-task runs stay in the run journal: a week. */
export const JOURNAL_KEEP_MS = 7 * 86_400_000;
/** The journal is trimmed after every this many finished runs. */
export const PRUNE_EVERY_RUNS = 100;

/**
 * Cluster state in the shared database: the leader lease (PostgreSQL only, on the database's own
 * clock, so nodes' clocks do not matter), the node registry, and the journal of leader-task runs.
 * A fenced write succeeds only while the lease still names its holder and epoch: a paused old
 * leader that lost the lease cannot write, whatever it believes.
 */
export class ClusterStore {
  readonly #x: SqlExecutor;
  readonly #clock: Clock;
  /** Runs finished through this store, for the journal's trim. */
  #finished = 0;

  constructor(x: SqlExecutor, clock: Clock) {
    this.#x = x;
    this.#clock = clock;
  }

  /** `now` of the database (PostgreSQL) or of this node (SQLite, single node). */
  #now(): { sql: string; params: unknown[] } {
    return this.#x.dialect === 'postgres'
      ? { sql: 'clock_timestamp()', params: [] }
      : { sql: '?', params: [new Date(this.#clock.now()).toISOString()] };
  }

  /**
   * Takes or renews the lease for `ttlMs` if it is free, expired, or already ours. The epoch grows
   * whenever the lease changes hands or lapses. Returns the epoch held, or undefined.
   */
  async acquire(holder: string, ttlMs: number): Promise<number | undefined> {
    if (this.#x.dialect !== 'postgres') throw new Error('the leader lease needs PostgreSQL');
    const [row] = await this.#x.all(
      `INSERT INTO leader_lease (name, holder, epoch, expires_at)
       VALUES (?, ?, 1, clock_timestamp() + CAST(? AS INTEGER) * INTERVAL '1 millisecond')
       ON CONFLICT (name) DO UPDATE SET
         epoch = CASE WHEN leader_lease.holder = EXCLUDED.holder AND leader_lease.expires_at > clock_timestamp()
                      THEN leader_lease.epoch ELSE leader_lease.epoch + 1 END,
         holder = EXCLUDED.holder,
         expires_at = EXCLUDED.expires_at
       WHERE leader_lease.holder = EXCLUDED.holder OR leader_lease.expires_at <= clock_timestamp()
       RETURNING epoch`,
      [LEASE, holder, ttlMs],
    );
    return row === undefined ? undefined : toNum(row.epoch);
  }

  /** Gives the lease up at once (graceful stop) if it is still ours at that epoch. */
  async release(fence: Fence): Promise<void> {
    await this.#x.run(
      `UPDATE leader_lease SET expires_at = clock_timestamp() - INTERVAL '1 millisecond' WHERE name = ? AND holder = ? AND epoch = ?`,
      [LEASE, fence.holder, fence.epoch],
    );
  }

  /** The current lease, when one is held and not expired. */
  async currentLease(): Promise<LeaseState | undefined> {
    const now = this.#now();
    const [row] = await this.#x.all(
      `SELECT holder, epoch, expires_at FROM leader_lease WHERE name = ? AND expires_at > ${now.sql}`,
      [LEASE, ...now.params],
    );
    return row && { holder: String(row.holder), epoch: toNum(row.epoch), expires_at: toIso(row.expires_at)! };
  }

  /** `now − ms` on the same clock as `#now()`. */
  #ago(ms: number): { sql: string; params: unknown[] } {
    return this.#x.dialect === 'postgres'
      ? { sql: "clock_timestamp() - CAST(? AS DOUBLE PRECISION) * INTERVAL '1 millisecond'", params: [ms] }
      : { sql: '?', params: [new Date(this.#clock.now() - ms).toISOString()] };
  }

  /**
   * Records that a node is alive. `is_leader` is still written for nodes of older builds that read
   * it; this build derives who leads from the lease instead (see {@link nodes}).
   */
  async heartbeat(n: {
    server_id: string;
    started_at: string;
    version: string | undefined;
    commit: string;
    is_leader: boolean;
    /** Where its peers reach it (`cluster.advertise_url`, else its listen address). */
    url?: string | null | undefined;
  }): Promise<void> {
    const now = this.#now();
    await this.#x.run(
      `INSERT INTO nodes (server_id, started_at, last_seen, version, commit_id, is_leader, url) VALUES (?, ?, ${now.sql}, ?, ?, ?, ?)
       ON CONFLICT (server_id) DO UPDATE SET started_at = EXCLUDED.started_at, last_seen = EXCLUDED.last_seen,
         version = EXCLUDED.version, commit_id = EXCLUDED.commit_id, is_leader = EXCLUDED.is_leader, url = EXCLUDED.url`,
      [n.server_id, n.started_at, ...now.params, n.version ?? null, n.commit, n.is_leader, n.url ?? null],
    );
  }

  /** Takes a node out of the registry (its graceful stop). */
  async removeNode(serverId: string): Promise<void> {
    await this.#x.run('DELETE FROM nodes WHERE server_id = ?', [serverId]);
  }

  /** Deletes the nodes not seen for `unseenMs`. */
  async forgetNodes(unseenMs: number): Promise<void> {
    const cut = this.#ago(unseenMs);
    await this.#x.run(`DELETE FROM nodes WHERE last_seen < ${cut.sql}`, cut.params);
  }

  /**
   * The registry: nodes seen within `forgetAfterMs` (older rows are as good as removed, whether or
   * not a leader has pruned them yet), `alive` when seen within `aliveWithinMs` — both on the
   * database's clock (PostgreSQL), so nodes' clocks do not matter.
   */
  async nodes(o: { aliveWithinMs: number; forgetAfterMs: number }): Promise<NodeRecord[]> {
    const alive = this.#ago(o.aliveWithinMs);
    const forget = this.#ago(o.forgetAfterMs);
    const rows = await this.#x.all(
      `SELECT server_id, started_at, last_seen, version, commit_id, url, CASE WHEN last_seen > ${alive.sql} THEN 1 ELSE 0 END AS alive
       FROM nodes WHERE last_seen >= ${forget.sql} ORDER BY server_id`,
      [...alive.params, ...forget.params],
    );
    return rows.map((r: Row) => ({
      server_id: String(r.server_id),
      started_at: toIso(r.started_at)!,
      last_seen: toIso(r.last_seen)!,
      version: (r.version ?? null) as string | null,
      commit: String(r.commit_id),
      url: (r.url ?? null) as string | null,
      alive: toNum(r.alive) === 1,
    }));
  }

  /**
   * Journals the start of a leader-task run, fenced: false when the fence no longer holds (the run
   * must not proceed). Unfenced (local election) it always succeeds.
   */
  async startRun(
    run: { run_id: string; task: string; server_id: string; epoch: number },
    fence: Fence | undefined,
  ): Promise<boolean> {
    const now = this.#now();
    const f = fenceClause(fence);
    // Explicit casts: PostgreSQL cannot infer parameter types in INSERT ... SELECT.
    const values = `SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), ${now.sql}`;
    const n = await this.#x.run(
      `INSERT INTO task_runs (run_id, task, server_id, epoch, started_at) ${values} WHERE 1 = 1${f.sql}`,
      [run.run_id, run.task, run.server_id, run.epoch, ...now.params, ...f.params],
    );
    return n === 1;
  }

  /**
   * Journals the end of a run, fenced like its start: false when leadership was lost meanwhile.
   * Every {@link PRUNE_EVERY_RUNS}th run then trims the journal to {@link JOURNAL_KEEP_MS} (a failed
   * trim waits for the next one).
   */
  async finishRun(runId: string, error: string | null, fence: Fence | undefined): Promise<boolean> {
    const now = this.#now();
    const f = fenceClause(fence);
    const n = await this.#x.run(
      `UPDATE task_runs SET finished_at = ${now.sql}, error = ? WHERE run_id = ?${f.sql}`,
      [...now.params, storableText(error), runId, ...f.params],
    );
    if (++this.#finished % PRUNE_EVERY_RUNS === 0) await this.prune(JOURNAL_KEEP_MS).catch(() => {});
    return n === 1;
  }

  /** Drops journal rows older than `keepMs` (every {@link PRUNE_EVERY_RUNS}th finished run does it). */
  async prune(keepMs: number): Promise<void> {
    await this.#x.run('DELETE FROM task_runs WHERE started_at < ?', [
      new Date(this.#clock.now() - keepMs).toISOString(),
    ]);
  }

  async runs(task?: string, limit = 1000): Promise<TaskRunRecord[]> {
    const rows = await this.#x.all(
      `SELECT run_id, task, server_id, epoch, started_at, finished_at, error FROM task_runs
       ${task ? 'WHERE task = ?' : ''} ORDER BY started_at, run_id LIMIT ?`,
      [...(task ? [task] : []), limit],
    );
    return rows.map((r: Row) => ({
      run_id: String(r.run_id),
      task: String(r.task),
      server_id: String(r.server_id),
      epoch: toNum(r.epoch),
      started_at: toIso(r.started_at)!,
      finished_at: toIso(r.finished_at),
      error: (r.error ?? null) as string | null,
    }));
  }
}
