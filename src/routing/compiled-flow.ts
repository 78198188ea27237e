import type { ClickFacts, QueryLike } from '../clicks/index.ts';
import type { BotAction, FlowRecord, RedirectMode, StreamRecord } from '../storage/index.ts';
import { canonicalTimeZone, type TimeSlice } from '../time/index.ts';
import type { StreamCap } from './daily-caps.ts';
import {
  acceptsBots,
  type CompiledRules,
  compileRules,
  compileRulesSliced,
  rulesPass,
  type Visitor,
} from './rules.ts';
import { MACROS, type Macro, normaliseTargetUrl, PARAM_MACRO } from './validation.ts';

/**
 * What a target URL's macros are filled from (docs/routing.md#macros): the click's facts, and what the request and
 * the flow say. Built only for a target that has macros.
 */
export interface MacroValues {
  country: string | undefined;
  /** The flow's slug. */
  flow: string;
  request_id: string;
  click: ClickFacts;
  /** The incoming query parameters (`{param:NAME}`). */
  query: QueryLike;
}

/** A stream ready for the hot path: filters as sets, the target URL with its macro positions. */
export interface RoutableStream {
  id: string;
  name: string;
  type: StreamRecord['type'];
  weight: number;
  redirectCode: number;
  /** `http`, or a 200 page that moves on (docs/routing.md#redirect-modes). */
  mode: RedirectMode;
  /** Its targeting rules (docs/routing.md#rules), compiled; undefined when it has none. */
  rules: CompiledRules | undefined;
  /** Its rules accept a bot (`is_bot: true`): a `bot_action: stream` flow sends bots only here. */
  acceptsBots: boolean;
  /** Its daily cap (docs/routing.md#daily-caps), shared across recompiles; undefined when it has none. */
  cap: StreamCap | undefined;
  include: ReadonlySet<string> | undefined;
  exclude: ReadonlySet<string> | undefined;
  /** The target URL in its normalised form (docs/routing.md#target-urls): plain visible ASCII, always a valid header value. */
  target: string;
  /**
   * Where its macros are: [start, end, macro number] per macro, in order; empty when it has none.
   * A macro number below `MACROS.length` is that macro; above, `{param:NAME}` with NAME at
   * `params[number - MACROS.length]`.
   * Positions, not pieces: 100k cached streams would otherwise hold 100k arrays of substrings.
   */
  marks: readonly number[];
  /** The query parameter names of its `{param:NAME}` macros (one shared empty array when none). */
  params: readonly string[];
}

/** A flow ready for the hot path; built once per cache fill, never per request. */
export interface CompiledFlow {
  id: string;
  slug: string;
  active: boolean;
  rotation: 'position' | 'weight';
  /** Append the incoming query string to the target's (docs/routing.md#forward_query). */
  forwardQuery: boolean;
  botAction: BotAction;
  /** Cost of each non-bot click (docs/routing.md#flows-and-streams). */
  cost: number;
  /** The zone its `weekday` and `hour` rules and its daily caps go by (UTC for one ICU does not know). */
  timezone: string;
  forced: readonly RoutableStream[];
  regular: readonly RoutableStream[];
  fallback: readonly RoutableStream[];
  /**
   * Active streams left out of routing because their stored target cannot be sent (a row written
   * before targets were normalised and checked): the service logs them once per cache fill.
   */
  refused: readonly { id: string; problem: string }[];
}

const MACRO_RE = new RegExp(`\\{(${MACROS.join('|')}|${PARAM_MACRO.source.slice(1, -1)})\\}`, 'g');
const NO_PARAMS: readonly string[] = Object.freeze([]);
const NO_MARKS: readonly number[] = Object.freeze([]);
/**
 * Country sets interned by content: flows tend to repeat the same lists, and a Set costs a few
 * hundred bytes. Bounded, so a store of all-different lists cannot grow it without end.
 */
const INTERN_MAX = 50_000;
const countrySets = new Map<string, ReadonlySet<string>>();
function countrySet(list: readonly string[] | undefined): ReadonlySet<string> | undefined {
  if (!list?.length) return undefined;
  const key = [...list].sort().join(',');
  let set = countrySets.get(key);
  if (set === undefined) {
    set = new Set(list);
    if (countrySets.size < INTERN_MAX) countrySets.set(key, set);
  }
  return set;
}

/**
 * The target with the macros that are the same for every click of this stream written in: `{flow}`
 * (the slug) and `{stream}` (the id), percent-encoded as any macro is. A compiled flow is rebuilt
 * whenever its slug or a stream changes, so the hot path never fills them; a target with no other
 * macro is then sent as it is.
 */
function withStaticMacros(url: string, slug: string, streamId: string): string {
  if (url.indexOf('{flow}') === -1 && url.indexOf('{stream}') === -1) return url;
  return url.replace(MACRO_RE, (macro: string, name: string) =>
    name === 'flow' ? encodeURIComponent(slug) : name === 'stream' ? encodeURIComponent(streamId) : macro,
  );
}

function macroMarks(url: string): { marks: readonly number[]; params: readonly string[] } {
  const marks: number[] = [];
  let params: string[] | undefined;
  for (const m of url.matchAll(MACRO_RE)) {
    let k = MACROS.indexOf(m[1] as Macro);
    if (k === -1) {
      params ??= [];
      const name = m[1]!.slice('param:'.length);
      let at = params.indexOf(name);
      if (at === -1) at = params.push(name) - 1;
      k = MACROS.length + at;
    }
    marks.push(m.index, m.index + m[0].length, k);
  }
  return { marks: marks.length === 0 ? NO_MARKS : marks.slice(), params: params ?? NO_PARAMS };
}

const byPosition = (a: StreamRecord, b: StreamRecord) => a.position - b.position || (a.id < b.id ? -1 : 1);

const NONE_REFUSED: CompiledFlow['refused'] = Object.freeze([]);

/** Where a compiled stream's daily cap comes from (the routing ledger's {@link DailyCaps}). */
export type CapOf = (streamId: string, cap: number, timezone: string) => StreamCap | undefined;
const NO_CAPS: CapOf = () => undefined;

/**
 * A flow ready for the hot path, in one synchronous step. `rulesOf` holds rules already compiled
 * by stream id ({@link compileFlowSliced}); a stream not in it has its rules compiled here.
 */
export function compileFlow(
  flow: FlowRecord,
  streams: readonly StreamRecord[],
  capOf: CapOf = NO_CAPS,
  rulesOf?: ReadonlyMap<string, CompiledRules | undefined>,
): CompiledFlow {
  const active = streams.filter((s) => s.status === 'active').sort(byPosition);
  // Normalised again here, not trusted as stored: rows from before the write-time check may hold
  // a raw IDN host, a CR/LF or a macro in the host, and a click must never carry those.
  const targets = new Map<StreamRecord, string>();
  const refused: { id: string; problem: string }[] = [];
  for (const s of active) {
    const target = normaliseTargetUrl(s.target_url);
    if ('problem' in target) refused.push({ id: s.id, problem: target.problem });
    else targets.set(s, target.url);
  }
  // A zone stored by another writer that ICU does not know: UTC rather than a failing click.
  const timezone = canonicalTimeZone(flow.timezone) ?? 'UTC';
  const routable = (s: StreamRecord): RoutableStream => {
    const target = withStaticMacros(targets.get(s)!, flow.slug, s.id);
    const { marks, params } = macroMarks(target);
    return {
      id: s.id,
      name: s.name,
      type: s.type,
      weight: s.weight,
      redirectCode: s.redirect_code,
      mode: s.redirect_mode,
      rules: rulesOf?.has(s.id) ? rulesOf.get(s.id) : compileRules(s.filters, timezone),
      acceptsBots: acceptsBots(s.filters),
      cap: capOf(s.id, s.daily_cap, timezone),
      include: countrySet(s.filters.countries_include),
      exclude: countrySet(s.filters.countries_exclude),
      target,
      marks,
      params,
    };
  };
  // filter then map: arrays of exactly their length, as the cache holds three per flow.
  const ofType = (type: StreamRecord['type']) =>
    active.filter((s) => s.type === type && targets.has(s)).map(routable);
  return {
    id: flow.id,
    slug: flow.slug,
    active: flow.status === 'active',
    rotation: flow.rotation,
    forwardQuery: flow.forward_query,
    botAction: flow.bot_action,
    cost: flow.cost_per_click,
    timezone,
    forced: ofType('forced'),
    regular: ofType('regular'),
    fallback: ofType('default'),
    refused: refused.length > 0 ? refused : NONE_REFUSED,
  };
}

/**
 * {@link compileFlow} with its streams' rules compiled a rule at a time, pausing on `slice` between
 * them: a flow at its limits (docs/routing.md#limits), or one stored past them, never holds the
 * event loop for longer than one rule takes.
 */
export async function compileFlowSliced(
  flow: FlowRecord,
  streams: readonly StreamRecord[],
  capOf: CapOf,
  slice: TimeSlice,
): Promise<CompiledFlow> {
  const timezone = canonicalTimeZone(flow.timezone) ?? 'UTC';
  const rules = new Map<string, CompiledRules | undefined>();
  for (const s of streams)
    if (s.status === 'active') rules.set(s.id, await compileRulesSliced(s.filters, timezone, slice));
  await slice.pause();
  return compileFlow(flow, streams, capOf, rules);
}

/** Why a stream does not take a click, for the simulator's trace (docs/routing.md#simulator); undefined: it does. */
export type Refusal = 'country_not_included' | 'country_excluded' | 'rules' | 'not_for_bots' | 'daily_cap';

/**
 * Whether a stream's filters let the click through (docs/routing.md#rules): an unknown country passes no include
 * list and every exclude list; then its rules. With `botsOnly` (`bot_action: stream`), only streams
 * whose rules accept bots are candidates. The one predicate the decision and the simulator share.
 */
export function refusal(s: RoutableStream, v: Visitor, botsOnly: boolean): Refusal | undefined {
  if (botsOnly && !s.acceptsBots) return 'not_for_bots';
  const country = v.country;
  if (s.include !== undefined && (country === undefined || !s.include.has(country)))
    return 'country_not_included';
  if (s.exclude !== undefined && country !== undefined && s.exclude.has(country)) return 'country_excluded';
  if (s.rules !== undefined && !rulesPass(s.rules, v)) return 'rules';
  if (s.cap?.reached(v.at)) return 'daily_cap';
  return undefined;
}

function passes(s: RoutableStream, v: Visitor, botsOnly: boolean): boolean {
  if (botsOnly && !s.acceptsBots) return false;
  const country = v.country;
  if (s.include !== undefined && (country === undefined || !s.include.has(country))) return false;
  if (s.exclude !== undefined && country !== undefined && s.exclude.has(country)) return false;
  if (s.rules !== undefined && !rulesPass(s.rules, v)) return false;
  return s.cap === undefined || !s.cap.reached(v.at);
}

function firstPassing(
  list: readonly RoutableStream[],
  v: Visitor,
  botsOnly: boolean,
): RoutableStream | undefined {
  for (let i = 0; i < list.length; i++) if (passes(list[i]!, v, botsOnly)) return list[i];
  return undefined;
}

/** Scratch verdicts of a weighted pick: one array for the process (decisions never interleave). */
let passed = new Uint8Array(64);

/**
 * The routing decision (docs/routing.md#the-decision): forced streams in position order, then regular ones (first by
 * position, or weighted random among those whose filters pass), then the default stream. With
 * `botsOnly` (a bot on a `bot_action: stream` flow) only streams whose rules accept bots count.
 * `random` returns [0, 1); it is injected so tests can seed it.
 */
export function decide(
  flow: CompiledFlow,
  v: Visitor,
  random: () => number,
  botsOnly = false,
): RoutableStream | undefined {
  const forced = firstPassing(flow.forced, v, botsOnly);
  if (forced !== undefined) return forced;
  const regular = flow.regular;
  if (regular.length > 0) {
    if (flow.rotation === 'position') {
      const s = firstPassing(regular, v, botsOnly);
      if (s !== undefined) return s;
    } else {
      // Each stream's filters are judged once; the pick walks the verdicts (rules are not free).
      if (passed.length < regular.length) passed = new Uint8Array(regular.length * 2);
      let total = 0;
      for (let i = 0; i < regular.length; i++) {
        const ok = regular[i]!.weight > 0 && passes(regular[i]!, v, botsOnly);
        passed[i] = ok ? 1 : 0;
        if (ok) total += regular[i]!.weight;
      }
      if (total > 0) {
        let pick = random() * total;
        for (let i = 0; i < regular.length; i++) {
          if (passed[i] === 1) {
            pick -= regular[i]!.weight;
            if (pick < 0) return regular[i];
          }
        }
      }
    }
  }
  return firstPassing(flow.fallback, v, botsOnly);
}

/**
 * The redirect location: the normalised target, each macro replaced by its value percent-encoded
 * (`encodeURIComponent`: never a raw value, so no value can add a CR/LF or leave the component);
 * an unknown value (no country, no such sub-id or parameter) is empty. The hot path makes `v`
 * only for a target with macros (`marks.length > 0`); without, the target is the location.
 */
export function buildTarget(stream: RoutableStream, v: MacroValues): string {
  const { target, marks } = stream;
  if (marks.length === 0) return target;
  let out = '';
  let last = 0;
  for (let i = 0; i < marks.length; i += 3) {
    out += target.slice(last, marks[i]) + encodeURIComponent(macroValue(stream, marks[i + 2]!, v));
    last = marks[i + 1]!;
  }
  return last < target.length ? out + target.slice(last) : out;
}

function macroValue(stream: RoutableStream, k: number, v: MacroValues): string {
  const c = v.click;
  switch (MACROS[k]) {
    case 'country':
      return v.country ?? '';
    case 'flow':
      return v.flow;
    case 'stream':
      return stream.id;
    case 'request_id':
      return v.request_id;
    case 'click_id':
      return c.click_id;
    case 'device_type':
      return c.device_type;
    case 'os':
      return c.os ?? '';
    case 'browser':
      return c.browser ?? '';
    case 'language':
      return c.language ?? '';
    case 'sub1':
      return c.sub1 ?? '';
    case 'sub2':
      return c.sub2 ?? '';
    case 'sub3':
      return c.sub3 ?? '';
    case 'sub4':
      return c.sub4 ?? '';
    case 'sub5':
      return c.sub5 ?? '';
    case 'sub6':
      return c.sub6 ?? '';
    case 'sub7':
      return c.sub7 ?? '';
    case 'sub8':
      return c.sub8 ?? '';
    case 'sub9':
      return c.sub9 ?? '';
    case 'sub10':
      return c.sub10 ?? '';
    default: {
      // Past the named macros (undefined here), {param:NAME}: the first value when repeated; a lone surrogate (from `%ED%A0%80`-like
      // input decoded leniently) is replaced, so encoding never throws.
      const raw = v.query[stream.params[k - MACROS.length]!];
      const value = typeof raw === 'string' ? raw : (raw?.[0] ?? '');
      return value.isWellFormed() ? value : value.toWellFormed();
    }
  }
}

/**
 * `location` with the incoming query string appended to its own (flow `forward_query`, docs/routing.md#forward_query):
 * after `&` when it has a query, `?` when not, before its fragment. `query` is the raw query
 * string as received (without `?`), in the target's normalised form (docs/routing.md#target-urls): what WHATWG's URL
 * serialisation encodes in a query is percent-encoded, the rest kept as sent.
 */
export function withForwardedQuery(location: string, query: string): string {
  if (query.length === 0) return location;
  const q = headerSafe(query);
  const hash = location.indexOf('#');
  const end = hash === -1 ? location.length : hash;
  const sep = location.lastIndexOf('?', end) === -1 ? '?' : location.charCodeAt(end - 1) === 63 ? '' : '&';
  return hash === -1 ? location + sep + q : location.slice(0, hash) + sep + q + location.slice(hash);
}

/**
 * Visible ASCII as it is but for what WHATWG's special-query percent-encode set holds (`"`, `#`,
 * `'`, `<`, `>`; `#` would also start a fragment); anything else percent-encoded. Node reads the
 * request line as latin1, so each character is one byte the client sent (space and controls never
 * get this far: the HTTP parser refuses them), and `%XX` of it restores that byte. Existing
 * escapes are kept.
 */
function headerSafe(s: string): string {
  let out: string | undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x20 && c < 0x7f && c !== 0x22 && c !== 0x23 && c !== 0x27 && c !== 0x3c && c !== 0x3e) {
      if (out !== undefined) out += s[i];
    } else {
      out ??= s.slice(0, i);
      out += `%${(c & 0xff).toString(16).toUpperCase().padStart(2, '0')}`;
    }
  }
  return out ?? s;
}
