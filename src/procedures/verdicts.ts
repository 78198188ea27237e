/**
 * The seven operator procedures (docs/console.md) as pure verdicts over what a node's ACP
 * returns. `sluice doctor` gathers that data over HTTP, the console's `/acp/system/procedures`
 * gathers it in-process; both judge it here, so the terminal and the browser never disagree.
 */

import type { TaskItem } from '../cron/index.ts';
import type { FailedCall } from '../http-client/index.ts';
import {
  type ClicksSection,
  type FlowsSection,
  type Partially,
  type PostbacksSection,
  type RecentEntry,
  type RecorderEntry,
  type SystemMetrics,
  UNMATCHED_ROUTE,
} from '../telemetry/index.ts';

/**
 * A task item as `/acp/cron-tasks/list` returns it (only the fields the procedures read).
 * `timeout_ms` is optional: an older node does not send it.
 */
export type TaskView = Pick<TaskItem, 'name' | 'kind' | 'execution_scope' | 'enabled' | 'next_run_at'> &
  Partial<Pick<TaskItem, 'timeout_ms'>> & {
    /** `p95_last_hour` is optional: an older node does not send it (its `p95` is judged instead). */
    runtime: Pick<
      TaskItem['runtime'],
      | 'running'
      | 'running_since'
      | 'runs'
      | 'failures'
      | 'p95'
      | 'last_error'
      | 'failures_last_hour'
      | 'failures_prev_hour'
    > &
      Partial<Pick<TaskItem['runtime'], 'p95_last_hour'>>;
  };

/** A failed outgoing call as `/acp/http-client/recent-failures` returns it (fields read here). */
export type FailedCallView = Pick<FailedCall, 'at' | 'task' | 'method' | 'url' | 'status' | 'error'>;

/** Everything the procedures judge, for one node at one moment. */
export interface NodeSnapshot {
  url: string;
  /** The system metrics object (docs/telemetry.md#system-metrics) as the node answered it, or undefined when it could not be read. */
  metrics: Partially<SystemMetrics> | undefined;
  tasks: readonly TaskView[];
  /** `commit` of the two list responses; null when that list could not be read. */
  commits: { flows: string | null; streams: string | null };
  /** The cluster's leader as this node sees it; undefined when unknown. */
  leaderId?: string | null | undefined;
  /** Recent failed HTTP calls; null when the caller's role may not read them. */
  failures: readonly FailedCallView[] | null;
  /**
   * Routes that refused the gatherer itself (403) while it gathered: their client errors may be
   * its own, so procedure 5 does not judge them (an older node that cannot say the caller's role).
   */
  ownRefusals?: readonly string[] | undefined;
  /** ACP calls that failed while gathering, e.g. `"/acp/streams/list: 503 db.unavailable"`. */
  problems: readonly string[];
  /**
   * The doctor's own request with a made-up country in the node's country header, sent as any
   * client could (`sluice doctor` only; the web UI does not probe): whether the node believed it,
   * and whether the doctor reached the node directly at a loopback address (a trusted proxy by
   * default, so believing it there says nothing of the proxy in front).
   */
  countryProbe?: CountryProbe | undefined;
  /** Epoch ms of the snapshot. */
  now: number;
}

/** What {@link NodeSnapshot.countryProbe} found. */
export interface CountryProbe {
  /** `app.server.country_header` as the node's configuration names it. */
  header: string;
  believed: boolean;
  direct: boolean;
}

export interface ProcedureItem {
  /** What the line is about: a task name, a route, a check. */
  subject: string;
  message: string;
  /** True when this item needs an operator's attention. */
  finding: boolean;
  data?: Record<string, unknown>;
}

export const PROCEDURES = [
  { id: 1, key: 'running_tasks', title: 'Running tasks' },
  { id: 2, key: 'failure_rise', title: 'Failures rising' },
  { id: 3, key: 'task_p95', title: 'Task p95 over the service level' },
  { id: 4, key: 'leader_tasks', title: 'Leader-scoped tasks' },
  { id: 5, key: 'route_errors', title: 'Routes with errors' },
  { id: 6, key: 'acp_health', title: 'ACP health' },
  { id: 7, key: 'version_audit', title: 'Version audit' },
] as const;

export type ProcedureKey = (typeof PROCEDURES)[number]['key'];

export interface ProcedureResult {
  id: number;
  key: ProcedureKey;
  title: string;
  status: 'ok' | 'finding';
  summary: string;
  items: ProcedureItem[];
}

export interface NodeReport {
  url: string;
  server_id: string | null;
  is_leader: boolean | null;
  commit: string | null;
  version: string | null;
  procedures: ProcedureResult[];
  findings: number;
}

export interface ProcedureOptions {
  /** Procedure 3's agreed level in ms. */
  taskP95Ms: number;
  /** Procedure 5: the share of a route's recent calls answered 4xx above which that is a finding. */
  clientErrorRate: number;
}

/** Procedure 5 judges a client-error rate only over at least this many recent calls. */
export const CLIENT_ERROR_MIN_CALLS = 20;

/** A "sharp rise": at least this many failures in the last hour… */
export const RISE_MIN_FAILURES = 3;
/** …and at least this many times the previous hour's count. */
export const RISE_FACTOR = 2;
/** A leader task whose next run is this far in the past is overdue. */
const OVERDUE_MS = 60_000;
/** Kinds that act on the node's own memory: on leader scope, followers never do them. */
const PER_NODE_KINDS: Record<string, string> = {
  'stats.flush':
    "followers never read other nodes' daily cap counts back (their caps see only their own clicks)",
  'cache.reload': "followers' routing caches only refresh on expiry",
};

/** Said where a lesser token would have seen the failed HTTP calls (procedure 2). */
const HTTP_CALLS_NEED_OPERATOR =
  'failed HTTP calls are not shown: reading them needs an operator token (operator role)';

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;

function result(key: ProcedureKey, items: ProcedureItem[], okSummary: string): ProcedureResult {
  const def = PROCEDURES.find((p) => p.key === key)!;
  const findings = items.filter((i) => i.finding);
  return {
    id: def.id,
    key,
    title: def.title,
    status: findings.length > 0 ? 'finding' : 'ok',
    summary: findings.length > 0 ? findings.map((f) => `${f.subject}: ${f.message}`).join('; ') : okSummary,
    items,
  };
}

/** 1. Running tasks and their `running_since`; one running past its own time limit is stuck. */
export function runningTasks(s: NodeSnapshot): ProcedureResult {
  const items = s.tasks
    .filter((t) => t.runtime.running)
    .map((t): ProcedureItem => {
      const since = t.runtime.running_since;
      const elapsed = since === null ? 0 : s.now - Date.parse(since);
      const stuck = t.timeout_ms !== undefined && elapsed > t.timeout_ms;
      return {
        subject: t.name,
        message: stuck
          ? `running since ${since} (${seconds(elapsed)}), past its ${seconds(t.timeout_ms!)} limit`
          : `running since ${since} (${seconds(elapsed)})`,
        finding: stuck,
        data: { running_since: since, elapsed_ms: elapsed, timeout_ms: t.timeout_ms ?? null },
      };
    });
  return result(
    'running_tasks',
    items,
    items.length === 0 ? 'no task is running' : `${items.length} running`,
  );
}

/** 2. Failures in the last hour rose sharply over the previous hour: look at logs and HTTP calls. */
export function failureRise(s: NodeSnapshot): ProcedureResult {
  const items: ProcedureItem[] = [];
  for (const t of s.tasks) {
    const last = t.runtime.failures_last_hour;
    const prev = t.runtime.failures_prev_hour;
    if (last < RISE_MIN_FAILURES || last < RISE_FACTOR * prev) continue;
    const calls = s.failures?.filter((f) => f.task === t.name).slice(0, 5);
    items.push({
      subject: t.name,
      message:
        `${plural(last, 'failure')} in the last hour, ${prev} the hour before` +
        (t.runtime.last_error ? `; last error: ${t.runtime.last_error}` : '') +
        (calls === undefined
          ? `; ${HTTP_CALLS_NEED_OPERATOR}`
          : calls.length > 0
            ? `; ${plural(calls.length, 'recent failed HTTP call')}`
            : ''),
      finding: true,
      data: {
        failures_last_hour: last,
        failures_prev_hour: prev,
        last_error: t.runtime.last_error,
        http_failures: calls ?? null,
      },
    });
  }
  return result(
    'failure_rise',
    items,
    s.failures === null
      ? `no task fails more than the hour before; ${HTTP_CALLS_NEED_OPERATOR}`
      : 'no task fails more than the hour before',
  );
}

/**
 * 3. Tasks whose p95 over the last hour exceeds the agreed level: they probably wait on an
 * external service. The last hour, not since start: a task that became slow is seen within the
 * hour, and one that recovered stops being flagged (an older node without it: since start).
 */
export function taskP95(s: NodeSnapshot, o: ProcedureOptions): ProcedureResult {
  const items = s.tasks.flatMap((t): ProcedureItem[] => {
    const lastHour = t.runtime.p95_last_hour;
    const p95 = lastHour ?? t.runtime.p95;
    if (t.runtime.runs === 0 || !(p95 > o.taskP95Ms)) return [];
    const over = lastHour === undefined ? 'since start' : 'over the last hour';
    return [
      {
        subject: t.name,
        message: `p95 ${p95} ms ${over}, above the agreed ${o.taskP95Ms} ms (kind ${t.kind}: does it wait on an external service?)`,
        finding: true,
        data: { p95_ms: p95, p95_since_start_ms: t.runtime.p95, level_ms: o.taskP95Ms },
      },
    ];
  });
  return result('task_p95', items, `every task's p95 over the last hour is within ${o.taskP95Ms} ms`);
}

/** 4. Leader-scoped tasks that do not run: is this node the leader, is the scope right? */
export function leaderTasks(s: NodeSnapshot): ProcedureResult {
  const isLeader = s.metrics?.host?.is_leader === true;
  const items: ProcedureItem[] = [];
  const leaderScoped = s.tasks.filter((t) => t.execution_scope === 'leader' && t.enabled);
  if (leaderScoped.length > 0 && s.leaderId === null) {
    items.push({
      subject: 'cluster',
      message: `no node is known to hold the lease: ${plural(leaderScoped.length, 'leader-scoped task')} may run nowhere (is the database reachable?)`,
      finding: true,
    });
  }
  for (const t of s.tasks) {
    if (!t.enabled) {
      // A note for the leader-scoped ones only: this procedure is about them.
      if (t.execution_scope === 'leader')
        items.push({ subject: t.name, message: 'disabled in configuration', finding: false });
      continue;
    }
    const misfit = PER_NODE_KINDS[t.kind];
    if (t.execution_scope === 'leader' && misfit) {
      items.push({
        subject: t.name,
        message: `kind ${t.kind} on leader scope: ${misfit}; use execution_scope: all`,
        finding: true,
      });
      continue;
    }
    if (t.execution_scope !== 'leader') continue;
    if (!isLeader) {
      items.push({
        subject: t.name,
        message: `runs on the leader (${s.leaderId ?? 'unknown'}), not on this follower`,
        finding: false,
      });
    } else if (t.next_run_at === null && !t.runtime.running) {
      items.push({ subject: t.name, message: 'this node leads but the task has no next run', finding: true });
    } else if (
      t.next_run_at !== null &&
      !t.runtime.running &&
      Date.parse(t.next_run_at) < s.now - OVERDUE_MS
    ) {
      items.push({
        subject: t.name,
        message: `overdue: its next run was due at ${t.next_run_at}`,
        finding: true,
      });
    }
  }
  const summary =
    leaderScoped.length === 0
      ? 'no leader-scoped task'
      : isLeader
        ? `this node leads and runs ${plural(leaderScoped.length, 'leader-scoped task')}`
        : `this node follows; ${s.leaderId ?? 'the leader'} runs ${plural(leaderScoped.length, 'leader-scoped task')}`;
  return result('leader_tasks', items, summary);
}

const percent = (x: number) => `${Math.round(x * 1000) / 10} %`;

/**
 * 5. Routes with errors. A server error (5xx) in the last five minutes is a finding: the node
 * failed. Client errors (4xx: a mistyped token, a form mistake, a stray `/go/typo`) are shown with
 * their recent rate and are a finding only when most recent calls of a route fail that way
 * (above `clientErrorRate` of at least {@link CLIENT_ERROR_MIN_CALLS} calls) — never for requests
 * matching no route, which are scanners' and typos' by nature. Errors that are only older than the
 * window are shown, not flagged. An older node without the split: every error is a finding.
 */
export function routeErrors(s: NodeSnapshot, o: ProcedureOptions): ProcedureResult {
  const controllers = s.metrics?.controllers ?? {};
  const items: ProcedureItem[] = [];
  for (const [route, e] of Object.entries(controllers) as [string, Partially<RecorderEntry> | undefined][]) {
    if (!e || typeof e.errors !== 'number' || !(e.errors > 0)) continue;
    const unmatched = route === UNMATCHED_ROUTE;
    const own = s.ownRefusals?.includes(route) === true;
    const what = unmatched
      ? ' (requests matching no route)'
      : own
        ? " (this token's role may not call it: its own refused calls count here)"
        : '';
    const since = `${e.errors} of ${e.count} calls failed since start (avg ${e.avg_ms} ms, p95 ${e.p95_ms} ms)`;
    // A window with every figure, from a node of this version (docs/telemetry.md#recent-windows); an older node has none.
    const r = e.recent;
    const recent =
      typeof r?.count === 'number' &&
      typeof r.errors === 'number' &&
      typeof r.server_errors === 'number' &&
      typeof r.window_s === 'number'
        ? (r as RecentEntry)
        : undefined;
    if (recent === undefined || e.server_errors === undefined) {
      items.push({ subject: route, message: since + what, finding: !unmatched, data: { ...e } });
      continue;
    }
    const client = recent.errors - recent.server_errors;
    const rate = recent.count === 0 ? 0 : client / recent.count;
    const parts: string[] = [];
    if (recent.server_errors > 0) parts.push(`${plural(recent.server_errors, 'server error')} (5xx)`);
    if (client > 0) parts.push(`${plural(client, 'client error')} (4xx, ${percent(rate)} of calls)`);
    const clientFinding =
      !unmatched && !own && recent.count >= CLIENT_ERROR_MIN_CALLS && rate > o.clientErrorRate;
    items.push({
      subject: route,
      message:
        (parts.length > 0
          ? `last ${recent.window_s / 60} minutes: ${parts.join(', ')} of ${plural(recent.count, 'call')}; `
          : `no errors in the last ${recent.window_s / 60} minutes; `) +
        `${e.server_errors} server and ${e.client_errors} client errors of ${plural(e.count ?? 0, 'call')} since start${what}`,
      finding: recent.server_errors > 0 || clientFinding,
      data: { ...e, recent_client_error_rate: Math.round(rate * 10_000) / 10_000 },
    });
  }
  items.sort((a, b) => Number(b.finding) - Number(a.finding) || a.subject.localeCompare(b.subject));
  return result(
    'route_errors',
    items,
    items.length === 0 ? 'no route has errors' : 'no recent server errors; client errors within the rate',
  );
}

/**
 * 6. ACP health: metrics arrive, controllers present, `host.uptime_seconds` readable, the database
 * up, and the click log dropping nothing.
 */
export function acpHealth(s: NodeSnapshot): ProcedureResult {
  const m = s.metrics;
  const items: ProcedureItem[] = [];
  if (m === undefined) {
    items.push({ subject: 'system metrics', message: 'could not be read', finding: true });
  } else {
    const controllers = m.controllers;
    const routes = controllers ? Object.keys(controllers).length : 0;
    items.push({
      subject: 'controllers',
      message: controllers ? `${plural(routes, 'route')} recorded` : 'missing from system metrics',
      finding: controllers === undefined || routes === 0,
    });
    const uptime = m.host?.uptime_seconds;
    items.push({
      subject: 'host.uptime_seconds',
      message: typeof uptime === 'number' ? `${uptime} s` : 'missing',
      finding: typeof uptime !== 'number',
      ...(typeof uptime === 'number' ? { data: { uptime_seconds: uptime } } : {}),
    });
    const db = m.db;
    if (db?.status !== undefined) {
      items.push({
        subject: 'db',
        message:
          db.status === 'up'
            ? `${db.driver} up`
            : `${db.driver} ${db.status}: ${db.last_error ?? 'no error recorded'}`,
        finding: db.status !== 'up',
      });
    }
    const clicks = clickLogItem(m.clicks);
    if (clicks !== undefined) items.push(clicks);
    const noDefault = noDefaultItem(m.traffic_flows?.without_default_stream);
    if (noDefault !== undefined) items.push(noDefault);
    const misses = unknownSlugsItem(m.traffic_flows?.unknown_slugs);
    if (misses !== undefined) items.push(misses);
    const postbacks = postbackKeyItem(m.postbacks);
    if (postbacks !== undefined) items.push(postbacks);
  }
  const country = countryItem(s.countryProbe);
  if (country !== undefined) items.push(country);
  for (const p of s.problems) items.push({ subject: 'acp', message: p, finding: true });
  const uptime = m?.host?.uptime_seconds;
  return result('acp_health', items, `metrics arrive; up ${typeof uptime === 'number' ? uptime : '?'} s`);
}

/** Procedure 6 warns when the click log's buffer is this full: the database is refusing batches. */
export const CLICK_BUFFER_WARN = 0.8;

/**
 * The click log in procedure 6 (docs/clicks.md#the-click-log-srcclicksclick-logts: dropped clicks are counted and shown, never silent): a
 * finding once any click was dropped since the node started, while its writes are failing, or when
 * the buffer is close to dropping (the database has refused batches for a while). An older node
 * without the section (or without `failing_since`): no item, or none of that part.
 */
function clickLogItem(c: Partially<ClicksSection> | undefined): ProcedureItem | undefined {
  if (c === undefined || typeof c.dropped !== 'number') return undefined;
  const num = (v: unknown) => (typeof v === 'number' ? v : 0);
  const dropped = c.dropped;
  const held = num(c.buffered) + num(c.unacked);
  const max = num(c.buffer_max);
  const full = max > 0 ? held / max : 0;
  const lastError = typeof c.last_error === 'string' ? c.last_error : null;
  const parts: string[] = [];
  if (dropped > 0) parts.push(`${plural(dropped, 'click')} dropped since start, never to be stored`);
  if (typeof c.failing_since === 'string')
    parts.push(`writes failing since ${c.failing_since} (${held} held, kept and sent again)`);
  if (full >= CLICK_BUFFER_WARN)
    parts.push(`buffer ${percent(full)} full (${held} of ${max}): the database is refusing batches`);
  const finding = parts.length > 0;
  return {
    subject: 'click log',
    message: finding
      ? `${parts.join('; ')}${lastError ? `; last error: ${lastError}` : ''}`
      : `${num(c.persisted)} persisted, ${held} held of ${max}, none dropped`,
    finding,
    data: { ...c },
  };
}

/**
 * A client's own country header believed (docs/deployment.md#behind-a-reverse-proxy): a warning —
 * the proxy in front passes clients' header on, so any client picks its country (and its streams),
 * or the doctor runs on a host the node trusts as a proxy. Not probed, or probed at a loopback
 * address (the node trusts it; the proxy in front is not on that path): no item.
 */
function countryItem(p: CountryProbe | undefined): ProcedureItem | undefined {
  if (p === undefined || p.direct) return undefined;
  return {
    subject: 'client country',
    message: p.believed
      ? `warning: a ${p.header} header the doctor sent as a client was believed: the proxy in front passes a client's own ${p.header} on (set it from GeoIP or clear it there), or the doctor's host is in app.server.trusted_proxies; see docs/deployment.md`
      : `a ${p.header} header sent by a client is not believed`,
    finding: false,
    data: { ...p },
  };
}

/**
 * Flows with traffic and no active default stream (docs/routing.md#flows-and-streams): a warning, not a finding — with
 * `routing.fallback_url` set, or on purpose, a flow may lose nothing without one.
 */
function noDefaultItem(
  w: Partially<FlowsSection['without_default_stream']> | undefined,
): ProcedureItem | undefined {
  if (w === undefined || typeof w.count !== 'number' || w.count === 0) return undefined;
  const slugs = Array.isArray(w.slugs) ? w.slugs.join(', ') : '';
  return {
    subject: 'flows without a default stream',
    message: `warning: ${plural(w.count, 'flow')} with traffic and no active default stream (${slugs}${w.count > 10 ? ', …' : ''}): a click no other stream takes is lost (404, or routing.fallback_url); add a default stream`,
    finding: false,
    data: { ...w },
  };
}

/**
 * Requests for slugs that route nowhere (no flow, or a paused one): a warning naming the most
 * recent — an ad's link with a typo, or a paused campaign still paid for, answered 404 or sent to
 * the fallback with no click to show for it. An older node without the section: no item.
 */
function unknownSlugsItem(
  u: Partially<FlowsSection['unknown_slugs']> | undefined,
): ProcedureItem | undefined {
  if (u === undefined || !Array.isArray(u.recent) || u.recent.length === 0) return undefined;
  const num = (v: unknown) => (typeof v === 'number' ? v : 0);
  const named = u.recent
    .slice(0, 5)
    .map((r) => `${r.slug} ×${num(r.count)} (${r.flow === 'paused' ? 'paused' : 'no flow'})`)
    .join(', ');
  return {
    subject: 'slugs that route nowhere',
    message: `warning: ${plural(num(u.unknown), 'request')} for slugs no flow has and ${plural(num(u.paused), 'request')} for paused flows since start; most recent: ${named}: a link with a typo or a paused campaign gets no clicks counted`,
    finding: false,
    data: { ...u },
  };
}

/**
 * How `/postback` is authenticated (docs/clicks.md#postback-keys): a node that takes postbacks
 * without a key (`postback.require_key: false`) is a finding — anyone who sees a click id, in a
 * redirect or an offer's URL, can post a sale on it. An older node without the section: no item.
 */
function postbackKeyItem(p: Partially<PostbacksSection> | undefined): ProcedureItem | undefined {
  if (p === undefined || typeof p.key_required !== 'boolean') return undefined;
  const source = p.key_source === 'configured' ? 'postback.key_sha256' : 'the key stored in the database';
  return p.key_required
    ? { subject: 'postbacks', message: `a key is required (${source})`, finding: false, data: { ...p } }
    : {
        subject: 'postbacks',
        message:
          'postbacks need no key (postback.require_key: false): anyone who sees a click id can post a conversion on it; remove the setting (the next start makes a key and prints it once)',
        finding: true,
        data: { ...p },
      };
}

/** 7. Version audit of one node: `commit` of the list responses and `version` of system metrics. */
export function versionAudit(s: NodeSnapshot): ProcedureResult {
  const { flows, streams } = s.commits;
  const version = typeof s.metrics?.version === 'string' ? s.metrics.version : null;
  const items: ProcedureItem[] = [
    {
      subject: 'commit',
      message: flows ?? streams ?? 'unreadable',
      finding: flows === null && streams === null,
    },
    { subject: 'version', message: version ?? 'not set (app.version)', finding: false },
  ];
  if (flows !== null && streams !== null && flows !== streams) {
    items.push({
      subject: 'commit',
      message: `the list responses disagree: flows ${flows}, streams ${streams}`,
      finding: true,
    });
  }
  return result('version_audit', items, `commit ${flows ?? streams ?? '?'}, version ${version ?? 'not set'}`);
}

/** Runs the seven procedures over one node's snapshot. */
export function evaluate(s: NodeSnapshot, o: ProcedureOptions): NodeReport {
  const procedures = [
    runningTasks(s),
    failureRise(s),
    taskP95(s, o),
    leaderTasks(s),
    routeErrors(s, o),
    acpHealth(s),
    versionAudit(s),
  ];
  const host = s.metrics?.host;
  return {
    url: s.url,
    server_id: typeof host?.server_id === 'string' ? host.server_id : null,
    is_leader: typeof host?.is_leader === 'boolean' ? host.is_leader : null,
    commit: s.commits.flows ?? s.commits.streams,
    version: typeof s.metrics?.version === 'string' ? s.metrics.version : null,
    procedures,
    findings: procedures.reduce((n, p) => n + p.items.filter((i) => i.finding).length, 0),
  };
}

/**
 * Procedure 7 across nodes: every node should run the same commit and version. One item per
 * node, a finding on each node that differs from the most common build. A node that could not be
 * asked (`unanswered`, by URL) was not audited, which is a finding too: an audit that covered less
 * than it was asked to is no pass, and one that covered nothing least of all.
 */
export function auditVersions(
  nodes: readonly Pick<NodeReport, 'url' | 'server_id' | 'commit' | 'version'>[],
  unanswered: readonly string[] = [],
): {
  status: 'ok' | 'finding';
  summary: string;
  items: ProcedureItem[];
} {
  const build = (n: { commit: string | null; version: string | null }) =>
    `${n.commit ?? '?'} / ${n.version ?? 'not set'}`;
  const counts = new Map<string, number>();
  for (const n of nodes) counts.set(build(n), (counts.get(build(n)) ?? 0) + 1);
  const ranked = [...counts.entries()].sort((a, b) => b[1] - a[1]);
  // The odd one out is only clear when one build has more nodes than any other; on a tie every
  // node not on a single agreed build is a finding.
  const common =
    ranked.length === 1 || (ranked[0] && ranked[0][1] > ranked[1]![1]) ? ranked[0]![0] : undefined;
  const items: ProcedureItem[] = nodes.map((n) => ({
    subject: n.server_id ?? n.url,
    message:
      `commit ${n.commit ?? '?'}, version ${n.version ?? 'not set'}` +
      (counts.size <= 1
        ? ''
        : common === undefined
          ? ' (no build has a majority)'
          : build(n) !== common
            ? ` (most nodes: ${common})`
            : ''),
    finding: counts.size > 1 && build(n) !== common,
    data: { url: n.url, commit: n.commit, version: n.version },
  }));
  for (const url of unanswered)
    items.push({
      subject: url,
      message: 'not audited: the node could not be asked',
      finding: true,
      data: { url },
    });
  const odd = items.filter((i) => i.finding).length - unanswered.length;
  const audited =
    nodes.length === 0
      ? 'nothing audited: no node answered'
      : counts.size === 1
        ? `${plural(nodes.length, 'node')} on ${common}`
        : common === undefined
          ? `${plural(counts.size, 'build')} across ${plural(nodes.length, 'node')}, none on most of them`
          : `${plural(counts.size, 'build')} across ${plural(nodes.length, 'node')}; ${odd} differ from ${common}`;
  return {
    status: odd > 0 || unanswered.length > 0 || nodes.length === 0 ? 'finding' : 'ok',
    summary:
      nodes.length > 0 && unanswered.length > 0
        ? `${audited}; ${unanswered.length} of ${plural(nodes.length + unanswered.length, 'node')} not audited (could not be asked)`
        : audited,
    items,
  };
}
