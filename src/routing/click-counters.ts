import type { CountsCut } from '../clicks/index.ts';
import type { CountRows } from '../storage/index.ts';
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

/** Counts cut from the live maps with a batch of the click log, not yet acknowledged by storage. */
interface Held {
  streams: Map<string, StreamDelta>;
  flows: Map<string, FlowDelta>;
  /** Daily cap counts, keyed `streamId + "\u0000" + day`. */
  days: Map<string, number>;
}

/**
 * Hits, clicks, no-matches, bots and uniques counted in memory on the hot path (two Map lookups, no
 * I/O). They are written with the clicks they counted: the click log cuts them ({@link cut}) in
 * the same turn as it cuts its buffer into a batch, and that batch's transaction inserts the
 * clicks and adds their counts, under one batch id. So a crash loses clicks and their counts
 * together, never one without the other, and the counters, the click log and its rollups agree.
 * Counts of clicks the log dropped (a full buffer) ride with the next batch: hits stay the clicks
 * answered.
 */
export class ClickCounters {
  #streams = new Map<string, StreamDelta>();
  #flows = new Map<string, FlowDelta>();
  #days = new Map<string, number>();
  /** Cut with a batch of the click log and not yet acknowledged, oldest first. */
  readonly #held = new Set<Held>();
  /** Since the process started (the system metrics sections). */
  totalHits = 0;
  totalClicks = 0;
  totalNoMatch = 0;
  totalBots = 0;
  totalUniques = 0;

  /** A person's click a stream took; `unique` as docs/clicks.md#uniqueness defines it. */
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

  /** A click on a capped stream (docs/routing.md#daily-caps), on its day in the flow's time zone (`YYYY-MM-DD`). */
  dayHit(streamId: string, day: string): void {
    const key = `${streamId}\u0000${day}`;
    this.#days.set(key, (this.#days.get(key) ?? 0) + 1);
  }

  /** Clicks on a capped stream's day not yet acknowledged by storage (those of batches under way included). */
  pendingDay(streamId: string, day: string): number {
    const key = `${streamId}\u0000${day}`;
    let n = this.#days.get(key) ?? 0;
    for (const h of this.#held) n += h.days.get(key) ?? 0;
    return n;
  }

  noMatch(flowId: string, now: number): void {
    this.totalNoMatch++;
    this.#flow(flowId, now).noMatch++;
  }

  /**
   * A request for a slug no active flow has (unknown, or its flow paused): a no-match of this node
   * (`traffic_flows.no_match`, docs/routing.md#fallback-url), of no flow's, and no click.
   */
  noMatchWithoutFlow(): void {
    this.totalNoMatch++;
  }

  /** A bot's click (docs/routing.md#bots), routed or not: counted apart, never in hits, clicks or no-matches. */
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

  /** Counts not yet persisted (those of batches under way included), to show alongside persisted ones. */
  pendingStream(streamId: string): { hits: number; uniques: number } {
    const own = this.#streams.get(streamId);
    let hits = own?.hits ?? 0;
    let uniques = own?.uniques ?? 0;
    for (const h of this.#held) {
      const p = h.streams.get(streamId);
      hits += p?.hits ?? 0;
      uniques += p?.uniques ?? 0;
    }
    return { hits, uniques };
  }

  pendingFlow(flowId: string): Counts {
    const out = { clicks: 0, no_match: 0, bots: 0, uniques: 0 };
    addFlow(out, this.#flows.get(flowId));
    for (const h of this.#held) addFlow(out, h.flows.get(flowId));
    return out;
  }

  /**
   * Everything counted and not yet acknowledged by storage, summed over flows (batches under way
   * included): what an exit now would lose.
   */
  unpersisted(): Counts {
    const out = { clicks: 0, no_match: 0, bots: 0, uniques: 0 };
    for (const f of this.#flows.values()) addFlow(out, f);
    for (const h of this.#held) for (const f of h.flows.values()) addFlow(out, f);
    return out;
  }

  get pending(): boolean {
    return this.#held.size > 0 || this.#streams.size > 0 || this.#flows.size > 0 || this.#days.size > 0;
  }

  /**
   * Cuts everything counted since the last cut, for the batch the click log cuts in the same turn;
   * undefined when nothing was. The counts stay pending (shown, and read by the caps) until the
   * batch is acknowledged or given up.
   */
  cut(): CountsCut | undefined {
    if (this.#streams.size === 0 && this.#flows.size === 0 && this.#days.size === 0) return undefined;
    const held: Held = { streams: this.#streams, flows: this.#flows, days: this.#days };
    this.#streams = new Map();
    this.#flows = new Map();
    this.#days = new Map();
    this.#held.add(held);
    const cut: CountsCut = {
      rows: () => countRows(held),
      acked: () => {
        if (!this.#held.delete(held)) return;
        if (held.days.size > 0) this.onDaysAcked?.(dayRows(held.days));
      },
      lost: () => {
        this.#held.delete(held);
      },
      absorb: (later) => {
        const other = this.#cuts.get(later);
        if (other === undefined || !this.#held.has(other) || !this.#held.has(held)) return;
        this.#held.delete(other);
        mergeHeld(held, other);
      },
    };
    this.#cuts.set(cut, held);
    return cut;
  }

  /** What each cut holds, for {@link CountsCut.absorb}. */
  readonly #cuts = new WeakMap<CountsCut, Held>();

  /** Told of each acknowledged batch's daily cap counts, in the same turn as they stop being pending. */
  onDaysAcked: ((days: { stream_id: string; day: string; clicks: number }[]) => void) | undefined;
}

/** `into` takes `from`'s counts (a later cut's: its last times are the later ones). */
function mergeHeld(into: Held, from: Held): void {
  for (const [id, d] of from.streams) {
    const s = into.streams.get(id);
    if (s === undefined) into.streams.set(id, d);
    else {
      s.hits += d.hits;
      s.uniques += d.uniques;
      s.last = Math.max(s.last, d.last);
    }
  }
  for (const [id, d] of from.flows) {
    const f = into.flows.get(id);
    if (f === undefined) into.flows.set(id, d);
    else {
      f.clicks += d.clicks;
      f.noMatch += d.noMatch;
      f.bots += d.bots;
      f.uniques += d.uniques;
      f.last = Math.max(f.last, d.last);
    }
  }
  for (const [key, n] of from.days) into.days.set(key, (into.days.get(key) ?? 0) + n);
}

function addFlow(out: Counts, f: FlowDelta | undefined): void {
  if (f === undefined) return;
  out.clicks += f.clicks;
  out.no_match += f.noMatch;
  out.bots += f.bots;
  out.uniques += f.uniques;
}

function dayRows(days: Map<string, number>): { stream_id: string; day: string; clicks: number }[] {
  const out: { stream_id: string; day: string; clicks: number }[] = [];
  for (const [key, clicks] of days) {
    const at = key.indexOf('\u0000');
    out.push({ stream_id: key.slice(0, at), day: key.slice(at + 1), clicks });
  }
  return out;
}

/**
 * The counts of a cut as storage adds them. Built a slice at a time, off the hot path: 100k touched
 * streams are tens of ms of work (#12).
 */
async function countRows(held: Held): Promise<CountRows> {
  // Touched streams share their last milliseconds (10,000 streams a second share ~1,000 of them):
  // each is formatted once.
  const isos = new Map<number, string>();
  const iso = (ms: number) => {
    let text = isos.get(ms);
    if (text === undefined) {
      text = new Date(ms).toISOString();
      isos.set(ms, text);
    }
    return text;
  };
  const slice = new TimeSlice();
  const out: CountRows = { streams: [], flows: [], days: [] };
  for (const [id, d] of held.streams) {
    out.streams.push([id, d.hits, d.uniques, iso(d.last)]);
    if ((out.streams.length & 255) === 0) await slice.pause();
  }
  for (const [id, d] of held.flows) {
    out.flows.push([id, d.clicks, d.noMatch, d.bots, d.uniques, iso(d.last)]);
    if ((out.flows.length & 255) === 0) await slice.pause();
  }
  for (const d of dayRows(held.days)) out.days.push([d.stream_id, d.day, d.clicks]);
  return out;
}
