export { type DrainResult, drainServer } from './drain.ts';
export { sendApiError, toApiError } from './error-reply.ts';
export { registerHealth } from './health.ts';
export { type MetricsRouteOptions, registerMetricsRoute } from './metrics-route.ts';
export { CountryResolver, normalizeCountry, requestIdFrom } from './request-context.ts';
export { createServer, type ServerDeps } from './server.ts';
