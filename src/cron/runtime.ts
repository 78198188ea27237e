import { OK, type Recorder, SERVER_ERROR } from '../telemetry/index.ts';

const MINUTE_MS = 60_000;
/** Two hours of one-minute slots: enough for "the last 60 minutes versus the 60 before". */
const SLOTS = 120;

/**
 * The runtime block of one task (docs/cron.md#acp): what it is doing now and what it has done since
 * the node started. Failures are also kept in a ring of one-minute slots, so "failures in the last
 * hour versus the hour before" (seed procedure 2) is a rolling window, not a clock hour; durations
 * go to the task's recorder, which gives p95 with the same ≤ 1 % sketch as the routes and the
 * exposition's histogram.
 */
export class TaskRuntime {
  readonly recorder: Recorder;
  running = false;
  runningSince: number | null = null;
  runId: string | null = null;
  skipped = 0;
  lastDurationMs: number | null = null;
  lastStartedAt: number | null = null;
  lastFinishedAt: number | null = null;
  lastError: string | null = null;
  nextRunAt: number | null = null;
  readonly #slotMinute = new Float64Array(SLOTS).fill(-1);
  readonly #slotFailures = new Uint32Array(SLOTS);

  constructor(recorder: Recorder) {
    this.recorder = recorder;
  }

  get runs(): number {
    return this.recorder.count;
  }

  get failures(): number {
    return this.recorder.errors;
  }

  start(now: number, runId: string): void {
    this.running = true;
    this.runningSince = now;
    this.lastStartedAt = now;
    this.runId = runId;
  }

  finish(now: number, durationMs: number, error: string | null): void {
    this.running = false;
    this.runningSince = null;
    this.runId = null;
    this.lastFinishedAt = now;
    this.lastDurationMs = Math.round(durationMs * 1000) / 1000;
    this.lastError = error;
    this.recorder.record(durationMs, error === null ? OK : SERVER_ERROR);
    if (error !== null) {
      const minute = Math.floor(now / MINUTE_MS);
      const slot = minute % SLOTS;
      if (this.#slotMinute[slot] !== minute) {
        this.#slotMinute[slot] = minute;
        this.#slotFailures[slot] = 0;
      }
      this.#slotFailures[slot]!++;
    }
  }

  /** Failures in the last 60 minutes and in the 60 minutes before those. */
  failuresByHour(now: number): { last: number; previous: number } {
    const minute = Math.floor(now / MINUTE_MS);
    let last = 0;
    let previous = 0;
    for (let ago = 0; ago < SLOTS; ago++) {
      const slot = (((minute - ago) % SLOTS) + SLOTS) % SLOTS;
      if (this.#slotMinute[slot] !== minute - ago) continue;
      if (ago < 60) last += this.#slotFailures[slot]!;
      else previous += this.#slotFailures[slot]!;
    }
    return { last, previous };
  }
}
