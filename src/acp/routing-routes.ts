import type { RoutingService, SimulateInput, Simulation } from '../routing/index.ts';
import {
  FlowCreateBody,
  FlowListBody,
  FlowUpdateBody,
  IdBody,
  SimulateBody,
  StreamCreateBody,
  StreamListBody,
  StreamUpdateBody,
} from '../routing/index.ts';
import type { Telemetry } from '../telemetry/index.ts';
import type { AcpRouter } from './acp-router.ts';

export interface RoutingRoutesDeps {
  routing: RoutingService;
  telemetry: Telemetry;
  commit: string;
  /**
   * The routing simulator (docs/routing.md#simulator): `/go/:slug`'s decision for a described
   * click, explained.
   */
  simulate: (input: SimulateInput) => Promise<Simulation>;
}

/**
 * Flows and streams in the ACP (docs/routing.md#acp): lists for any operator, with `runtime` (the
 * list route's own recorder entry, the same object system metrics shows under `controllers`) and
 * `commit`; create, update and delete for admins, each audited (`flow.create`, `stream.delete`, …).
 */
export function registerRoutingRoutes(acp: AcpRouter, deps: RoutingRoutesDeps): void {
  const { routing, telemetry, commit, simulate } = deps;
  // The target of a create is what was created; of an update or delete, the id the caller named.
  const created = ({ result }: { result: unknown }) => (result as { id: string }).id;
  const named = ({ body }: { body: { id: string } }) => body.id;
  const listed = <T>(path: string, page: T) => ({
    ...page,
    runtime: telemetry.controllers.get(path).entry(),
    commit,
  });

  acp.add({
    path: '/acp/routing/simulate',
    role: 'viewer',
    body: SimulateBody,
    handler: ({ body }) => simulate(body),
  });
  acp.add({
    path: '/acp/traffic-flows/list',
    role: 'viewer',
    body: FlowListBody,
    handler: async ({ body }) => listed('/acp/traffic-flows/list', await routing.listFlows(body)),
  });
  acp.add({
    path: '/acp/traffic-flows/create',
    role: 'admin',
    audit: { action: 'flow.create', target: created },
    body: FlowCreateBody,
    handler: ({ body }) => routing.createFlow(body),
  });
  acp.add({
    path: '/acp/traffic-flows/update',
    role: 'admin',
    audit: { action: 'flow.update', target: named },
    body: FlowUpdateBody,
    handler: ({ body }) => routing.updateFlow(body),
  });
  acp.add({
    path: '/acp/traffic-flows/delete',
    role: 'admin',
    audit: { action: 'flow.delete', target: named },
    body: IdBody,
    handler: ({ body }) => routing.deleteFlow(body.id),
  });

  acp.add({
    path: '/acp/streams/list',
    role: 'viewer',
    body: StreamListBody,
    handler: async ({ body }) => listed('/acp/streams/list', await routing.listStreams(body)),
  });
  acp.add({
    path: '/acp/streams/create',
    role: 'admin',
    audit: { action: 'stream.create', target: created },
    body: StreamCreateBody,
    handler: ({ body }) => routing.createStream(body),
  });
  acp.add({
    path: '/acp/streams/update',
    role: 'admin',
    audit: { action: 'stream.update', target: named },
    body: StreamUpdateBody,
    handler: ({ body }) => routing.updateStream(body),
  });
  acp.add({
    path: '/acp/streams/delete',
    role: 'admin',
    audit: { action: 'stream.delete', target: named },
    body: IdBody,
    handler: ({ body }) => routing.deleteStream(body.id),
  });
}
