import type { LeaderElection } from '../cluster/index.ts';
import type { HttpClient } from '../http-client/index.ts';
import type { Storage } from '../storage/index.ts';
import type { Telemetry } from '../telemetry/index.ts';
import type { AcpRouter } from './acp-router.ts';

/** How long a node waits for a peer's system metrics before showing it as unreachable. */
const PEER_TIMEOUT_MS = 2000;

/**
 * A node renewing every interval that missed this many in a row is not alive
 * (docs/cron.md#leader-election).
 */
const ALIVE_RENEWALS = 3;

/**
 * A node's address as the cluster views show it: without `user:password@`. This version refuses
 * them in `cluster.advertise_url`, but a registry row an older node wrote keeps its own until the
 * node is forgotten (`cluster.forget_after_ms`), and every viewer reads it (an upgrade test).
 */
function shownUrl(url: string | null): string | null {
  if (url === null || !URL.canParse(url)) return url;
  const u = new URL(url);
  if (u.username === '' && u.password === '') return url;
  u.username = '';
  u.password = '';
  return u.href;
}

/** `POST /acp/cluster/nodes` (any operator): the node registry and who leads, with which epoch. */
export function registerClusterRoutes(
  acp: AcpRouter,
  deps: {
    storage: Storage;
    election: LeaderElection;
    serverId: string;
    cluster: { renew_interval_ms: number; forget_after_ms: number };
    telemetry: Telemetry;
    httpClient: HttpClient;
  },
): void {
  const registry = () =>
    deps.storage.cluster.nodes({
      aliveWithinMs: ALIVE_RENEWALS * deps.cluster.renew_interval_ms,
      forgetAfterMs: deps.cluster.forget_after_ms,
    });
  acp.add({
    path: '/acp/cluster/nodes',
    role: 'viewer',
    handler: async () => {
      // Who leads comes from the lease itself, read now: at most one node holds it, and a node
      // that stopped or crashed stops being the leader the moment the lease moves or lapses.
      const [leader, nodes] = await Promise.all([deps.election.currentLeader(), registry()]);
      const items = nodes.map((n) => ({
        server_id: n.server_id,
        is_leader: n.server_id === leader,
        alive: n.alive,
        last_seen: n.last_seen,
        started_at: n.started_at,
        version: n.version,
        commit: n.commit,
        url: shownUrl(n.url),
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

  /**
   * `POST /acp/cluster/metrics` (viewer, an extension): every alive node's system metrics, fetched
   * from its peers by this node with the caller's own token (stored operators are shared by the
   * nodes of one database), so the whole cluster shows from any node. A peer that does not answer
   * within 2 s, or refuses, is listed with its error; this node's own figures come from memory.
   */
  acp.add({
    path: '/acp/cluster/metrics',
    role: 'viewer',
    handler: async ({ request }) => {
      const nodes = (await registry()).filter((n) => n.alive || n.server_id === deps.serverId);
      const auth = request.headers.authorization ?? '';
      const items = await Promise.all(
        nodes.map(async (n) => {
          const base = { server_id: n.server_id, url: shownUrl(n.url) };
          if (n.server_id === deps.serverId)
            return { ...base, metrics: deps.telemetry.systemMetrics(), error: null };
          if (n.url === null) return { ...base, metrics: null, error: 'the node advertises no address' };
          try {
            const r = await deps.httpClient.request({
              url: `${n.url.replace(/\/$/, '')}/acp/system/metrics`,
              method: 'POST',
              headers: { authorization: auth, 'content-type': 'application/json' },
              body: '{}',
              client: 'cluster:peer-metrics',
              timeoutMs: PEER_TIMEOUT_MS,
              totalTimeoutMs: PEER_TIMEOUT_MS,
              retries: 0,
              secretHeaders: ['authorization'],
              maxBodyBytes: 4 * 1024 * 1024,
            });
            if (r.status !== 200) return { ...base, metrics: null, error: `HTTP ${r.status}` };
            return { ...base, metrics: JSON.parse(r.body) as unknown, error: null };
          } catch (err) {
            return { ...base, metrics: null, error: (err as Error).message };
          }
        }),
      );
      return { items, total: items.length };
    },
  });
}
