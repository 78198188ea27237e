import { randomUUID } from 'node:crypto';
import { ApiError, describeCause } from '../errors/index.ts';
import type { Fence } from '../storage/index.ts';
import { type Logger, runWithContext, type TasksSection, type Telemetry } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import { TaskRuntime } from './runtime.ts';
import type { Schedule } from './schedule.ts';

export type ExecutionScope = 'leader' | 'all';

/** What a task run gets: a signal that fires on timeout or step-down, its logger and ids. */
export interface TaskContext {
  signal: AbortSignal;
  log: Logger;
  runId: string;
  /** Leadership epoch at the start of the run: the fencing token for leader-only writes. */
  epoch: number;
  /** What this run's leader-only writes must be fenced with (undefined: not fenced, local election). */
  fence: Fence | undefined;
}

/** Where leader-task runs are journaled, fenced by the epoch they started under. */
export interface RunJournal {
  start(
    run: { run_id: string; task: string; server_id: string; epoch: number },
    fence: Fence | undefined,
  ): Promise<boolean>;
  finish(runId: string, error: string | null, fence: Fence | undefined): Promise<boolean>;
}

export interface TaskDefinition {
  name: string;
  kind: string;
  schedule: Schedule;
  scope: ExecutionScope;
  enabled: boolean;
  timeoutMs: number;
  run: (ctx: TaskContext) => Promise<void>;
}

export interface TaskItem {
  name: string;
  kind: string;
  schedule: string;
  execution_scope: ExecutionScope;
  enabled: boolean;
  /** The run's time limit (an extension: doctor compares `running_since` with it). */
  timeout_ms: number;
  next_run_at: string | null;
  runtime: {
    running: boolean;
    running_since: string | null;
    runs: number;
    failures: number;
    p95: number;
    /** p95 of the runs that finished in the last hour (docs/telemetry.md#p95); 0 when none did. */
    p95_last_hour: number;
    last_duration_ms: number | null;
    last_started_at: string | null;
    last_finished_at: string | null;
    last_error: string | null;
    failures_last_hour: number;
    failures_prev_hour: number;
    skipped: number;
  };
}

export interface SchedulerOptions {
  clock: Clock;
  logger: Logger;
  telemetry: Telemetry;
  isLeader: () => boolean;
  epoch: () => number;
  /** The fence of the current leadership (undefined when not fencing). */
  fence?: () => Fence | undefined;
  /** Journal of leader-scoped runs (start and end, fenced). */
  journal?: RunJournal;
  /**
   * What of a run's error may be shown (the task list, system metrics, the log, the journal): the
   * node's one redaction rule (`Redactor.text`), so a URL in an error never shows its secrets.
   */
  redact?: (text: string) => string;
  serverId?: string;
}

/** Longest single timer: long waits are re-armed, so a wall-clock jump is noticed within a minute. */
const MAX_TIMER_MS = 60_000;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const round3 = (x: number) => Math.round(x * 1000) / 1000;

class TaskTimeout extends Error {
  override readonly name = 'TaskTimeout';
}

interface Entry {
  def: TaskDefinition;
  rt: TaskRuntime;
  timer: NodeJS.Timeout | undefined;
  abort: AbortController | undefined;
  done: Promise<void> | undefined;
}

/**
 * Runs configured tasks on their schedules. Only this class touches timers; what is due is decided
 * from the injected clock (`runDue`), so tests drive time by hand. A task never overlaps itself on
 * one node (a tick while it runs is skipped and counted), a run is aborted at its `timeout_ms`, and
 * nothing a run throws escapes: it is logged and counted as a failure.
 */
export class Scheduler {
  readonly #o: SchedulerOptions;
  readonly #tasks = new Map<string, Entry>();
  #started = false;

  constructor(opts: SchedulerOptions) {
    this.#o = opts;
    opts.telemetry.setSection('tasks', () => this.section());
    opts.telemetry.addFamilies((w) => {
      const entries = [...this.#tasks.values()];
      w.gauge(
        'task_running',
        '1 while the task runs on this node.',
        entries.map((e) => [e.rt.recorder.labels, e.rt.running ? 1 : 0] as const),
      );
      w.gauge(
        'task_last_duration_milliseconds',
        'Duration of the task’s last finished run, milliseconds.',
        entries
          .filter((e) => e.rt.lastDurationMs !== null)
          .map((e) => [e.rt.recorder.labels, e.rt.lastDurationMs!] as const),
      );
    });
  }

  add(def: TaskDefinition): void {
    if (this.#tasks.has(def.name)) throw new Error(`task ${def.name} is defined twice`);
    const rt = new TaskRuntime(this.#o.telemetry.tasks.get(def.name));
    this.#tasks.set(def.name, { def, rt, timer: undefined, abort: undefined, done: undefined });
  }

  /** Computes every next run; with `timers` (the default) arms real timers to fire them. */
  start(opts: { timers?: boolean } = {}): void {
    this.#started = true;
    const now = this.#o.clock.now();
    for (const e of this.#tasks.values()) {
      e.rt.nextRunAt = e.def.enabled ? (e.def.schedule.next(now) ?? null) : null;
      if (opts.timers !== false) this.#arm(e);
    }
  }

  #arm(e: Entry): void {
    if (!this.#started || e.rt.nextRunAt === null) return;
    const delay = Math.max(0, Math.min(e.rt.nextRunAt - this.#o.clock.now(), MAX_TIMER_MS));
    e.timer = setTimeout(() => {
      e.timer = undefined;
      this.#due(e);
      this.#arm(e);
    }, delay);
    e.timer.unref();
  }

  /** Fires every task whose next run is due by the clock (what the timers call; tests call it directly). */
  runDue(): Promise<void>[] {
    return [...this.#tasks.values()].flatMap((e) => {
      const p = this.#due(e);
      return p ? [p] : [];
    });
  }

  #due(e: Entry): Promise<void> | undefined {
    const now = this.#o.clock.now();
    if (e.rt.nextRunAt === null || now < e.rt.nextRunAt) return undefined;
    e.rt.nextRunAt = e.def.schedule.next(now) ?? null;
    if (e.def.scope === 'leader' && !this.#o.isLeader()) return undefined;
    if (e.rt.running) {
      e.rt.skipped++;
      this.#o.logger.warn(
        { task: e.def.name, run_id: e.rt.runId },
        'task still running; this tick is skipped',
      );
      return undefined;
    }
    return this.#execute(e);
  }

  /** `POST /acp/cron-tasks/run`: starts a run now; resolves when it has started, with its id. */
  runNow(name: string): { run_id: string; done: Promise<void> } {
    const e = this.#tasks.get(name);
    if (e === undefined)
      throw new ApiError('resource.not_found', 'No task with that name.', {
        details: [{ path: '/name', message: 'unknown task' }],
      });
    if (e.def.scope === 'leader' && !this.#o.isLeader()) {
      throw new ApiError(
        'task.not_leader',
        `Task ${name} runs only on the leader; this node is not the leader.`,
      );
    }
    if (e.rt.running)
      throw new ApiError('task.already_running', `Task ${name} is already running (run ${e.rt.runId}).`);
    const done = this.#execute(e);
    return { run_id: e.rt.runId!, done };
  }

  #execute(e: Entry): Promise<void> {
    const { clock, logger } = this.#o;
    const runId = randomUUID();
    const log = logger.child({ task: e.def.name, run_id: runId });
    const abort = new AbortController();
    const started = clock.monotonic();
    e.rt.start(clock.now(), runId);
    e.abort = abort;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new TaskTimeout('timeout');
        abort.abort(err);
        reject(err);
      }, e.def.timeoutMs);
      timer.unref();
    });
    const stepDown = new Promise<never>((_, reject) => {
      abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true });
    });
    const epoch = this.#o.epoch();
    const fence = e.def.scope === 'leader' ? this.#o.fence?.() : undefined;
    const journal = e.def.scope === 'leader' ? this.#o.journal : undefined;
    const run = runWithContext({ task: e.def.name, run_id: runId }, async () => {
      if (journal) {
        const ok = await journal.start(
          { run_id: runId, task: e.def.name, server_id: this.#o.serverId ?? '', epoch },
          fence,
        );
        if (!ok) throw new Error(`fenced: epoch ${epoch} no longer holds the lease`);
      }
      let error: string | null = null;
      try {
        await e.def.run({ signal: abort.signal, log, runId, epoch, fence });
      } catch (err) {
        error = this.#describe(err);
        throw err;
      } finally {
        if (journal) await journal.finish(runId, error, fence).catch(() => false);
      }
    });
    e.done = Promise.race([run, timedOut, stepDown])
      .then(
        () => this.#finish(e, started, null, log),
        (err: unknown) =>
          this.#finish(e, started, err instanceof TaskTimeout ? 'timeout' : this.#describe(err), log),
      )
      .finally(() => clearTimeout(timer));
    // The race settles the bookkeeping; a run that ignores its signal is left to finish on its own.
    run.catch(() => {});
    return e.done;
  }

  #describe(err: unknown): string {
    const text = describeCause(err);
    return this.#o.redact ? this.#o.redact(text) : text;
  }

  #finish(e: Entry, started: number, error: string | null, log: Logger): void {
    const duration = this.#o.clock.monotonic() - started;
    e.rt.finish(this.#o.clock.now(), duration, error);
    e.abort = undefined;
    // Successful runs log at debug: a task ticking every second would otherwise flood the log.
    if (error === null) log.debug({ duration_ms: round3(duration) }, 'task run finished');
    else log.error({ duration_ms: round3(duration), error }, 'task run failed');
  }

  /** Leadership lost: leader-scoped runs in flight are aborted at once. */
  abortLeaderRuns(reason = 'leadership lost'): void {
    for (const e of this.#tasks.values()) {
      if (e.def.scope === 'leader' && e.abort) e.abort.abort(new Error(reason));
    }
  }

  /** Stops scheduling; waits for running tasks up to `graceMs`, then aborts what is left. */
  async stop(graceMs: number): Promise<void> {
    this.#started = false;
    for (const e of this.#tasks.values()) if (e.timer) clearTimeout(e.timer);
    const running = [...this.#tasks.values()].flatMap((e) => (e.rt.running && e.done ? [e.done] : []));
    if (running.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((r) => {
      timer = setTimeout(r, graceMs);
    });
    await Promise.race([Promise.all(running), grace]);
    clearTimeout(timer);
    for (const e of this.#tasks.values()) if (e.abort) e.abort.abort(new Error('node stopping'));
    await Promise.all(running);
  }

  list(): TaskItem[] {
    const now = this.#o.clock.now();
    return [...this.#tasks.values()].map(({ def, rt }) => {
      const hours = rt.failuresByHour(now);
      return {
        name: def.name,
        kind: def.kind,
        schedule: def.schedule.expression,
        execution_scope: def.scope,
        enabled: def.enabled,
        timeout_ms: def.timeoutMs,
        next_run_at: iso(rt.nextRunAt),
        runtime: {
          running: rt.running,
          running_since: iso(rt.runningSince),
          runs: rt.runs,
          failures: rt.failures,
          p95: round3(rt.recorder.quantile(0.95)),
          p95_last_hour: rt.recorder.recent()?.p95_ms ?? 0,
          last_duration_ms: rt.lastDurationMs,
          last_started_at: iso(rt.lastStartedAt),
          last_finished_at: iso(rt.lastFinishedAt),
          last_error: rt.lastError,
          failures_last_hour: hours.last,
          failures_prev_hour: hours.previous,
          skipped: rt.skipped,
        },
      };
    });
  }

  /** The `tasks` section of system metrics (docs/telemetry.md#system-metrics). */
  section(): TasksSection {
    const out: TasksSection = {};
    for (const item of this.list()) {
      out[item.name] = {
        runs: item.runtime.runs,
        failures: item.runtime.failures,
        running: item.runtime.running,
        p95_duration_ms: item.runtime.p95,
        p95_last_hour: item.runtime.p95_last_hour,
        last_duration_ms: item.runtime.last_duration_ms,
        last_error: item.runtime.last_error,
      };
    }
    return out;
  }
}
