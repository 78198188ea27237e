import type { Config } from '../config/index.ts';
import type { ClusterStore } from '../storage/index.ts';
import type { Logger } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import { type LeaderElection, LocalElection } from './election.ts';
import { NodeHeartbeat, type NodeIdentity } from './node-heartbeat.ts';
import { PostgresElection } from './postgres-election.ts';

/**
 * This node's election and its entry in the node registry, as `cluster` asks: a lease in
 * PostgreSQL (`leader_election: postgres`), or the single node's own leadership; either beats the
 * registry entry at each renewal (README.md, "Several nodes").
 */
export function electionFromConfig(
  config: Config,
  deps: { store: ClusterStore; node: NodeIdentity; clock: Clock; logger: Logger },
): { election: LeaderElection; heartbeat: NodeHeartbeat } {
  const c = config.cluster;
  const { store, node, clock, logger } = deps;
  const heartbeat = new NodeHeartbeat({ store, node, logger, forgetAfterMs: c.forget_after_ms });
  const election: LeaderElection =
    c.leader_election === 'postgres'
      ? new PostgresElection({
          store,
          serverId: node.server_id,
          clock,
          logger,
          leaseTtlMs: c.lease_ttl_ms,
          renewIntervalMs: c.renew_interval_ms,
          heartbeat,
        })
      : new LocalElection(node.server_id, { heartbeat, renewIntervalMs: c.renew_interval_ms });
  return { election, heartbeat };
}
