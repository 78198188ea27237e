import type { Config } from '../config/index.ts';
import { ApiError } from '../errors/index.ts';
import {
  type Aggregates,
  type ConversionSums,
  type FlowRecord,
  isCurrency,
  MICROS,
  NO_CONVERSIONS,
  type Page,
  type Storage,
  type StreamRecord,
  toMicros,
} from '../storage/index.ts';
import type { FlowsSection, Logger } from '../telemetry/index.ts';
import { canonicalTimeZone, TIME_ZONE_EXPECTED, TimeSlice } from '../time/index.ts';
import { type CompiledFlow, compileFlowSliced } from './compiled-flow.ts';
import type { RoutingLedger } from './ledger.ts';
import { count, FLOW_LIMITS, ruleValueCount } from './limits.ts';
import { type LoadedChunk, RoutingCache } from './routing-cache.ts';
import { normaliseFilters, ruleProblemsSliced } from './rules.ts';
import {
  FLOW_DEFAULTS,
  type FlowCreate,
  type FlowList,
  type FlowUpdate,
  PAGE_LIMIT_DEFAULT,
  STREAM_DEFAULTS,
  type StreamCreate,
  type StreamList,
  type StreamUpdate,
} from './schemas.ts';
import { countryListProblems, rejectIf, targetUrlField } from './validation.ts';

export interface RoutingOptions {
  storage: Storage;
  logger: Logger;
  cacheMaxEntries: number;
  cacheTtlMs: number;
  /** What /go counts: compiled streams take their daily caps from it, lists show its pending counts. */
  ledger: RoutingLedger;
  /**
   * How often totals for the system metrics sections are re-read (an O(1) read of the `totals`
   * table). A change made through any node's ACP is seen at once (its own, or the others'
   * invalidation notice); this bounds how late one written to the database by anything else is.
   */
  aggregatesIntervalMs?: number;
}

/** The least time between two background reads of the totals on one node. */
const REFRESH_GAP_MS = 250;

const ZERO: Aggregates = {
  streams: { total: 0, active: 0 },
  traffic_flows: { total: 0, active: 0 },
};

/**
 * Traffic flows and streams: validated writes that keep every node's cache right, lists with
 * counters, and the cached routing data the hot path reads. What the hot path counts is the
 * ledger's ({@link RoutingLedger}).
 */
export class RoutingService {
  readonly cache: RoutingCache;
  readonly #ledger: RoutingLedger;
  readonly #storage: Storage;
  readonly #log: Logger;
  readonly #aggregatesMs: number;
  #aggregates: Aggregates = ZERO;
  #stopped = false;
  /**
   * The totals read again in the background: at once when none is under way, else once more after
   * it, and never two within {@link REFRESH_GAP_MS}. However many writes, notices and timer ticks
   * ask, and however slow the database, at most one read is queued (beside the ledger's caps
   * refreshes, which share its queue) and a node reads at most four times a second.
   */
  readonly #refreshSoon = coalesced(
    () => this.refreshAggregates(),
    REFRESH_GAP_MS,
    () => this.#stopped,
  );
  /**
   * Every cached flow read again in the background, because invalidation notices may have been
   * missed (the listening connection was lost and is back): one such reload at a time, and one
   * more after it however many reconnections meanwhile (a flapping link must not pile full
   * reloads onto a database that has just come back).
   */
  readonly #reloadSoon = coalesced(
    () =>
      this.cache.reloadAll().catch((err: unknown) => {
        if (!this.#stopped)
          this.#log.warn(
            { err: (err as Error).message },
            'reloading the routing cache failed; it is reloaded again by its task',
          );
      }),
    0,
    () => this.#stopped,
  );
  #timer: NodeJS.Timeout | undefined;
  /** What each compiled flow was compiled from, so a reload reuses what has not changed. */
  readonly #sources = new WeakMap<CompiledFlow, string>();
  /** Slugs of compiled active flows without an active default stream (see FlowsSection). */
  readonly #noDefault = new Set<string>();
  /** Per flow, the last write to its streams that checks the flow's limits ({@link #flowWrite}). */
  readonly #flowWrites = new Map<string, Promise<void>>();

  /** The service as `cache` asks. */
  static fromConfig(
    config: Config,
    deps: Pick<RoutingOptions, 'storage' | 'logger' | 'ledger'>,
  ): RoutingService {
    return new RoutingService({
      ...deps,
      cacheMaxEntries: config.cache.max_entries,
      cacheTtlMs: config.cache.ttl_ms,
    });
  }

  constructor(opts: RoutingOptions) {
    this.#storage = opts.storage;
    this.#log = opts.logger;
    this.#ledger = opts.ledger;
    this.#aggregatesMs = opts.aggregatesIntervalMs ?? 2_000;
    this.cache = new RoutingCache({
      maxEntries: opts.cacheMaxEntries,
      ttlMs: opts.cacheTtlMs,
      load: (slug) => this.#load(slug),
      loadMany: (slugs, slice) => this.#loadMany(slugs, slice),
    });
    // Another node changed a flow: its totals may have changed too (a create, a status change).
    this.#storage.onInvalidation((slug) => {
      if (slug === undefined) this.#reloadSoon();
      else this.#forget(slug);
      this.#refreshSoon();
    });
  }

  async #load(slug: string): Promise<CompiledFlow | undefined> {
    const flow = await this.#storage.flows.getBySlug(slug);
    if (flow === undefined) return undefined;
    const compiled = await this.#compile(flow, await this.#storage.streams.ofFlow(flow.id), new TimeSlice());
    await this.#ledger.loadNewCaps();
    return compiled;
  }

  /** A chunk of slugs for the cache's reload: two queries, then one flow compiled per step. */
  async #loadMany(slugs: readonly string[], slice: TimeSlice): Promise<LoadedChunk> {
    const flows = await this.#storage.flows.bySlugs(slugs);
    const streams = flows.length === 0 ? [] : await this.#storage.streams.ofFlows(flows.map((f) => f.id));
    const byFlow = new Map<string, StreamRecord[]>();
    for (const s of streams) {
      const list = byFlow.get(s.flow_id);
      if (list === undefined) byFlow.set(s.flow_id, [s]);
      else list.push(s);
    }
    const out = new Map<string, CompiledFlow>();
    for (const flow of flows) {
      const rows = byFlow.get(flow.id) ?? [];
      // Unchanged since it was compiled: keep it. Most flows are, and recompiling them all was
      // most of a reload's CPU and a whole cache of garbage every 30 s.
      const prev = this.cache.current(flow.slug);
      if (prev !== undefined && this.#sources.get(prev) === sourceOf(flow, rows)) {
        out.set(flow.slug, prev);
        continue;
      }
      await slice.pause();
      out.set(flow.slug, await this.#compile(flow, rows, slice));
    }
    await this.#ledger.loadNewCaps();
    return { flows: out, rows: streams.length };
  }

  /** A flow compiled a rule at a time, pausing on `slice` (a flow at its limits takes tens of ms). */
  async #compile(
    flow: FlowRecord,
    streams: readonly StreamRecord[],
    slice: TimeSlice,
  ): Promise<CompiledFlow> {
    const slug = flow.slug;
    const capOf = (id: string, cap: number, tz: string) => this.#ledger.capOf(id, cap, tz);
    const compiled = await compileFlowSliced(flow, streams, capOf, slice);
    this.#sources.set(compiled, sourceOf(flow, streams));
    if (compiled.active && compiled.fallback.length === 0) this.#noDefault.add(slug);
    else this.#noDefault.delete(slug);
    for (const { id, problem } of compiled.refused) {
      this.#log.warn(
        { slug, stream_id: id, problem },
        'stream left out of routing: its stored target_url cannot be sent; update it through the ACP',
      );
    }
    return compiled;
  }

  /** Starts the periodic totals refresh; background work logs its failures, never throws. */
  start(): void {
    this.#refreshSoon();
    this.#timer = setInterval(() => this.#refreshSoon(), this.#aggregatesMs);
    this.#timer.unref();
  }

  /** Stops the timer and the background reads. */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
  }

  /** Reads the totals now (queued behind a caps refresh under way); the background asks {@link #refreshSoon}. */
  refreshAggregates(): Promise<void> {
    return this.#ledger.inTurn(async () => {
      try {
        this.#aggregates = await this.#storage.aggregates();
      } catch (err) {
        this.#log.warn({ err: (err as Error).message }, 'reading flow and stream totals failed');
      }
    });
  }

  /** Flows and streams stored, and how many are active, as last read (the metrics sections). */
  totals(): Aggregates {
    return this.#aggregates;
  }

  /** Slugs of compiled active flows without an active default stream (`traffic_flows` section). */
  withoutDefaultStream(): FlowsSection['without_default_stream'] {
    return { count: this.#noDefault.size, slugs: [...this.#noDefault].slice(0, 10) };
  }

  /**
   * Drops a flow from the cache (and, when `gone`, from its stale fallback: the slug routes nowhere
   * now); what it was is learnt again when it is next compiled.
   */
  #forget(slug: string, gone = false): void {
    this.cache.invalidate(slug, gone);
    this.#noDefault.delete(slug);
  }

  /**
   * Drops a changed flow here at once and tells the other nodes; a failed notice only delays them to
   * the TTL. `gone`: slugs the write left routing nowhere (deleted, paused, renamed away).
   */
  async #changed(slugs: readonly string[], gone: readonly string[] = []): Promise<void> {
    for (const slug of new Set(slugs)) {
      this.#forget(slug, gone.includes(slug));
      try {
        await this.#storage.publishInvalidation(slug);
      } catch (err) {
        this.#log.warn(
          { err: (err as Error).message, slug },
          'cache invalidation notice failed; other nodes refresh at TTL',
        );
      }
    }
    this.#refreshSoon();
  }

  async createFlow(body: FlowCreate): Promise<FlowRecord> {
    rejectIf(flowProblems(body));
    const flow = await this.#storage.flows.create({
      slug: body.slug,
      name: body.name,
      status: body.status ?? FLOW_DEFAULTS.status,
      rotation: body.rotation ?? FLOW_DEFAULTS.rotation,
      forward_query: body.forward_query ?? FLOW_DEFAULTS.forward_query,
      bot_action: body.bot_action ?? FLOW_DEFAULTS.bot_action,
      // Stored in the one form reports show zones in (`europe/berlin` → `Europe/Berlin`).
      timezone: canonicalTimeZone(body.timezone ?? FLOW_DEFAULTS.timezone)!,
      cost_per_click: body.cost_per_click ?? FLOW_DEFAULTS.cost_per_click,
      currency: body.currency ?? FLOW_DEFAULTS.currency,
    });
    await this.#changed([flow.slug]);
    return flow;
  }

  async updateFlow(body: FlowUpdate): Promise<FlowRecord> {
    const { id, version, ...changes } = body;
    rejectIf(flowProblems(changes));
    if (changes.timezone !== undefined) changes.timezone = canonicalTimeZone(changes.timezone)!;
    const before = await this.#mustFlow(id);
    const after = await this.#storage.flows.update(id, changes, version);
    if (after === undefined)
      throw this.#staleOrGone('traffic flow', await this.#storage.flows.get(id), version);
    await this.#changed(
      [before.slug, after.slug],
      [
        ...(before.slug === after.slug ? [] : [before.slug]),
        ...(after.status === 'active' ? [] : [after.slug]),
      ],
    );
    return this.#ledger.flowView(after);
  }

  async deleteFlow(id: string): Promise<FlowRecord> {
    const flow = await this.#storage.flows.delete(id);
    if (flow === undefined) throw notFound('traffic flow');
    await this.#changed([flow.slug], [flow.slug]);
    return flow;
  }

  async listFlows(body: FlowList): Promise<Page<FlowRecord & ConversionSums>> {
    const page = await this.#storage.flows.list({
      filter: body.filter ?? {},
      sort: { by: body.sort?.by ?? 'created_at', order: body.sort?.order ?? 'asc' },
      limit: body.limit ?? PAGE_LIMIT_DEFAULT,
      cursor: body.cursor,
    });
    const sums = await this.#storage.conversions.sumsBy(
      'flow_id',
      page.items.map((f) => f.id),
    );
    return {
      ...page,
      items: page.items.map((f) => ({ ...this.#ledger.flowView(f), ...(sums.get(f.id) ?? NO_CONVERSIONS) })),
    };
  }

  async createStream(body: StreamCreate): Promise<StreamRecord> {
    const given = body.filters ?? STREAM_DEFAULTS.filters;
    const target = targetUrlField(body.target_url);
    // Checked as sent (a problem names the value as typed, at its place), stored normalised.
    rejectIf([
      ...target.problems,
      ...countryListProblems(given.countries_include, '/filters/countries_include'),
      ...countryListProblems(given.countries_exclude, '/filters/countries_exclude'),
      ...(await ruleProblemsSliced(given, new TimeSlice())),
    ]);
    const filters = normaliseFilters(given);
    const flow = await this.#storage.flows.get(body.flow_id);
    if (flow === undefined) throw notFound('traffic flow', '/flow_id');
    const stream = await this.#flowWrite(flow.id, async (others) => {
      if (others.length >= FLOW_LIMITS.streamsPerFlow)
        rejectIf([
          {
            path: '/flow_id',
            message: `the flow has ${count(others.length)} streams, the most a flow may hold (docs/routing.md#limits); delete one first`,
          },
        ]);
      rejectIf(flowValueProblems(others, filters));
      return this.#storage.streams.create({
        flow_id: body.flow_id,
        name: body.name,
        type: body.type,
        position: body.position ?? STREAM_DEFAULTS.position,
        weight: body.weight ?? STREAM_DEFAULTS.weight,
        status: body.status ?? STREAM_DEFAULTS.status,
        filters,
        target_url: target.url,
        redirect_code: body.redirect_code ?? STREAM_DEFAULTS.redirect_code,
        redirect_mode: body.redirect_mode ?? STREAM_DEFAULTS.redirect_mode,
        daily_cap: body.daily_cap ?? STREAM_DEFAULTS.daily_cap,
      });
    });
    await this.#changed([flow.slug]);
    return stream;
  }

  async updateStream(body: StreamUpdate): Promise<StreamRecord> {
    const { id, version, ...changes } = body;
    const target = changes.target_url === undefined ? undefined : targetUrlField(changes.target_url);
    rejectIf([
      ...(target?.problems ?? []),
      ...countryListProblems(changes.filters?.countries_include, '/filters/countries_include'),
      ...countryListProblems(changes.filters?.countries_exclude, '/filters/countries_exclude'),
      ...(await ruleProblemsSliced(changes.filters, new TimeSlice())),
    ]);
    if (changes.filters !== undefined) changes.filters = normaliseFilters(changes.filters);
    if (target !== undefined) changes.target_url = target.url;
    const update = () => this.#storage.streams.update(id, changes, version);
    let after: StreamRecord | undefined;
    const filters = changes.filters;
    if (filters === undefined) after = await update();
    else {
      // New rules count against the flow's limit with its other streams' (this one's old ones out).
      const before = await this.#storage.streams.get(id);
      after =
        before &&
        (await this.#flowWrite(before.flow_id, async (streams) => {
          rejectIf(
            flowValueProblems(
              streams.filter((s) => s.id !== id),
              filters,
              ruleValueCount(streams.find((s) => s.id === id)?.filters),
            ),
          );
          return update();
        }));
    }
    if (after === undefined) throw this.#staleOrGone('stream', await this.#storage.streams.get(id), version);
    await this.#changedFlowOf(after.flow_id);
    return this.#ledger.streamView(after);
  }

  /**
   * A write to a flow's streams that its limits must hold after: given the flow's streams as they
   * are, one at a time per flow on this node, so that two writes at once cannot both pass the
   * check on the same count. (Writes through two nodes at once can still each pass; the compile
   * yields between rules, so a flow past its limits costs memory, never a stalled node.)
   */
  #flowWrite<T>(flowId: string, write: (streams: StreamRecord[]) => Promise<T>): Promise<T> {
    const run = (this.#flowWrites.get(flowId) ?? Promise.resolve()).then(async () =>
      write(await this.#storage.streams.ofFlow(flowId)),
    );
    const settled = run.then(
      () => {},
      () => {},
    );
    this.#flowWrites.set(flowId, settled);
    void settled.then(() => {
      if (this.#flowWrites.get(flowId) === settled) this.#flowWrites.delete(flowId);
    });
    return run;
  }

  async deleteStream(id: string): Promise<StreamRecord> {
    const stream = await this.#storage.streams.delete(id);
    if (stream === undefined) throw notFound('stream');
    await this.#changedFlowOf(stream.flow_id);
    return stream;
  }

  async listStreams(body: StreamList): Promise<Page<StreamRecord & ConversionSums>> {
    const page = await this.#storage.streams.list({
      filter: body.filter ?? {},
      sort: { by: body.sort?.by ?? 'position', order: body.sort?.order ?? 'asc' },
      limit: body.limit ?? PAGE_LIMIT_DEFAULT,
      cursor: body.cursor,
    });
    const sums = await this.#storage.conversions.sumsBy(
      'stream_id',
      page.items.map((s) => s.id),
    );
    return {
      ...page,
      items: page.items.map((s) => ({
        ...this.#ledger.streamView(s),
        ...(sums.get(s.id) ?? NO_CONVERSIONS),
      })),
    };
  }

  async #changedFlowOf(flowId: string): Promise<void> {
    const flow = await this.#storage.flows.get(flowId);
    if (flow) await this.#changed([flow.slug]);
  }

  async #mustFlow(id: string): Promise<FlowRecord> {
    const flow = await this.#storage.flows.get(id);
    if (flow === undefined) throw notFound('traffic flow');
    return flow;
  }

  #staleOrGone(
    what: string,
    current: { id: string; version: number } | undefined,
    expected: number | undefined,
  ): ApiError {
    if (current === undefined) return notFound(what);
    return new ApiError(
      'resource.conflict',
      `The ${what} was changed meanwhile (version ${current.version}, not ${expected}).`,
      {
        details: { current_version: current.version },
      },
    );
  }
}

/**
 * Background work many may ask for at once, run one at a time: at once when idle, else once more
 * after the run under way however many asked meanwhile, the next never sooner than `gapMs` after
 * the last ended; nothing once `stopped()`. `run` handles its own failures.
 */
function coalesced(run: () => Promise<unknown>, gapMs: number, stopped: () => boolean): () => void {
  let busy = false;
  let again = false;
  const ask = () => {
    if (stopped()) return;
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    void run().finally(() => {
      const next = () => {
        busy = false;
        if (again) {
          again = false;
          ask();
        }
      };
      if (gapMs <= 0) next();
      else setTimeout(next, gapMs).unref();
    });
  };
  return ask;
}

/**
 * What a compiled flow is made of: the fields routing reads, not versions, so that a row changed
 * by any writer (a script, a restore) is recompiled too. Counters and target checks are not in it.
 */
function sourceOf(flow: FlowRecord, streams: readonly StreamRecord[]): string {
  let out = `${flow.slug}\n${flow.status}\n${flow.rotation}\n${flow.forward_query}\n${flow.bot_action}\n${flow.timezone}\n${flow.cost_per_click}`;
  for (const s of streams) {
    out += `\n${s.id}\t${s.name}\t${s.type}\t${s.position}\t${s.weight}\t${s.status}\t${s.redirect_code}\t${s.redirect_mode}\t${s.daily_cap}\t${s.target_url}\t${JSON.stringify(s.filters)}`;
  }
  return out;
}

/**
 * What JSON Schema cannot say about a flow's fields: a time zone and a currency ICU knows, and a
 * cost that micro-units hold exactly (it would be rounded, `1e-9` to 0, without a word).
 */
function flowProblems(f: {
  timezone?: string | undefined;
  currency?: string | undefined;
  cost_per_click?: number | undefined;
}): { path: string; message: string }[] {
  const out: { path: string; message: string }[] = [];
  const cost = f.cost_per_click;
  if (cost !== undefined && (toMicros(cost) ?? Number.NaN) / MICROS !== cost)
    out.push({ path: '/cost_per_click', message: `${cost} has more than 6 decimal places` });
  if (f.timezone !== undefined && canonicalTimeZone(f.timezone) === undefined)
    out.push({
      path: '/timezone',
      message: `"${f.timezone}" ${TIME_ZONE_EXPECTED}`,
    });
  if (f.currency !== undefined && !isCurrency(f.currency))
    out.push({
      path: '/currency',
      message: `"${f.currency}" is not an ISO 4217 currency code (e.g. USD, EUR)`,
    });
  return out;
}

/**
 * A stream's new filters against the flow's limit of rule values, beside its other streams'
 * (`replaced`: the values of the filters they replace). A write that adds nothing is taken even
 * on a flow stored past the limit, so that it can be brought back under.
 */
function flowValueProblems(
  others: readonly StreamRecord[],
  filters: StreamRecord['filters'],
  replaced = 0,
): { path: string; message: string }[] {
  const added = ruleValueCount(filters);
  let total = added;
  for (const s of others) total += ruleValueCount(s.filters);
  if (total <= FLOW_LIMITS.ruleValuesPerFlow || added <= replaced) return [];
  return [
    {
      path: '/filters/rules',
      message: `the flow's streams would hold ${count(total)} rule values, more than the ${count(FLOW_LIMITS.ruleValuesPerFlow)} a flow may hold (docs/routing.md#limits)`,
    },
  ];
}

function notFound(what: string, path = '/id'): ApiError {
  return new ApiError('resource.not_found', `No ${what} with that id.`, {
    details: [{ path, message: `unknown ${what}` }],
  });
}
