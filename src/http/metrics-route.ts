import type { FastifyInstance } from 'fastify';
import { type AuthLimiter, digestEquals, parseBearer, sha256 } from '../auth/index.ts';
import { ApiError } from '../errors/index.ts';
import { negotiateFormat, type Telemetry } from '../telemetry/index.ts';

export interface MetricsRouteOptions {
  /** Hex SHA-256 of the scrape token; when set, `Authorization: Bearer <token>` is required. */
  tokenSha256: string | undefined;
  /** Failed scrape tokens count against the address like failed ACP tokens. */
  limiter?: AuthLimiter;
}

/**
 * `GET /metrics`: the exposition (docs/telemetry.md#exposition-get-metrics), text 0.0.4 or
 * OpenMetrics by `Accept`. Only registered when `observability.metrics.prometheus_enabled` is true,
 * so otherwise it is a plain 404.
 */
export function registerMetricsRoute(
  app: FastifyInstance,
  telemetry: Telemetry,
  opts: MetricsRouteOptions,
): void {
  const expected = opts.tokenSha256?.toLowerCase();
  app.get('/metrics', async (request, reply) => {
    if (expected) {
      const authenticate = () => {
        const token = parseBearer(request.headers.authorization);
        if (token === undefined || !digestEquals(sha256(token), expected)) {
          throw new ApiError('auth.unauthorized', 'A valid metrics token is required.');
        }
      };
      await (opts.limiter
        ? opts.limiter.guard(request.ip, authenticate, request.headers.authorization)
        : authenticate());
    }
    const { body, contentType } = await telemetry.exposition(negotiateFormat(request.headers.accept));
    return reply.type(contentType).send(body);
  });
}
