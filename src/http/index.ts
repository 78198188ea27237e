export { type DrainResult, drainServer } from './drain.ts';
export { sendApiError, toApiError } from './error-reply.ts';
export type { FastAnswer, FastRoute, RequestTrace } from './fast-path.ts';
export { GeoCountry, loadGeoCountry } from './geo-country.ts';
export { registerHealth } from './health.ts';
export { type MetricsRouteOptions, registerMetricsRoute } from './metrics-route.ts';
export {
  CountryResolver,
  isCountryCode,
  newRequestId,
  normalizeCountry,
  requestIdFrom,
} from './request-context.ts';
export { addFastRoute, createServer, type ServerDeps } from './server.ts';
