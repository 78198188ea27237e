export { ClickCounters, type Counts } from './click-counters.ts';
export { buildTarget, compileFlow, decide, type MacroValues } from './compiled-flow.ts';
export { seedDemo } from './demo.ts';
export { registerGoRoute } from './go-route.ts';
export { RoutingLedger } from './ledger.ts';
export { FLOW_LIMITS } from './limits.ts';
export { RoutingCache } from './routing-cache.ts';
export {
  acceptsBots,
  compileRules,
  hourMask,
  localTime,
  ruleProblems,
  rulesPass,
  type Visitor,
} from './rules.ts';
export {
  FlowCreateBody,
  FlowListBody,
  FlowUpdateBody,
  IdBody,
  PAGE_LIMIT_DEFAULT,
  PageCursor,
  PageLimit,
  StreamCreateBody,
  StreamListBody,
  StreamUpdateBody,
} from './schemas.ts';
export { RoutingService } from './service.ts';
export { SimulateBody, type SimulateInput, type Simulation, simulate } from './simulate.ts';
export { normaliseTargetUrl, targetUrlField, targetWithoutClick } from './validation.ts';
