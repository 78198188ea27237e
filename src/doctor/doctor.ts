import { roleAllows } from '../auth/index.ts';
import { ROLES, type Role } from '../config/index.ts';
import {
  auditVersions,
  type CountryProbe,
  evaluate,
  type FailedCallView,
  type NodeReport,
  type NodeSnapshot,
  type ProcedureItem,
  type TaskView,
} from '../procedures/index.ts';
import type { Partially, SystemMetrics } from '../telemetry/index.ts';

/** Exit codes of `sluice doctor`: healthy, findings, and "could not even ask". */
export const DOCTOR_EXIT = { healthy: 0, findings: 1, unreachable: 2 } as const;

export interface DoctorOptions {
  urls: readonly string[];
  token: string;
  taskP95Ms: number;
  /** Procedure 5's client-error rate. */
  clientErrorRate: number;
  /** Per ACP call. */
  timeoutMs?: number;
  now?: () => number;
  /**
   * Given one URL, ask that node for the cluster (`/acp/cluster/nodes`) and check every node in it
   * at its advertised address (default true). False: only the URLs given.
   */
  discover?: boolean;
}

/**
 * The nodes to check when one URL is given: that node (at the URL given) and every other node the
 * registry lists, alive ones at their advertised address; a node listed but not alive is reported
 * unreachable. A node that cannot list its cluster (an older build, a viewer refused) is checked alone.
 */
async function clusterOf(
  url: string,
  token: string,
  timeoutMs: number,
): Promise<{ urls: string[]; down: NodeResult[] }> {
  const alone = { urls: [url], down: [] };
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/acp/cluster/nodes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{}',
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (res.status !== 200) return alone;
    const body = (await res.json()) as {
      items?: { server_id: string; alive: boolean; url?: string | null; last_seen?: string }[];
      this_node?: { server_id?: string };
    };
    const self = body.this_node?.server_id;
    const urls = [url];
    const down: NodeResult[] = [];
    for (const n of body.items ?? []) {
      if (n.server_id === self) continue;
      if (!n.alive)
        down.push({
          url: n.url ?? n.server_id,
          reachable: false,
          error: `${n.server_id}: not alive (last seen ${n.last_seen ?? '?'})`,
        });
      else if (n.url) urls.push(n.url);
      else down.push({ url: n.server_id, reachable: false, error: `${n.server_id}: advertises no address` });
    }
    return { urls, down };
  } catch {
    return alone;
  }
}

export type NodeResult =
  | (NodeReport & { reachable: true })
  | { url: string; reachable: false; error: string };

export interface DoctorReport {
  generated_at: string;
  task_p95_ms: number;
  client_error_rate: number;
  healthy: boolean;
  exit_code: number;
  nodes: NodeResult[];
  /** Procedure 7 across the nodes given (one node: its own build). */
  version_audit: { status: 'ok' | 'finding'; summary: string; items: ProcedureItem[] };
}

/** The node could not be asked: down, not Sluice, or the token was refused (exit 2). */
export class UnreachableError extends Error {}

interface Answer {
  status: number;
  body: Record<string, unknown>;
  /** The node's clock (the `Date` header), ms; task times are compared with it, not with ours. */
  date: number | undefined;
}

function errorCode(a: Answer): string {
  const e = a.body.error as { code?: string } | undefined;
  return `${a.status}${e?.code ? ` ${e.code}` : ''}`;
}

const asRole = (x: unknown): Role | undefined => ROLES.find((r) => r === x);

/**
 * Antarctica: a country no real visitor's header names, so a node that answers with it believed the
 * doctor's own header.
 */
const PROBE_COUNTRY = 'AQ';

/** Hosts that are this machine: a node reached there sees the doctor as a loopback peer. */
const LOOPBACK_HOST = /^(localhost|0\.0\.0\.0|127(\.\d{1,3}){3}|\[::1\]|\[::ffff:127(\.\d{1,3}){3}\])$/i;

/**
 * `GET /healthz` carrying {@link PROBE_COUNTRY} in the node's country header, as a client would
 * send it: every answer says the country the node believed (`X-Client-Country-Code`). Undefined
 * when it could not be sent.
 */
async function probeCountry(
  base: string,
  header: string,
  timeoutMs: number,
): Promise<CountryProbe | undefined> {
  try {
    const res = await fetch(`${base}/healthz`, {
      headers: { [header]: PROBE_COUNTRY },
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer();
    return {
      header,
      believed: res.headers.get('x-client-country-code') === PROBE_COUNTRY,
      direct: LOOPBACK_HOST.test(new URL(base).hostname),
    };
  } catch {
    return undefined;
  }
}

/** Reads one node through its public ACP, as any operator script could. */
export async function gather(
  url: string,
  token: string,
  timeoutMs: number,
  now: () => number,
): Promise<NodeSnapshot> {
  const base = url.replace(/\/+$/, '');
  const post = async (path: string, body: unknown = {}): Promise<Answer> => {
    let res: Response;
    let text: string;
    try {
      res = await fetch(base + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      // Inside the try: a body that stalls or is cut is as unreachable as no answer at all.
      text = await res.text();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      throw new UnreachableError(`${base}: unreachable (${cause})`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new UnreachableError(
        `${base}${path}: answered ${res.status} with no JSON; is this a Sluice node?`,
      );
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new UnreachableError(`${base}${path}: answered ${res.status} with JSON that is not an object`);
    }
    const date = Date.parse(res.headers.get('date') ?? '');
    const answer = {
      status: res.status,
      body: parsed as Record<string, unknown>,
      date: Number.isNaN(date) ? undefined : date,
    };
    if (res.status === 401 || (res.status === 403 && path === '/acp/system/metrics')) {
      throw new UnreachableError(`${base}: the token was refused (${errorCode(answer)})`);
    }
    return answer;
  };

  const problems: string[] = [];
  const ok = (path: string, a: Answer) => {
    if (a.status === 200) return true;
    problems.push(`${path} answered ${errorCode(a)}`);
    return false;
  };
  /** The `items` of a list answer; a 200 without an array of items is a problem of its own. */
  const items = <T>(
    path: string,
    a: Answer,
    valid: (x: unknown) => boolean = () => true,
  ): T[] | undefined => {
    if (!ok(path, a)) return undefined;
    if (Array.isArray(a.body.items) && a.body.items.every(valid)) return a.body.items as T[];
    problems.push(`${path} answered 200 without a list of items`);
    return undefined;
  };
  const isTask = (t: unknown) => {
    const x = t as Partial<TaskView> | null;
    return typeof x?.name === 'string' && typeof x.runtime === 'object' && x.runtime !== null;
  };
  // The token's role (any role may ask); an older node without the endpoint leaves it unknown.
  const whoami = await post('/acp/auth/whoami');
  const role = whoami.status === 200 ? asRole(whoami.body.role) : undefined;
  const tasks = await post('/acp/cron-tasks/list');
  const flows = await post('/acp/traffic-flows/list', { limit: 1 });
  const streams = await post('/acp/streams/list', { limit: 1 });
  const cluster = await post('/acp/cluster/nodes');
  // Recent failures need the operator role. A lesser token does not ask: each 403 would be a client
  // error of that route on the node, and enough of them a procedure 5 finding the doctor made itself.
  // A viewer's doctor still runs, saying what it could not see.
  const failures =
    role === undefined || roleAllows(role, 'operator')
      ? await post('/acp/http-client/recent-failures', { limit: 500 })
      : undefined;
  const config = await post('/acp/system/config');
  const app =
    config.status === 200 ? (config.body.app as { server?: { country_header?: unknown } }) : undefined;
  const header = app?.server?.country_header;
  const countryProbe = typeof header === 'string' ? await probeCountry(base, header, timeoutMs) : undefined;
  // Last, so that the controllers it reads include the calls above (procedure 6 on a fresh node).
  const metrics = await post('/acp/system/metrics');
  return {
    url: base,
    // The wire JSON, read as the one system metrics type with every field possibly absent.
    metrics: ok('/acp/system/metrics', metrics) ? (metrics.body as Partially<SystemMetrics>) : undefined,
    tasks: items<TaskView>('/acp/cron-tasks/list', tasks, isTask) ?? [],
    commits: {
      flows: ok('/acp/traffic-flows/list', flows) ? String(flows.body.commit) : null,
      streams: ok('/acp/streams/list', streams) ? String(streams.body.commit) : null,
    },
    leaderId: ok('/acp/cluster/nodes', cluster) ? (cluster.body.leader_id as string | null) : undefined,
    failures:
      failures === undefined || failures.status === 403
        ? null
        : (items<FailedCallView>('/acp/http-client/recent-failures', failures) ?? []),
    // A node that could not say the role refused the doctor here: those 403s are its own.
    ...(failures?.status === 403 ? { ownRefusals: ['/acp/http-client/recent-failures'] } : {}),
    problems,
    countryProbe,
    // The node's clock: `running_since` and `next_run_at` are its times, and ours may be off.
    now: metrics.date ?? now(),
  };
}

/** Runs the procedures against every node given; never throws for a node's state, only reports it. */
export async function runDoctor(o: DoctorOptions): Promise<DoctorReport> {
  const now = o.now ?? Date.now;
  const cluster =
    o.urls.length === 1 && o.discover !== false
      ? await clusterOf(o.urls[0]!, o.token, o.timeoutMs ?? 10_000)
      : { urls: [...o.urls], down: [] };
  const asked: NodeResult[] = await Promise.all(
    cluster.urls.map(async (url): Promise<NodeResult> => {
      try {
        const snapshot = await gather(url, o.token, o.timeoutMs ?? 10_000, now);
        return {
          ...evaluate(snapshot, { taskP95Ms: o.taskP95Ms, clientErrorRate: o.clientErrorRate }),
          reachable: true,
        };
      } catch (err) {
        if (err instanceof UnreachableError) return { url, reachable: false, error: err.message };
        throw err;
      }
    }),
  );
  const nodes = [...asked, ...cluster.down];
  const reached = nodes.filter((n): n is NodeReport & { reachable: true } => n.reachable);
  const version_audit = auditVersions(
    reached,
    nodes.filter((n) => !n.reachable).map((n) => n.url),
  );
  const findings = reached.reduce((n, r) => n + r.findings, 0) + (version_audit.status === 'finding' ? 1 : 0);
  const exit_code =
    reached.length < nodes.length
      ? DOCTOR_EXIT.unreachable
      : findings > 0
        ? DOCTOR_EXIT.findings
        : DOCTOR_EXIT.healthy;
  return {
    generated_at: new Date(now()).toISOString(),
    task_p95_ms: o.taskP95Ms,
    client_error_rate: o.clientErrorRate,
    healthy: exit_code === DOCTOR_EXIT.healthy,
    exit_code,
    nodes,
    version_audit,
  };
}
