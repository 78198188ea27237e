import { isIP } from 'node:net';
import { parse as parseQuery, stringify as stringifyQuery } from 'node:querystring';
import { type Static, Type } from '@sinclair/typebox';
import type { ClickDescriber, QueryLike } from '../clicks/index.ts';
import { Text } from '../config/index.ts';
import { ApiError } from '../errors/index.ts';
import { normalizeCountry } from '../http/index.ts';
import type { Clock } from '../time/index.ts';
import {
  buildTarget,
  type CompiledFlow,
  decide,
  type RoutableStream,
  refusal,
  withForwardedQuery,
} from './compiled-flow.ts';
import { type CompiledRule, localTime, rulePasses, type Visitor, WEEKDAYS } from './rules.ts';
import { SLUG_PATTERN } from './validation.ts';

/** `POST /acp/routing/simulate` (docs/routing.md#simulator). */
export const SimulateBody = Type.Object(
  {
    slug: Type.String({ pattern: SLUG_PATTERN }),
    /** As a proxy's country header carries it: any case, and the "unknown" codes (XX, T1, …) as on /go. */
    country: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9]{2}$' })),
    user_agent: Type.Optional(Text({ maxLength: 2048 })),
    ip: Type.Optional(Type.String({ minLength: 2, maxLength: 64 })),
    language: Type.Optional(Text({ maxLength: 256 })),
    referrer: Type.Optional(Text({ maxLength: 2048 })),
    /** The incoming query: a query string (`a=1&b=2`) or an object of values. */
    query: Type.Optional(
      Type.Union([
        Text({ maxLength: 4096 }),
        Type.Record(
          Type.String(),
          Type.Union([Text({ maxLength: 1024 }), Type.Array(Text({ maxLength: 1024 }))]),
        ),
      ]),
    ),
    /** ISO-8601; absent: now. */
    at: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
  },
  { additionalProperties: false },
);
export type SimulateInput = Static<typeof SimulateBody>;

export interface TraceStep {
  stream_id: string;
  name: string;
  type: RoutableStream['type'];
  result: 'pass' | 'fail' | 'skipped';
  reason: string;
}

export interface Simulation {
  outcome: 'redirect' | 'no_match' | 'bot';
  stream: { id: string; name: string; type: RoutableStream['type'] } | null;
  location: string | null;
  /** `http` status, or the page a `meta_refresh` / `js` stream answers with (200). */
  status: number;
  redirect_mode: RoutableStream['mode'] | null;
  /** What the click was taken to be: the facts the rules looked at, as the click log would store them. */
  click: {
    country: string | null;
    device_type: string;
    /** '' when the user agent names none, as in the click log (its columns are NOT NULL). */
    os: string;
    browser: string;
    language: string | null;
    referrer_host: string | null;
    is_bot: boolean;
    is_unique: boolean;
    at: string;
    /**
     * The click's time where the flow's `weekday` and `hour` rules look at it: the flow's zone, the
     * weekday and the hour; null for an unknown slug.
     */
    local: { timezone: string; weekday: string; hour: number } | null;
  };
  trace: TraceStep[];
  /** Why no stream was looked at (an unknown slug, a paused flow, a blocked bot); null when they were. */
  reason: string | null;
}

export interface SimulatorDeps {
  load(slug: string): Promise<CompiledFlow | null | undefined>;
  describer: ClickDescriber;
  clock: Clock;
  /** Country by address when none is given (the node's country database); none: unknown. */
  geo?: { lookup(address: string | undefined): string | undefined } | undefined;
  fallbackUrl?: string | undefined;
  random?: () => number;
}

const localOf = (at: number, timezone: string) => {
  const t = localTime(at, timezone);
  return { timezone, weekday: WEEKDAYS[t.weekday]!, hour: t.hour };
};

/** Values a rule's description names; a longer list (an `ip` rule's 1,000 blocks) is cut after them. */
const VALUES_SHOWN = 10;
const describeRule = (r: CompiledRule, i: number) => {
  const values = r.source.values;
  const shown =
    values.length <= VALUES_SHOWN
      ? JSON.stringify(values)
      : `${JSON.stringify(values.slice(0, VALUES_SHOWN)).slice(0, -1)}, … ${values.length - VALUES_SHOWN} more]`;
  return `rule ${i + 1} (${r.field} ${r.negate ? 'is not' : 'is'} ${shown})`;
};

/**
 * The routing decision of `/go/:slug` for a described click, explained stream by stream and rule
 * by rule (docs/routing.md#simulator). It calls the same `decide` and the same stream predicate
 * (`refusal`) as the hot path; nothing is counted, logged or remembered (uniqueness is looked at,
 * not opened).
 */
export async function simulate(deps: SimulatorDeps, input: SimulateInput): Promise<Simulation> {
  const at = input.at === undefined ? deps.clock.now() : Date.parse(input.at);
  if (!Number.isFinite(at))
    throw new ApiError('validation.invalid_input', `/at: "${input.at}" is not an ISO-8601 date-time`, {
      details: [{ path: '/at', message: 'is not an ISO-8601 date-time' }],
    });
  if (input.ip !== undefined && isIP(input.ip) === 0)
    throw new ApiError('validation.invalid_input', `/ip: "${input.ip}" is not an IPv4 or IPv6 address`, {
      details: [{ path: '/ip', message: 'is not an IPv4 or IPv6 address' }],
    });
  const query: QueryLike =
    input.query === undefined ? {} : typeof input.query === 'string' ? parseQuery(input.query) : input.query;
  const headers: Record<string, string> = {};
  if (input.user_agent !== undefined) headers['user-agent'] = input.user_agent;
  if (input.language !== undefined) headers['accept-language'] = input.language;
  if (input.referrer !== undefined) headers.referer = input.referrer;
  // As /go reads a proxy's header: an "unknown" code is no country, and the address decides.
  const country =
    (input.country === undefined ? undefined : normalizeCountry(input.country)) ?? deps.geo?.lookup(input.ip);
  const flow = await deps.load(input.slug);
  // A question that names no user agent asks about a person whose browser is not known, not about
  // a request without one (which /go takes for a bot, as it does `"user_agent": ""` here).
  const person = input.user_agent === undefined;
  const facts = deps.describer.describe(flow?.id ?? '', 'GET', headers, input.ip, query, false, person);
  const click = {
    country: country ?? null,
    device_type: facts.device_type,
    os: facts.os ?? '',
    browser: facts.browser ?? '',
    language: facts.language,
    referrer_host: facts.referrer_host,
    is_bot: facts.is_bot,
    is_unique: facts.is_unique,
    at: new Date(at).toISOString(),
    local: flow ? localOf(at, flow.timezone) : null,
  };
  /**
   * No stream takes the click: `routing.fallback_url` when /go sends the visitor there (an unknown
   * slug, a paused flow, no match, a bot on a `route` flow), else the 404 (a bot that `block` or
   * `stream` leaves without a stream is never sent there, docs/routing.md#fallback-url).
   */
  const lost = (trace: TraceStep[], bot: boolean, fallback: boolean, reason: string | null): Simulation => {
    const to = fallback ? deps.fallbackUrl : undefined;
    return {
      outcome: bot ? 'bot' : 'no_match',
      stream: null,
      location: to ?? null,
      status: to === undefined ? 404 : 302,
      redirect_mode: null,
      click,
      trace,
      reason,
    };
  };
  if (flow === null || flow === undefined || !flow.active)
    return lost([], false, true, flow ? 'the flow is paused' : 'no flow with this slug');
  const bot = facts.is_bot;
  if (bot && flow.botAction === 'block')
    return lost([], true, false, 'a bot, and the flow blocks bots (bot_action: block)');
  const botsOnly = bot && flow.botAction === 'stream';
  const v: Visitor = { country, facts, client: input.ip, query, at };
  const chosen = decide(flow, v, deps.random ?? Math.random, botsOnly);
  const trace = explain(flow, v, botsOnly, chosen);
  if (chosen === undefined) return lost(trace, bot, !botsOnly, null);
  let location =
    chosen.marks.length === 0
      ? chosen.target
      : buildTarget(chosen, { country, flow: flow.slug, request_id: 'simulated', click: facts, query });
  // /go appends the query string as received; an object is written as one.
  if (flow.forwardQuery && input.query !== undefined)
    location = withForwardedQuery(
      location,
      typeof input.query === 'string' ? asSent(input.query) : stringifyQuery(input.query),
    );
  return {
    outcome: bot ? 'bot' : 'redirect',
    stream: { id: chosen.id, name: chosen.name, type: chosen.type },
    location,
    status: chosen.mode === 'http' ? chosen.redirectCode : 200,
    redirect_mode: chosen.mode,
    click,
    trace,
    reason: null,
  };
}

/**
 * A query string as a browser sends it: what may not stand in a URL (spaces, non-ASCII) as UTF-8
 * percent-escapes. /go only ever receives it so (raw non-ASCII in a request line is refused).
 */
const asSent = (query: string) => query.toWellFormed().replace(/[^\x21-\x7e]+/g, encodeURIComponent);

/** Every active stream in the order the decision looks at them, with its verdict and why. */
function explain(
  flow: CompiledFlow,
  v: Visitor,
  botsOnly: boolean,
  chosen: RoutableStream | undefined,
): TraceStep[] {
  const out: TraceStep[] = [];
  let decided = false;
  const group = (list: readonly RoutableStream[], weighted: boolean) => {
    for (const s of list) {
      const step = (result: TraceStep['result'], reason: string) =>
        out.push({ stream_id: s.id, name: s.name, type: s.type, result, reason });
      if (decided && !(weighted && s.type === 'regular')) {
        step('skipped', 'a stream before it took the click');
        continue;
      }
      const why = refusal(s, v, botsOnly);
      if (why !== undefined) {
        step('fail', reasonOf(s, v, why));
        continue;
      }
      if (weighted && s.type === 'regular' && s.weight === 0) {
        step('fail', 'weight 0: never picked by weight');
        continue;
      }
      if (s === chosen)
        step(
          'pass',
          weighted && s.type === 'regular'
            ? `filters pass; picked by weight (${s.weight})`
            : 'filters pass; takes the click',
        );
      else if (weighted && s.type === 'regular' && !decided)
        step('pass', `filters pass; a candidate by weight (${s.weight}), not picked this time`);
      else step('pass', 'filters pass; a stream before it took the click');
    }
    if (list.includes(chosen as RoutableStream)) decided = true;
  };
  group(flow.forced, false);
  group(flow.regular, flow.rotation === 'weight');
  group(flow.fallback, false);
  return out;
}

function reasonOf(s: RoutableStream, v: Visitor, why: NonNullable<ReturnType<typeof refusal>>): string {
  switch (why) {
    case 'not_for_bots':
      return 'bot_action is stream and no rule of this stream accepts bots (is_bot is true)';
    case 'country_not_included':
      return v.country === undefined
        ? 'country unknown: an include list takes known countries only'
        : `country ${v.country} is not in countries_include`;
    case 'country_excluded':
      return `country ${v.country} is in countries_exclude`;
    case 'daily_cap':
      return `daily cap reached: ${s.cap?.used(v.at)} of ${s.cap?.cap} clicks today in the flow's time zone`;
    case 'rules': {
      const rules = s.rules!;
      const verdicts = rules.rules.map(
        (r, i) => `${describeRule(r, i)}: ${rulePasses(r, v, rules.timezone) ? 'pass' : 'fail'}`,
      );
      return `rules (${rules.any ? 'or' : 'and'}) fail — ${verdicts.join('; ')}`;
    }
  }
}
