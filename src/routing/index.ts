export { ClickCounters } from './click-counters.ts';
export {
  buildTarget,
  type CompiledFlow,
  compileFlow,
  decide,
  type MacroValues,
  type RoutableStream,
  withForwardedQuery,
} from './compiled-flow.ts';
export { seedDemo } from './demo.ts';
export { registerGoRoute } from './go-route.ts';
export { type CacheSection, RoutingCache } from './routing-cache.ts';
export * from './schemas.ts';
export { type RoutingOptions, RoutingService } from './service.ts';
export {
  isCountryCode,
  MACROS,
  normaliseTargetUrl,
  PARAM_MACRO,
  SLUG_PATTERN,
  targetUrlField,
  targetWithoutClick,
} from './validation.ts';
