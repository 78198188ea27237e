import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors/index.ts';
import { addFastRoute, type FastAnswer, type RequestTrace } from '../http/index.ts';
import type { Clock } from '../time/index.ts';
import { buildTarget, type CompiledFlow, decide } from './compiled-flow.ts';
import type { RoutingService } from './service.ts';
import { SLUG } from './validation.ts';

/** Not `resource.not_found` objects built per click: the messages are fixed, so are the errors' shapes. */
const noFlow = () => new ApiError('resource.not_found', 'No active traffic flow with that slug.');
const noStream = () => new ApiError('resource.not_found', 'No stream of this flow matches the request.');

/**
 * A click the fast path looked at but leaves to fastify to answer (a 404, after it was counted):
 * kept on the request so that the route answers it without looking at the cache or deciding again.
 */
const kOutcome = Symbol('sluice.click');
type Looked = IncomingMessage & { [kOutcome]?: ApiError };

/**
 * `GET /go/:slug` — the hot path (§8). On a cache hit nothing is awaited: decide, count in memory,
 * redirect. Only a cold or expired slug goes to the database.
 *
 * A cache hit is answered by the server's front door (src/http/fast-path.ts) straight from Node's
 * request, without fastify's request lifecycle; everything else (a miss, a 404, `HEAD`, odd URLs)
 * by the fastify route below. Both go through {@link click}, where all the per-click work is, so
 * the two paths cannot answer differently.
 */
export function registerGoRoute(
  app: FastifyInstance,
  routing: RoutingService,
  clock: Clock,
  random: () => number = Math.random,
): void {
  /**
   * One click on a flow: the routing decision, the redirect, the counters. Everything done per
   * click belongs here (and only here). The answer is built before anything is counted, so a click
   * that fails is not a hit. Returns the contract error rather than throwing it: the fast path
   * hands it to fastify's error path.
   */
  const click = (flow: CompiledFlow | null, trace: RequestTrace): FastAnswer | ApiError => {
    if (flow === null || !flow.active) return noFlow();
    const country = trace.country;
    const stream = decide(flow, country, random);
    if (stream === undefined) {
      routing.counters.noMatch(flow.id, clock.now());
      return noStream();
    }
    const location = buildTarget(stream, {
      country,
      flow: flow.slug,
      stream: stream.id,
      request_id: trace.id,
    });
    routing.counters.hit(flow.id, stream.id, clock.now());
    return { status: stream.redirectCode, headers: { location } };
  };

  app.get<{ Params: { slug: string } }>('/go/:slug', (request, reply) => {
    const looked = (request.raw as Looked)[kOutcome];
    if (looked !== undefined) throw looked;
    const slug = request.params.slug;
    if (!SLUG.test(slug)) throw noFlow();
    const trace = { id: request.id, country: request.country };
    const send = (flow: CompiledFlow | null) => {
      const answer = click(flow, trace);
      if (answer instanceof ApiError) throw answer;
      reply.code(answer.status).headers(answer.headers).send();
    };
    const cached = routing.cache.peek(slug);
    if (cached !== undefined) return send(cached);
    return routing.cache.load(slug).then(send);
  });

  addFastRoute(app, {
    prefix: '/go/',
    path: '/go/:slug',
    answer: (slug, trace, req) => {
      if (!SLUG.test(slug)) return undefined;
      const cached = routing.cache.peek(slug);
      if (cached === undefined) return undefined; // a miss: the route loads it
      const answer = click(cached, trace);
      if (answer instanceof ApiError) {
        (req as Looked)[kOutcome] = answer;
        return undefined;
      }
      return answer;
    },
  });
}
