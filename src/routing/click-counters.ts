import type { CounterBatch } from '../storage/index.ts';
import { TimeSlice } from '../time/index.ts';

interface StreamDelta {
  hits: number;
  last: number;
}
interface FlowDelta {
  clicks: number;
  noMatch: number;
  last: number;
}

/**
 * Hits and clicks counted in memory on the hot path (two Map lookups, no I/O) and handed to
 * storage in batches. A batch that fails to persist is merged back, so nothing counted is lost;
 * a batch is only taken once, so nothing is counted twice.
 */
export class ClickCounters {
  #streams = new Map<string, StreamDelta>();
  #flows = new Map<string, FlowDelta>();
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

  /** Counts not yet persisted, to show alongside persisted ones. */
  pendingHits(streamId: string): number {
    return this.#streams.get(streamId)?.hits ?? 0;
  }

  pendingFlow(flowId: string): { clicks: number; no_match: number } {
    const f = this.#flows.get(flowId);
    return { clicks: f?.clicks ?? 0, no_match: f?.noMatch ?? 0 };
  }

  get pending(): boolean {
    return this.#streams.size > 0 || this.#flows.size > 0;
  }

  /** Takes everything counted so far and persists it; on failure puts it back and rethrows. */
  async flush(persist: (batch: CounterBatch) => Promise<void>): Promise<number> {
    if (!this.pending) return 0;
    const streams = this.#streams;
    const flows = this.#flows;
    this.#streams = new Map();
    this.#flows = new Map();
    const iso = (ms: number) => new Date(ms).toISOString();
    // Built a slice at a time: 100k touched streams are tens of ms of work (#12). What is counted
    // meanwhile goes to the fresh maps, for the next flush.
    const slice = new TimeSlice();
    const batch: CounterBatch = { streams: [], flows: [] };
    for (const [id, d] of streams) {
      batch.streams.push({ id, hits: d.hits, last_hit_at: iso(d.last) });
      if ((batch.streams.length & 255) === 0) await slice.pause();
    }
    for (const [id, d] of flows) {
      batch.flows.push({ id, clicks: d.clicks, no_match: d.noMatch, last_click_at: iso(d.last) });
      if ((batch.flows.length & 255) === 0) await slice.pause();
    }
    try {
      await persist(batch);
      return batch.streams.length + batch.flows.length;
    } catch (err) {
      for (const [id, d] of streams) {
        const now = this.#streams.get(id);
        if (now === undefined) this.#streams.set(id, d);
        else {
          now.hits += d.hits;
          now.last = Math.max(now.last, d.last);
        }
      }
      for (const [id, d] of flows) {
        const now = this.#flows.get(id);
        if (now === undefined) this.#flows.set(id, d);
        else {
          now.clicks += d.clicks;
          now.noMatch += d.noMatch;
          now.last = Math.max(now.last, d.last);
        }
      }
      throw err;
    }
  }
}
