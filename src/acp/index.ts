export { type AcpCall, type AcpRouteDef, AcpRouter, EmptyBody } from './acp-router.ts';
export { registerSystemRoutes, type SystemDeps } from './system-routes.ts';
