import { type CounterBatch, newBatchId } from '../storage/index.ts';

interface StreamDelta {
  hits: number;
  last: number;
}
interface FlowDelta {
  clicks: number;
  noMatch: number;
  last: number;
}

/** A batch cut from the counts and not yet acknowledged by storage, kept to be sent again as it is. */
interface Unacked {
  batch: CounterBatch;
  streams: Map<string, StreamDelta>;
  flows: Map<string, FlowDelta>;
}

/**
 * Hits and clicks counted in memory on the hot path (two Map lookups, no I/O) and handed to
 * storage in idempotent batches. A batch is cut once, with an id; a flush that fails keeps that
 * batch and sends the same batch, same id, first on the next flush, while what was counted
 * meanwhile goes into a batch of its own. So a batch whose commit went through but whose answer
 * was lost is not added twice (storage applies an id once), and nothing counted is lost.
 * Flushes must not overlap (the routing service queues them).
 */
export class ClickCounters {
  #streams = new Map<string, StreamDelta>();
  #flows = new Map<string, FlowDelta>();
  #unacked: Unacked | undefined;
  /** Since the process started (the system metrics sections). */
  totalHits = 0;
  totalClicks = 0;
  totalNoMatch = 0;

  hit(flowId: string, streamId: string, now: number): void {
    this.totalHits++;
    this.totalClicks++;
    const s = this.#streams.get(streamId);
    if (s === undefined) this.#streams.set(streamId, { hits: 1, last: now });
    else {
      s.hits++;
      s.last = now;
    }
    this.#flow(flowId, now).clicks++;
  }

  noMatch(flowId: string, now: number): void {
    this.totalNoMatch++;
    this.#flow(flowId, now).noMatch++;
  }

  #flow(flowId: string, now: number): FlowDelta {
    let f = this.#flows.get(flowId);
    if (f === undefined) {
      f = { clicks: 0, noMatch: 0, last: now };
      this.#flows.set(flowId, f);
    } else f.last = now;
    return f;
  }

  /** Counts not yet persisted (an unacknowledged batch's included), to show alongside persisted ones. */
  pendingHits(streamId: string): number {
    return (this.#streams.get(streamId)?.hits ?? 0) + (this.#unacked?.streams.get(streamId)?.hits ?? 0);
  }

  pendingFlow(flowId: string): { clicks: number; no_match: number } {
    const f = this.#flows.get(flowId);
    const u = this.#unacked?.flows.get(flowId);
    return {
      clicks: (f?.clicks ?? 0) + (u?.clicks ?? 0),
      no_match: (f?.noMatch ?? 0) + (u?.noMatch ?? 0),
    };
  }

  get pending(): boolean {
    return this.#unacked !== undefined || this.#streams.size > 0 || this.#flows.size > 0;
  }

  /** The id of the batch waiting to be sent again, if a flush failed. */
  get unackedBatchId(): string | undefined {
    return this.#unacked?.batch.id;
  }

  /**
   * Sends the unacknowledged batch, if any, then cuts one of everything counted since and sends
   * it; returns the rows sent. On failure the batch that failed is kept, as it is, for the next
   * flush, and the error is thrown.
   */
  async flush(persist: (batch: CounterBatch) => Promise<unknown>): Promise<number> {
    let rows = 0;
    if (this.#unacked !== undefined) rows += await this.#send(this.#unacked, persist);
    if (this.#streams.size === 0 && this.#flows.size === 0) return rows;
    const streams = this.#streams;
    const flows = this.#flows;
    this.#streams = new Map();
    this.#flows = new Map();
    const iso = (ms: number) => new Date(ms).toISOString();
    const batch: CounterBatch = {
      id: newBatchId(),
      streams: [...streams].map(([id, d]) => ({ id, hits: d.hits, last_hit_at: iso(d.last) })),
      flows: [...flows].map(([id, d]) => ({
        id,
        clicks: d.clicks,
        no_match: d.noMatch,
        last_click_at: iso(d.last),
      })),
    };
    return rows + (await this.#send({ batch, streams, flows }, persist));
  }

  async #send(u: Unacked, persist: (batch: CounterBatch) => Promise<unknown>): Promise<number> {
    this.#unacked = u;
    await persist(u.batch);
    this.#unacked = undefined;
    return u.batch.streams.length + u.batch.flows.length;
  }
}
