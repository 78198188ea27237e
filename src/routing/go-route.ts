import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import { buildTarget, type CompiledFlow, decide } from './compiled-flow.ts';
import type { RoutingService } from './service.ts';
import { SLUG } from './validation.ts';

/** Not `resource.not_found` objects built per click: the messages are fixed, so are the errors' shapes. */
const noFlow = () => new ApiError('resource.not_found', 'No active traffic flow with that slug.');
const noStream = () => new ApiError('resource.not_found', 'No stream of this flow matches the request.');

/**
 * `GET /go/:slug` — the hot path (§8). On a cache hit nothing is awaited: decide, count in memory,
 * redirect. Only a cold or expired slug goes to the database.
 */
export function registerGoRoute(
  app: FastifyInstance,
  routing: RoutingService,
  clock: Clock,
  random: () => number = Math.random,
): void {
  const serve = (flow: CompiledFlow | null, request: FastifyRequest, reply: FastifyReply) => {
    if (flow === null || !flow.active) throw noFlow();
    const country = request.country;
    const stream = decide(flow, country, random);
    if (stream === undefined) {
      routing.counters.noMatch(flow.id, clock.now());
      throw noStream();
    }
    // The answer is built before the hit is counted: a click that fails is not a hit.
    const location = buildTarget(stream, {
      country,
      flow: flow.slug,
      stream: stream.id,
      request_id: request.id,
    });
    routing.counters.hit(flow.id, stream.id, clock.now());
    reply.code(stream.redirectCode).header('location', location).send();
  };

  app.get<{ Params: { slug: string } }>('/go/:slug', (request, reply) => {
    const slug = request.params.slug;
    if (!SLUG.test(slug)) throw noFlow();
    const cached = routing.cache.peek(slug);
    if (cached !== undefined) return serve(cached, request, reply);
    return routing.cache.load(slug).then((flow) => serve(flow, request, reply));
  });
}
