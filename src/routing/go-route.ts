import type { IncomingMessage } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { FastifyInstance } from 'fastify';
import type { ClickDescriber, ClickFacts, ClickLog, QueryLike } from '../clicks/index.ts';
import { ApiError } from '../errors/index.ts';
import { addFastRoute, type FastAnswer, type RequestTrace } from '../http/index.ts';
import type { ClickOutcome, NewClick } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import { buildTarget, type CompiledFlow, decide, withForwardedQuery } from './compiled-flow.ts';
import type { RoutingLedger } from './ledger.ts';
import type { RoutingCache } from './routing-cache.ts';
import type { Visitor } from './rules.ts';
import { SLUG } from './validation.ts';

/**
 * The answer to a slug no active flow has: one object for every such request (its message is fixed),
 * so a flood of unknown slugs builds no error, and captures no stack, per request.
 */
const NO_FLOW = new ApiError('resource.not_found', 'No active traffic flow with that slug.');
/** A flow's no-match answer is still a click: it carries its id (docs/clicks.md). */
const noStream = (clickId: string) =>
  new ApiError('resource.not_found', 'No stream of this flow matches the request.', {
    headers: { 'x-click-id': clickId },
  });

const NO_QUERY: QueryLike = Object.freeze({});

/** What /go reads and counts: the cached flows, and the ledger its counts and unknown slugs go to. */
export interface GoRouting {
  cache: Pick<RoutingCache, 'peek' | 'load'>;
  ledger: Pick<RoutingLedger, 'counters' | 'slugMisses'>;
}

/** What /go needs of the click capability: describe each click once, log it once. */
export interface GoClicks {
  describer: ClickDescriber;
  log: Pick<ClickLog, 'append'>;
  /**
   * `routing.fallback_url` (docs/routing.md#fallback-url): where a visitor goes when no stream takes the click or the slug
   * is unknown, instead of a 404. Absent: the 404.
   */
  fallbackUrl?: string | undefined;
}

/**
 * The page of a `meta_refresh` or `js` stream (docs/routing.md#redirect-modes): nothing but what moves the browser on, with
 * no referrer sent. The location goes into an HTML attribute (escaped for it) and a JS string
 * (JSON, with `<` escaped so it cannot close the script).
 */
export function redirectPage(mode: 'meta_refresh' | 'js', location: string): string {
  const attr = location
    .replace(/&/g, '&amp;')
    .replace(/"/g, '&quot;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;');
  const head =
    '<!doctype html><html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">';
  if (mode === 'meta_refresh')
    return `${head}<meta http-equiv="refresh" content="0;url=${attr}"></head><body></body></html>`;
  const js = JSON.stringify(location)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
  return `${head}<script>location.replace(${js})</script></head><body><noscript><a href="${attr}">Continue</a></noscript></body></html>`;
}

/** Headers of a redirect page: not cached, no referrer, HTML. */
const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
} as const;

/**
 * `sub1`…`sub10` as the click log keeps them: an array up to the last sub-id the click had (the
 * rest are null), or null when it had none — a buffered click holds no ten-slot array of nulls.
 */
function subsOf(f: ClickFacts): (string | null)[] | null {
  // Most clicks carry a few low sub-ids or none: find the last one without building an array.
  const n =
    f.sub10 !== null
      ? 10
      : f.sub9 !== null
        ? 9
        : f.sub8 !== null
          ? 8
          : f.sub7 !== null
            ? 7
            : f.sub6 !== null
              ? 6
              : f.sub5 !== null
                ? 5
                : f.sub4 !== null
                  ? 4
                  : f.sub3 !== null
                    ? 3
                    : f.sub2 !== null
                      ? 2
                      : f.sub1 !== null
                        ? 1
                        : 0;
  if (n === 0) return null;
  const all = [f.sub1, f.sub2, f.sub3, f.sub4, f.sub5, f.sub6, f.sub7, f.sub8, f.sub9, f.sub10];
  all.length = n;
  return all;
}

/**
 * `GET /go/:slug` — the hot path (docs/routing.md, docs/clicks.md). On a cache hit nothing is
 * awaited: describe the click, decide, count in memory, append to the click log's buffer,
 * redirect. Only a cold or expired slug goes to the database; the click log is written by its own
 * timer (or its `clicks.flush` task), never here.
 *
 * A cache hit, and a 404 decided from the cache (a slug known to have no flow included), is
 * answered by the server's front door (src/http/fast-path.ts) straight from Node's request,
 * without fastify's request lifecycle; everything else (a miss, `HEAD`, odd URLs) by the fastify
 * route below. Both go through {@link click}, where all the per-click work is, so
 * the two paths cannot answer differently.
 */
export function registerGoRoute(
  app: FastifyInstance,
  routing: GoRouting,
  clicks: GoClicks,
  clock: Clock,
  random: () => number = Math.random,
): void {
  const { describer, log } = clicks;
  const { cache, ledger } = routing;
  const counters = ledger.counters;

  const record = (
    flow: CompiledFlow,
    streamId: string | null,
    outcome: ClickOutcome,
    f: ClickFacts,
    country: string | undefined,
    at: number,
    cost: number,
  ) => {
    const entry: NewClick = {
      click_id: f.click_id,
      flow_id: flow.id,
      stream_id: streamId,
      at,
      outcome,
      country: country ?? null,
      device_type: f.device_type,
      // The click log's columns are NOT NULL: a user agent that names no OS or browser is ''.
      os: f.os ?? '',
      browser: f.browser ?? '',
      language: f.language,
      referrer_host: f.referrer_host,
      subs: subsOf(f),
      is_unique: f.is_unique,
      is_bot: f.is_bot,
      cost,
      ip_prefix: f.ip_prefix,
    };
    log.append(entry);
  };

  const fallbackUrl = clicks.fallbackUrl;
  /** No stream for this click: the fallback URL when one is configured, else the 404. */
  const unrouted = (clickId: string): FastAnswer | ApiError =>
    fallbackUrl === undefined
      ? noStream(clickId)
      : { status: 302, headers: { location: fallbackUrl, 'x-click-id': clickId } };
  /**
   * A slug no active flow has (`slug` undefined: not a slug at all): noted, then the 404 or the
   * fallback. A person's request is a no-match of this node (docs/routing.md); a bot's (a scanner's `/go/wp-login`)
   * is counted apart and not named, so it does not push a buyer's typo out of the slugs kept.
   */
  const unknownSlug = (
    slug: string | undefined,
    paused: boolean,
    req: IncomingMessage,
  ): FastAnswer | ApiError => {
    const bot = describer.userAgents.classify(req.method!, req.headers['user-agent']).is_bot;
    ledger.slugMisses.note(bot ? undefined : slug, paused, clock.now(), bot);
    if (!bot) counters.noMatchWithoutFlow();
    return fallbackUrl === undefined ? NO_FLOW : { status: 302, headers: { location: fallbackUrl } };
  };

  /**
   * One click on a flow: described once, the routing decision, the redirect, the counters and the
   * click log. Everything done per click belongs here (and only here). The answer is built before
   * anything is counted, so a click that fails is not a hit. Returns the contract error rather than
   * throwing it: the fast path hands it to fastify's error path. Bots follow the flow's
   * `bot_action` (docs/routing.md#bots) and are counted apart.
   */
  const click = (
    slug: string,
    flow: CompiledFlow | null,
    trace: RequestTrace,
    req: IncomingMessage,
  ): FastAnswer | ApiError => {
    if (flow === null || !flow.active) return unknownSlug(slug, flow !== null, req);
    // The query string read here from the raw URL on both paths, by one parser.
    const url = req.url!;
    const q = url.indexOf('?');
    const rawQuery = q === -1 ? '' : url.slice(q + 1);
    const query: QueryLike = rawQuery.length === 0 ? NO_QUERY : parseQuery(rawQuery);
    const facts = describer.describe(flow.id, req.method!, req.headers, trace.client, query);
    const country = trace.country;
    const now = clock.now();
    const bot = facts.is_bot;
    if (bot && flow.botAction === 'block') {
      counters.bot(flow.id, now);
      record(flow, null, 'bot', facts, country, now, 0);
      return noStream(facts.click_id);
    }
    const visitor: Visitor = { country, facts, client: trace.client, query, at: now };
    const stream = decide(flow, visitor, random, bot && flow.botAction === 'stream');
    if (stream === undefined) {
      if (bot) counters.bot(flow.id, now);
      else counters.noMatch(flow.id, now);
      record(flow, null, bot ? 'bot' : 'no_match', facts, country, now, bot ? 0 : flow.cost);
      // A bot with nowhere to go on a `stream` flow is not sent to the fallback either (docs/routing.md#bots).
      return bot && flow.botAction === 'stream' ? noStream(facts.click_id) : unrouted(facts.click_id);
    }
    let location =
      stream.marks.length === 0
        ? stream.target
        : buildTarget(stream, { country, flow: flow.slug, request_id: trace.id, click: facts, query });
    if (flow.forwardQuery) location = withForwardedQuery(location, rawQuery);
    if (bot) counters.bot(flow.id, now);
    else {
      counters.hit(flow.id, stream.id, now, facts.is_unique);
      stream.cap?.count(now);
    }
    record(flow, stream.id, bot ? 'bot' : 'redirect', facts, country, now, bot ? 0 : flow.cost);
    if (stream.mode === 'http')
      return { status: stream.redirectCode, headers: { location, 'x-click-id': facts.click_id } };
    return {
      status: 200,
      headers: { ...PAGE_HEADERS, 'x-click-id': facts.click_id },
      body: redirectPage(stream.mode, location),
    };
  };

  app.get<{ Params: { slug: string } }>('/go/:slug', (request, reply) => {
    const slug = request.params.slug;
    if (!SLUG.test(slug)) {
      const answer = unknownSlug(undefined, false, request.raw);
      if (answer instanceof ApiError) throw answer;
      return reply.code(answer.status).headers(answer.headers).send();
    }
    const trace: RequestTrace = { id: request.id, country: request.country, client: request.clientAddress };
    const send = (flow: CompiledFlow | null) => {
      const answer = click(slug, flow, trace, request.raw);
      if (answer instanceof ApiError) throw answer;
      reply.code(answer.status).headers(answer.headers).send(answer.body);
    };
    const cached = cache.peek(slug);
    if (cached !== undefined) return send(cached);
    return cache.load(slug).then(send);
  });

  addFastRoute(app, {
    prefix: '/go/',
    path: '/go/:slug',
    answer: (slug, trace, req) => {
      if (!SLUG.test(slug)) return undefined;
      const cached = cache.peek(slug);
      if (cached === undefined) return undefined; // a miss: the route loads it
      // A 404 decided from the cache (unknown slug, paused flow, no stream) is answered here too:
      // an unknown slug costs no more than a cached click.
      return click(slug, cached, trace, req);
    },
  });
}
