import type { Config, Redactor } from '../config/index.ts';
import type { Telemetry } from '../telemetry/index.ts';
import type { AcpRouter } from './acp-router.ts';

export interface SystemDeps {
  config: Config;
  mode: string;
  telemetry: Telemetry;
  /** The node's one redaction rule, the same the HTTP client and the task errors use. */
  redactor: Redactor;
}

/** `POST /acp/system/metrics` and `POST /acp/system/config`: any operator. */
export function registerSystemRoutes(acp: AcpRouter, deps: SystemDeps): void {
  const { config, mode, telemetry, redactor } = deps;
  acp.add({ path: '/acp/system/metrics', role: 'viewer', handler: () => telemetry.systemMetrics() });
  acp.add({
    path: '/acp/system/config',
    role: 'viewer',
    handler: () => {
      const isLeader = telemetry.isLeader();
      const effective = redactor.config(config);
      // The runtime keys are shown both in place in the tree and flat, as the seed names them.
      const server = effective.app.server as typeof effective.app.server & { is_leader: boolean };
      server.id = telemetry.serverId;
      server.is_leader = isLeader;
      return {
        ...effective,
        mode,
        runtime: {
          'app.server.id': telemetry.serverId,
          'app.server.is_leader': isLeader,
          'cluster.leader_id': telemetry.leaderId() ?? null,
        },
      };
    },
  });
}
