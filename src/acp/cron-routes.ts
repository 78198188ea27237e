import { Type } from '@sinclair/typebox';
import { Text } from '../config/index.ts';
import type { Scheduler, TaskItem } from '../cron/index.ts';
import type { AcpRouter } from './acp-router.ts';

export const TaskListBody = Type.Object(
  {
    filter: Type.Optional(
      Type.Object(
        {
          running: Type.Optional(Type.Boolean()),
          /** Tasks whose last run failed (true) or did not (false). */
          failing: Type.Optional(Type.Boolean()),
          /** Substring of the task name. */
          name: Type.Optional(Text({ minLength: 1, maxLength: 64 })),
        },
        { additionalProperties: false },
      ),
    ),
    sort: Type.Optional(
      Type.Object(
        {
          by: Type.Union(['name', 'runs', 'failures', 'p95'].map((k) => Type.Literal(k))),
          order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TaskRunBody = Type.Object(
  { name: Text({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: false },
);

const SORT_KEY: Record<string, (t: TaskItem) => string | number> = {
  name: (t) => t.name,
  runs: (t) => t.runtime.runs,
  failures: (t) => t.runtime.failures,
  p95: (t) => t.runtime.p95,
};

/**
 * `/acp/cron-tasks/list` (any operator; filtered and sorted by the server) and `/run` (operator
 * role, audited as `task.run`).
 */
export function registerCronRoutes(acp: AcpRouter, scheduler: Scheduler): void {
  acp.add({
    path: '/acp/cron-tasks/list',
    role: 'viewer',
    body: TaskListBody,
    handler: ({ body }) => {
      const f = body.filter ?? {};
      const items = scheduler
        .list()
        .filter((t) => f.running === undefined || t.runtime.running === f.running)
        .filter((t) => f.failing === undefined || (t.runtime.last_error !== null) === f.failing)
        .filter((t) => f.name === undefined || t.name.includes(f.name));
      const key = SORT_KEY[body.sort?.by ?? 'name']!;
      const dir = body.sort?.order === 'desc' ? -1 : 1;
      items.sort((a, b) => {
        const x = key(a);
        const y = key(b);
        return (x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : 1) * dir;
      });
      return { items, total: items.length };
    },
  });
  acp.add({
    path: '/acp/cron-tasks/run',
    role: 'operator',
    body: TaskRunBody,
    // What is audited is the request to run, once the run has started; how the run ends is the journal's.
    audit: { action: 'task.run', target: ({ body }) => body.name },
    handler: ({ body, reply }) => {
      const { run_id } = scheduler.runNow(body.name);
      reply.code(202);
      return { name: body.name, run_id, started: true };
    },
  });
}
