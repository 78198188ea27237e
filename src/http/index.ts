export { isCountryCode, normalizeCountry } from './country-code.ts';
export { drainServer } from './drain.ts';
export { toApiError } from './error-reply.ts';
export type { FastAnswer, RequestTrace } from './fast-path.ts';
export { GeoCountry, loadGeoCountry } from './geo-country.ts';
export { registerHealth } from './health.ts';
export { registerMetricsRoute } from './metrics-route.ts';
export { newRequestId, requestIdFrom } from './request-context.ts';
export { addFastRoute, createServer } from './server.ts';
