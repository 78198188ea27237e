import type { LeaderElection } from '../cluster/index.ts';
import type { Storage } from '../storage/index.ts';
import type { AcpRouter } from './acp-router.ts';

/** A node renewing every interval that missed this many in a row is not alive (contract §17). */
const ALIVE_RENEWALS = 3;

/** `POST /acp/cluster/nodes` (any operator): the node registry and who leads, with which epoch. */
export function registerClusterRoutes(
  acp: AcpRouter,
  deps: {
    storage: Storage;
    election: LeaderElection;
    serverId: string;
    cluster: { renew_interval_ms: number; forget_after_ms: number };
  },
): void {
  acp.add({
    path: '/acp/cluster/nodes',
    role: 'viewer',
    handler: async () => {
      // Who leads comes from the lease itself, read now: at most one node holds it, and a node
      // that stopped or crashed stops being the leader the moment the lease moves or lapses.
      const [leader, nodes] = await Promise.all([
        deps.election.currentLeader(),
        deps.storage.cluster.nodes({
          aliveWithinMs: ALIVE_RENEWALS * deps.cluster.renew_interval_ms,
          forgetAfterMs: deps.cluster.forget_after_ms,
        }),
      ]);
      const items = nodes.map((n) => ({
        server_id: n.server_id,
        is_leader: n.server_id === leader,
        alive: n.alive,
        last_seen: n.last_seen,
        started_at: n.started_at,
        version: n.version,
        commit: n.commit,
      }));
      return {
        items,
        total: items.length,
        leader_election: deps.election.kind,
        leader_id: leader ?? null,
        this_node: {
          server_id: deps.serverId,
          is_leader: deps.election.isLeader(),
          epoch: deps.election.epoch(),
        },
      };
    },
  });
}
