import { Type } from '@sinclair/typebox';
import { roleAllows } from '../auth/index.ts';
import type { LeaderElection } from '../cluster/index.ts';
import type { Scheduler } from '../cron/index.ts';
import type { HttpClient } from '../http-client/index.ts';
import { evaluate } from '../procedures/index.ts';
import type { Telemetry } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import type { AcpRouter } from './acp-router.ts';

export const ProceduresBody = Type.Object(
  {
    task_p95_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
    client_error_rate: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

export interface ConsoleRoutesDeps {
  telemetry: Telemetry;
  scheduler: Scheduler;
  httpClient: HttpClient;
  election: LeaderElection;
  clock: Clock;
  commit: string;
  version: string | undefined;
  /** `acp.task_p95_ms`: procedure 3's level when the body names none. */
  taskP95Ms: number;
  /** `acp.client_error_rate`: procedure 5's client-error rate when the body names none. */
  clientErrorRate: number;
}

/**
 * What the web console needs besides the contract endpoints (extensions, any operator):
 * `/acp/auth/whoami` — who the token is and what it may do, so the console hides what the API
 * would refuse; `/acp/system/procedures` — the seven operator procedures judged on this node by
 * the same code as `sluice doctor`.
 */
export function registerConsoleRoutes(acp: AcpRouter, deps: ConsoleRoutesDeps): void {
  const { telemetry, scheduler, httpClient, election, clock } = deps;
  acp.add({
    path: '/acp/auth/whoami',
    role: 'viewer',
    handler: ({ principal }) => ({
      name: principal.name,
      role: principal.role,
      server_id: telemetry.serverId,
      commit: deps.commit,
      version: deps.version ?? null,
      task_p95_ms: deps.taskP95Ms,
      client_error_rate: deps.clientErrorRate,
    }),
  });
  acp.add({
    path: '/acp/system/procedures',
    role: 'viewer',
    body: ProceduresBody,
    handler: ({ body, principal }) => {
      const taskP95Ms = body.task_p95_ms ?? deps.taskP95Ms;
      const clientErrorRate = body.client_error_rate ?? deps.clientErrorRate;
      const report = evaluate(
        {
          url: '',
          metrics: telemetry.systemMetrics(),
          tasks: scheduler.list(),
          commits: { flows: deps.commit, streams: deps.commit },
          // As `/acp/cluster/nodes` says it (doctor reads that): no known leader is null.
          leaderId: election.leaderId() ?? null,
          // The HTTP calls of a failing task are shown to those who may read them (operator role).
          failures: roleAllows(principal.role, 'operator') ? httpClient.failures.list({ limit: 500 }) : null,
          problems: [],
          now: clock.now(),
        },
        { taskP95Ms, clientErrorRate },
      );
      const { url: _url, ...rest } = report;
      return { ...rest, task_p95_ms: taskP95Ms, client_error_rate: clientErrorRate };
    },
  });
}
