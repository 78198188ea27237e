/**
 * What the reliability scenarios share: real `sluice start` processes on one PostgreSQL (optionally
 * behind a TCP proxy that can take the database away), their log lines, an ACP token, a direct
 * store for checking what was persisted, and load generators that count every answer exactly.
 * Loopback only.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Agent, request } from 'undici';
import { sha256Hex } from '../src/auth/index.ts';
import { openPostgres, type Storage } from '../src/storage/index.ts';
import { systemClock } from '../src/time/index.ts';
import { START_LIMIT_MS } from '../test/helpers/cli.ts';
import { dropSchema, PG_URL, testSchema } from '../test/helpers/postgres.ts';

import { TcpProxy } from '../test/helpers/tcp-proxy.ts';

/**
 * A browser's user agent, sent with every /go request the scenarios make: a request without one
 * is a bot (docs/routing.md#bots), answered but never a hit, and the scenarios count hits.
 */
export const PERSON = {
  'user-agent':
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
};

const CLI = resolve(import.meta.dirname, '../src/cli.ts');
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface NodeProcess {
  id: string;
  url: string;
  child: ChildProcess;
  /** Every JSON log line the node wrote, parsed. */
  logs: Record<string, unknown>[];
  exited: Promise<number | null>;
  /** Sends a signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface Cluster {
  nodes: NodeProcess[];
  token: string;
  /** The store the nodes use, opened directly (not through the proxy) for checks. */
  store: Storage;
  proxy: TcpProxy | undefined;
  start(id: string): Promise<NodeProcess>;
  acp<T = Record<string, unknown>>(
    node: NodeProcess,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>;
  close(): Promise<void>;
}

export interface ClusterOptions {
  ids: string[];
  /** Extra YAML for the mode file (cron tasks, cache, …). */
  yaml?: string;
  /** Put a TCP proxy between the nodes and PostgreSQL, so the database can be taken away. */
  proxy?: boolean;
  leaseTtlMs?: number;
  renewIntervalMs?: number;
}

/** Starts node processes on a fresh PostgreSQL schema with leader election through it. */
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const schema = testSchema();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-soak-'));
  const token = `slc_${randomBytes(24).toString('base64url')}`;
  let proxy: TcpProxy | undefined;
  const db = new URL(PG_URL);
  if (o.proxy) {
    proxy = new TcpProxy(db.hostname, Number(db.port || 5432));
    await proxy.start();
    db.port = String(proxy.port);
  }
  writeFileSync(
    join(dir, 'config.soak.yml'),
    [
      'app:',
      '  server:',
      '    port: 0',
      '    shutdown_timeout_ms: 5000',
      'storage:',
      '  driver: postgres',
      '  postgres:',
      `    url: ${db.toString()}`,
      `    schema: ${schema}`,
      '    pool_max: 5',
      'cluster:',
      '  leader_election: postgres',
      `  lease_ttl_ms: ${o.leaseTtlMs ?? 3000}`,
      `  renew_interval_ms: ${o.renewIntervalMs ?? 1000}`,
      'acp:',
      '  operators:',
      `    - { name: soak, role: admin, token_sha256: ${sha256Hex(token)} }`,
      '  auth_rate_limit:',
      '    max_failures: 0',
      o.yaml ?? '',
    ].join('\n'),
  );
  const store = openPostgres({ url: PG_URL, poolMax: 3, schema, clock: systemClock });
  await store.migrate();

  const nodes: NodeProcess[] = [];
  const start = async (id: string): Promise<NodeProcess> => {
    const child = spawn(
      process.execPath,
      ['--max-semi-space-size=16', CLI, 'start', '--config-dir', dir, '--mode', 'soak'],
      {
        cwd: dir,
        env: { PATH: process.env.PATH, APP__APP__SERVER__ID: id },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const logs: Record<string, unknown>[] = [];
    let partial = '';
    let banner = '';
    const url = new Promise<string>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`${id} did not start: ${banner}`)), START_LIMIT_MS);
      child.stdout!.on('data', (d: Buffer) => {
        partial += d.toString('utf8');
        const lines = partial.split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          if (!line.startsWith('{')) {
            banner += `${line}\n`;
            continue;
          }
          const record = JSON.parse(line) as Record<string, unknown>;
          logs.push(record);
          if (record.message === 'sluice started') {
            clearTimeout(timer);
            res(String(record.url));
          }
        }
      });
    });
    const exited = new Promise<number | null>((res) => child.on('close', res));
    const node: NodeProcess = {
      id,
      url: await url,
      child,
      logs,
      exited,
      stop: (signal = 'SIGTERM') => {
        child.kill(signal);
        return exited;
      },
    };
    nodes.push(node);
    return node;
  };
  for (const id of o.ids) await start(id);

  const acp = async <T>(node: NodeProcess, path: string, body: unknown = {}) => {
    const res = await request(node.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.statusCode, body: (await res.body.json()) as T };
  };

  return {
    nodes,
    token,
    store,
    proxy,
    start,
    acp,
    close: async () => {
      for (const n of nodes) n.child.kill('SIGKILL');
      await Promise.all(nodes.map((n) => n.exited));
      await proxy?.down();
      await store.close();
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A flow with three weighted streams; returns its id. */
export async function seedFlow(store: Storage, slug: string): Promise<string> {
  const flow = await store.flows.create({ slug, name: slug, status: 'active', rotation: 'weight' });
  for (const [i, name] of ['a', 'b', 'c'].entries()) {
    await store.streams.create({
      flow_id: flow.id,
      name,
      type: 'regular',
      position: i,
      weight: i + 1,
      status: 'active',
      filters: {},
      target_url: `https://${name}.example/{request_id}`,
      redirect_code: 302,
    });
  }
  return flow.id;
}

export async function persistedHits(
  store: Storage,
  flowId: string,
): Promise<{ hits: number; clicks: number; logged: number; rolledUp: number }> {
  const streams = await store.streams.ofFlow(flowId);
  // The click log's redirected clicks of the flow, row by row and as the hourly rollups sum them.
  const redirected = async (source: 'clicks' | 'rollups') => {
    const { totals } = await store.reports.aggregate(
      {
        from: '2000-01-01T00:00:00.000Z',
        to: '2100-01-01T00:00:00.000Z',
        columns: [],
        bucketSeconds: 0,
        filter: { flow_id: flowId },
        source,
      },
      { order: [], limit: 1 },
    );
    return totals.clicks;
  };
  return {
    hits: streams.reduce((n, s) => n + s.hits, 0),
    clicks: (await store.flows.get(flowId))?.clicks ?? 0,
    logged: await redirected('clicks'),
    rolledUp: await redirected('rollups'),
  };
}

/** Answers by status, plus transport failures by error code. */
export class Tally {
  readonly byStatus = new Map<number, number>();
  readonly byError = new Map<string, number>();
  status(code: number): void {
    this.byStatus.set(code, (this.byStatus.get(code) ?? 0) + 1);
  }
  error(code: string): void {
    this.byError.set(code, (this.byError.get(code) ?? 0) + 1);
  }
  count(status: number): number {
    return this.byStatus.get(status) ?? 0;
  }
  get answered(): number {
    return [...this.byStatus.values()].reduce((a, b) => a + b, 0);
  }
  get errorsAnswered(): number {
    return [...this.byStatus].filter(([s]) => s >= 400).reduce((a, [, n]) => a + n, 0);
  }
  get failed(): number {
    return [...this.byError.values()].reduce((a, b) => a + b, 0);
  }
  add(other: Tally): void {
    for (const [s, n] of other.byStatus) this.byStatus.set(s, (this.byStatus.get(s) ?? 0) + n);
    for (const [e, n] of other.byError) this.byError.set(e, (this.byError.get(e) ?? 0) + n);
  }
  toJSON(): Record<string, number> {
    return {
      ...Object.fromEntries([...this.byStatus].map(([s, n]) => [String(s), n])),
      ...Object.fromEntries(this.byError),
    };
  }
}

/**
 * Closed-loop load that counts exactly: `workers` requests in flight, each worker issuing the next
 * when the last is answered, until `until()` says stop — every request is either answered (and
 * tallied by status) or failed (tallied by error code), none is abandoned mid-flight.
 */
export async function closedLoop(o: {
  url: string;
  paths: () => string;
  workers: number;
  until: () => boolean;
  method?: 'GET' | 'POST';
  body?: () => string;
  headers?: Record<string, string>;
  /** Seen latencies in ms, when given. */
  latencies?: number[];
  /**
   * Called with each answer's status or transport error code, and when its request was sent
   * (`performance.now()`), so phase accounting can judge a request by both ends (see {@link Phases}).
   */
  onAnswer?: (outcome: number | string, sentAt: number) => void;
}): Promise<Tally> {
  const tally = new Tally();
  const dispatcher = new Agent({ connections: o.workers, pipelining: 1 });
  const worker = async () => {
    while (!o.until()) {
      const t0 = performance.now();
      try {
        const res = await request(o.url + o.paths(), {
          method: o.method ?? 'GET',
          dispatcher,
          headers: o.headers ?? PERSON,
          body: o.body?.(),
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        });
        await res.body.dump();
        tally.status(res.statusCode);
        o.onAnswer?.(res.statusCode, t0);
      } catch (err) {
        const code = (err as { code?: string }).code ?? (err as Error).name;
        tally.error(code);
        o.onAnswer?.(code, t0);
        // A refused connection is instant; do not spin.
        await sleep(20);
      }
      o.latencies?.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: o.workers }, worker));
  await dispatcher.close();
  return tally;
}

/**
 * The phases of a scenario on this process's monotonic clock. A request belongs to a phase only
 * when it was both sent and answered within it; one sent before a switch and answered after it
 * (sent while the database was away, answered once it was back) belongs to neither and is counted
 * as `straddling`, so a check on a phase never judges a request that raced the switch.
 */
export class Phases<P extends string> {
  readonly #starts: { phase: P; at: number }[];

  constructor(first: P) {
    this.#starts = [{ phase: first, at: Number.NEGATIVE_INFINITY }];
  }

  /** Switches to `phase` now; requests sent from here on belong to it. */
  enter(phase: P): void {
    this.#starts.push({ phase, at: performance.now() });
  }

  /** The phase a request sent at `sentAt` and answered now belongs to, or `straddling`. */
  of(sentAt: number): P | 'straddling' {
    let i = this.#starts.length - 1;
    while (i > 0 && this.#starts[i]!.at > sentAt) i--;
    return i === this.#starts.length - 1 ? this.#starts[i]!.phase : 'straddling';
  }
}

export const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One scenario's outcome: its figures for the doc and its checks (each with what was seen). */
export interface Outcome {
  scenario: string;
  figures: Record<string, number | string>;
  checks: Check[];
}

/**
 * What a scenario judges. A `speed` check bounds how fast this machine did something (the event
 * loop's delay under load, a timer's punctuality): `npm run soak` judges it, on the quiet machine
 * its figures are for; the short runs in `npm test` report it without failing, since on a shared,
 * busy machine it would race the clock rather than judge the code. Every other check must hold
 * anywhere, however slow.
 */
export interface Check {
  name: string;
  ok: boolean;
  seen: string;
  speed?: true;
}

export function check(
  outcome: Outcome,
  name: string,
  ok: boolean,
  seen: unknown,
  o: { speed?: true } = {},
): void {
  outcome.checks.push({
    name,
    ok,
    seen: typeof seen === 'string' ? seen : JSON.stringify(seen),
    ...(o.speed ? { speed: true as const } : {}),
  });
}

export const apiErrorLines = (nodes: NodeProcess[]) =>
  nodes.flatMap((n) => n.logs.filter((l) => l.message === 'api error'));
