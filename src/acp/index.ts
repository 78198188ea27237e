export { type AcpCall, type AcpRouteDef, AcpRouter, EmptyBody } from './acp-router.ts';
export { registerAuditRoutes } from './audit-routes.ts';
export {
  ClickGetBody,
  ClickListBody,
  type ClickRoutesDeps,
  type ClickView,
  ConversionListBody,
  registerClickRoutes,
} from './clicks-routes.ts';
export { registerClusterRoutes } from './cluster-routes.ts';
export { type ConsoleRoutesDeps, ProceduresBody, registerConsoleRoutes } from './console-routes.ts';
export { registerCronRoutes, TaskListBody, TaskRunBody } from './cron-routes.ts';
export { RecentFailuresBody, registerHttpClientRoutes } from './http-client-routes.ts';
export { registerOperatorRoutes } from './operator-routes.ts';
export { registerPostbackRoutes } from './postback-routes.ts';
export { registerReportRoutes } from './reports-routes.ts';
export { type RoutingRoutesDeps, registerRoutingRoutes } from './routing-routes.ts';
export { registerSystemRoutes, type SystemDeps } from './system-routes.ts';
