import { type CounterBatch, newBatchId } from '../storage/index.ts';
import { TimeSlice } from '../time/index.ts';

interface StreamDelta {
  hits: number;
  uniques: number;
  last: number;
}
interface FlowDelta {
  clicks: number;
  noMatch: number;
  bots: number;
  uniques: number;
  last: number;
}

/** A flow's counts, or counts summed over flows: what the flows list shows besides uniques. */
export interface Counts {
  clicks: number;
  no_match: number;
  bots: number;
  uniques: number;
}

/** A batch cut from the counts and not yet acknowledged by storage, kept to be sent again as it is. */
interface Unacked {
  batch: CounterBatch;
  streams: Map<string, StreamDelta>;
  flows: Map<string, FlowDelta>;
  /** Daily cap counts, keyed `streamId + "\u0000" + day`. */
  days: Map<string, number>;
}

/**
 * Hits, clicks, no-matches, bots and uniques counted in memory on the hot path (two Map lookups, no I/O) and handed to
 * storage in idempotent batches. A batch is cut once, with an id; a flush that fails keeps that
 * batch and sends the same batch, same id, first on the next flush, while what was counted
 * meanwhile goes into a batch of its own. So a batch whose commit went through but whose answer
 * was lost is not added twice (storage applies an id once), and nothing counted is lost.
 * Flushes must not overlap (the routing service queues them).
 */
export class ClickCounters {
  #streams = new Map<string, StreamDelta>();
  #flows = new Map<string, FlowDelta>();
  #days = new Map<string, number>();
  #unacked: Unacked | undefined;
  /** Counts cut from the live maps while their batch is being built (a flush yields meanwhile). */
  #cutting: Pick<Unacked, 'streams' | 'flows' | 'days'> | undefined;
  /** Since the process started (the system metrics sections). */
  totalHits = 0;
  totalClicks = 0;
  totalNoMatch = 0;
  totalBots = 0;
  totalUniques = 0;

  /** A person's click a stream took; `unique` per §11. */
  hit(flowId: string, streamId: string, now: number, unique = false): void {
    this.totalHits++;
    this.totalClicks++;
    const u = unique ? 1 : 0;
    this.totalUniques += u;
    const s = this.#streams.get(streamId);
    if (s === undefined) this.#streams.set(streamId, { hits: 1, uniques: u, last: now });
    else {
      s.hits++;
      s.uniques += u;
      s.last = now;
    }
    const f = this.#flow(flowId, now);
    f.clicks++;
    f.uniques += u;
  }

  /** A click on a capped stream (§13), on its day in the flow's time zone (`YYYY-MM-DD`). */
  dayHit(streamId: string, day: string): void {
    const key = `${streamId}\u0000${day}`;
    this.#days.set(key, (this.#days.get(key) ?? 0) + 1);
  }

  /** Clicks on a capped stream's day not yet acknowledged by storage (an unacknowledged batch's included). */
  pendingDay(streamId: string, day: string): number {
    const key = `${streamId}\u0000${day}`;
    return (
      (this.#days.get(key) ?? 0) + (this.#cutting?.days.get(key) ?? 0) + (this.#unacked?.days.get(key) ?? 0)
    );
  }

  noMatch(flowId: string, now: number): void {
    this.totalNoMatch++;
    this.#flow(flowId, now).noMatch++;
  }

  /**
   * A request for a slug no active flow has (unknown, or its flow paused): a no-match of this node
   * (`traffic_flows.no_match`, §13: "still counted `no_match`"), of no flow's, and no click.
   */
  noMatchWithoutFlow(): void {
    this.totalNoMatch++;
  }

  /** A bot's click (§11), routed or not: counted apart, never in hits, clicks or no-matches. */
  bot(flowId: string, now: number): void {
    this.totalBots++;
    this.#flow(flowId, now).bots++;
  }

  #flow(flowId: string, now: number): FlowDelta {
    let f = this.#flows.get(flowId);
    if (f === undefined) {
      f = { clicks: 0, noMatch: 0, bots: 0, uniques: 0, last: now };
      this.#flows.set(flowId, f);
    } else f.last = now;
    return f;
  }

  /** Counts not yet persisted (an unacknowledged batch's included), to show alongside persisted ones. */
  pendingStream(streamId: string): { hits: number; uniques: number } {
    const parts = [
      this.#streams.get(streamId),
      this.#cutting?.streams.get(streamId),
      this.#unacked?.streams.get(streamId),
    ];
    let hits = 0;
    let uniques = 0;
    for (const p of parts) {
      hits += p?.hits ?? 0;
      uniques += p?.uniques ?? 0;
    }
    return { hits, uniques };
  }

  pendingFlow(flowId: string): { clicks: number; no_match: number; bots: number; uniques: number } {
    const parts = [
      this.#flows.get(flowId),
      this.#cutting?.flows.get(flowId),
      this.#unacked?.flows.get(flowId),
    ];
    let clicks = 0;
    let noMatch = 0;
    let bots = 0;
    let uniques = 0;
    for (const p of parts) {
      clicks += p?.clicks ?? 0;
      noMatch += p?.noMatch ?? 0;
      bots += p?.bots ?? 0;
      uniques += p?.uniques ?? 0;
    }
    return { clicks, no_match: noMatch, bots, uniques };
  }

  /**
   * Everything counted and not yet acknowledged by storage, summed over flows (an unacknowledged
   * batch's included): what an exit now would lose.
   */
  unpersisted(): Counts {
    const out = { clicks: 0, no_match: 0, bots: 0, uniques: 0 };
    for (const flows of [this.#flows, this.#cutting?.flows, this.#unacked?.flows]) {
      for (const f of flows?.values() ?? []) {
        out.clicks += f.clicks;
        out.no_match += f.noMatch;
        out.bots += f.bots;
        out.uniques += f.uniques;
      }
    }
    return out;
  }

  get pending(): boolean {
    return (
      this.#unacked !== undefined || this.#streams.size > 0 || this.#flows.size > 0 || this.#days.size > 0
    );
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
    if (this.#streams.size === 0 && this.#flows.size === 0 && this.#days.size === 0) return rows;
    const streams = this.#streams;
    const flows = this.#flows;
    const days = this.#days;
    this.#streams = new Map();
    this.#flows = new Map();
    this.#days = new Map();
    this.#cutting = { streams, flows, days };
    // Touched streams share their last milliseconds (10,000 streams a second share ~1,000 of them):
    // each is formatted once per flush.
    const isos = new Map<number, string>();
    const iso = (ms: number) => {
      let text = isos.get(ms);
      if (text === undefined) {
        text = new Date(ms).toISOString();
        isos.set(ms, text);
      }
      return text;
    };
    // Built a slice at a time: 100k touched streams are tens of ms of work (#12). What is counted
    // meanwhile goes to the fresh maps, for the next flush.
    const slice = new TimeSlice();
    const batch: CounterBatch = { id: newBatchId(), streams: [], flows: [] };
    for (const [id, d] of streams) {
      batch.streams.push({ id, hits: d.hits, uniques: d.uniques, last_hit_at: iso(d.last) });
      if ((batch.streams.length & 255) === 0) await slice.pause();
    }
    for (const [id, d] of flows) {
      batch.flows.push({
        id,
        clicks: d.clicks,
        no_match: d.noMatch,
        bots: d.bots,
        uniques: d.uniques,
        last_click_at: iso(d.last),
      });
      if ((batch.flows.length & 255) === 0) await slice.pause();
    }
    if (days.size > 0) {
      batch.days = [];
      for (const [key, clicks] of days) {
        const at = key.indexOf('\u0000');
        batch.days.push({ stream_id: key.slice(0, at), day: key.slice(at + 1), clicks });
      }
    }
    this.#cutting = undefined;
    return rows + (await this.#send({ batch, streams, flows, days }, persist));
  }

  /** Told of each acknowledged batch's daily cap counts, in the same turn as they stop being pending. */
  onDaysAcked: ((days: NonNullable<CounterBatch['days']>) => void) | undefined;

  async #send(u: Unacked, persist: (batch: CounterBatch) => Promise<unknown>): Promise<number> {
    this.#unacked = u;
    await persist(u.batch);
    this.#unacked = undefined;
    if (u.batch.days !== undefined) this.onDaysAcked?.(u.batch.days);
    return u.batch.streams.length + u.batch.flows.length + (u.batch.days?.length ?? 0);
  }
}
