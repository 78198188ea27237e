export { ClickCounters, type Counts } from './click-counters.ts';
export {
  buildTarget,
  type CompiledFlow,
  compileFlow,
  decide,
  type MacroValues,
  type Refusal,
  type RoutableStream,
  refusal,
  withForwardedQuery,
} from './compiled-flow.ts';
export { seedDemo } from './demo.ts';
export { redirectPage, registerGoRoute } from './go-route.ts';
export { FLOW_LIMITS } from './limits.ts';
export { type CacheSection, RoutingCache } from './routing-cache.ts';
export {
  acceptsBots,
  compileRules,
  hourMask,
  localTime,
  RULE_FIELDS,
  ruleProblems,
  rulesPass,
  type Visitor,
} from './rules.ts';
export * from './schemas.ts';
export { type RoutingOptions, RoutingService } from './service.ts';
export {
  SimulateBody,
  type SimulateInput,
  type Simulation,
  type SimulatorDeps,
  simulate,
} from './simulate.ts';
export {
  MACROS,
  normaliseTargetUrl,
  PARAM_MACRO,
  SLUG_PATTERN,
  targetUrlField,
  targetWithoutClick,
} from './validation.ts';
