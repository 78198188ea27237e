import type { LeaderElection } from '../cluster/index.ts';
import type { Storage } from '../storage/index.ts';
import type { AcpRouter } from './acp-router.ts';

/** `POST /acp/cluster/nodes` (any operator): the node registry and who leads, with which epoch. */
export function registerClusterRoutes(
  acp: AcpRouter,
  deps: { storage: Storage; election: LeaderElection; serverId: string },
): void {
  acp.add({
    path: '/acp/cluster/nodes',
    role: 'viewer',
    handler: async () => {
      const items = await deps.storage.cluster.nodes();
      return {
        items,
        total: items.length,
        leader_election: deps.election.kind,
        leader_id: deps.election.leaderId() ?? null,
        this_node: {
          server_id: deps.serverId,
          is_leader: deps.election.isLeader(),
          epoch: deps.election.epoch(),
        },
      };
    },
  });
}
