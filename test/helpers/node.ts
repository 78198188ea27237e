import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import { createOperator } from '../../src/auth/index.ts';
import type { Role } from '../../src/config/index.ts';
import { type SluiceNode, type StartOptions, startNode } from '../../src/main.ts';
import type { FlowRecord } from '../../src/storage/index.ts';
import { dropSchema, PG_URL, testSchema } from './postgres.ts';

/** Captures the JSON log lines a node writes, parsed, plus the raw text for secret scans. */
export class LogCapture implements DestinationStream {
  readonly lines: Record<string, unknown>[] = [];
  raw = '';
  write(msg: string): void {
    this.raw += msg;
    for (const line of msg.split('\n')) if (line.trim() !== '') this.lines.push(JSON.parse(line));
  }
  apiErrors(requestId?: string): Record<string, unknown>[] {
    return this.lines.filter(
      (l) => l.message === 'api error' && (requestId === undefined || l.request_id === requestId),
    );
  }
}

export interface TestNode {
  node: SluiceNode;
  logs: LogCapture;
  dir: string;
  url: string;
  printed: string[];
  /**
   * The postback key this node printed when it made it (a first start, `postback.require_key`
   * true, no `postback.key_sha256`); undefined when it printed none.
   */
  postbackKey: string | undefined;
  /** Creates a stored operator with that role and returns its token. */
  token(role: Role, name?: string): Promise<string>;
  /** POST JSON to an ACP path with a token. */
  acp(
    path: string,
    token: string | undefined,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Response>;
  close(): Promise<void>;
}

/**
 * A flow with one default stream to `target`, created over the ACP as an admin would: the setup of
 * every test that only needs a slug that redirects. Fails the test when the node refuses either.
 */
export async function flowWithDefault(
  t: TestNode,
  admin: string,
  slug: string,
  target = 'https://example.com/',
): Promise<FlowRecord> {
  const res = await t.acp('/acp/traffic-flows/create', admin, { slug, name: slug });
  if (res.status !== 200) throw new Error(`flow ${slug}: ${res.status} ${await res.text()}`);
  const flow = (await res.json()) as FlowRecord;
  const stream = await t.acp('/acp/streams/create', admin, {
    flow_id: flow.id,
    name: 'default',
    type: 'default',
    target_url: target,
  });
  if (stream.status !== 200) throw new Error(`stream of ${slug}: ${stream.status} ${await stream.text()}`);
  return flow;
}

let seq = 0;

/**
 * Starts a real node on port 0 with its SQLite file in a fresh temp dir (or on PostgreSQL in a
 * fresh schema). The test's `yaml` is the mode file, merged over a base that sets the port and
 * storage, so a test states only what it changes.
 */
export async function startTestNode(
  opts: {
    yaml?: string;
    mode?: string;
    env?: NodeJS.ProcessEnv;
    /** PostgreSQL: a fresh schema, dropped on close (or a given one, shared by several nodes, kept). */
    postgres?: { schema?: string };
  } & Omit<StartOptions, 'configDir' | 'mode' | 'env'> = {},
): Promise<TestNode> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-test-'));
  const mode = opts.mode ?? 'test';
  const ownSchema = opts.postgres && !opts.postgres.schema ? testSchema() : undefined;
  const schema = opts.postgres?.schema ?? ownSchema;
  const storage = schema
    ? `storage:\n  driver: postgres\n  postgres:\n    url: ${PG_URL}\n    schema: ${schema}\n    pool_max: 4\n`
    : `storage:\n  sqlite:\n    path: ${join(dir, 'sluice.db')}\n`;
  writeFileSync(
    join(dir, 'config.yml'),
    // The retention tasks run on the wall clock (minute 17 of each hour, 03:23): a test that stores
    // clicks of fixed dates months back would lose them if it ran across one (a CI run did, at
    // 05:17). They stay defined, so a test can still run them by name; a mode file can enable them.
    `app:\n  server:\n    host: 127.0.0.1\n    port: 0\n${storage}observability:\n  logging:\n    level: info\n` +
      'cron:\n  tasks:\n    clicks_retention:\n      enabled: false\n    reports_retention:\n      enabled: false\n',
  );
  writeFileSync(join(dir, `config.${mode}.yml`), opts.yaml ?? '');
  const logs = new LogCapture();
  const printed: string[] = [];
  const { yaml: _yaml, mode: _mode, env, postgres: _pg, ...rest } = opts;
  const node = await startNode({
    configDir: dir,
    mode,
    env: env ?? {},
    cwd: dir,
    logDestination: logs,
    print: (l) => printed.push(l),
    ...rest,
  });
  return {
    node,
    logs,
    dir,
    url: node.url,
    printed,
    postbackKey: printedPostbackKey(printed),
    token: async (role, name) =>
      (await createOperator(node.storage.operators, name ?? `${role}-${++seq}`, role)).token,
    acp: (path, token, body, headers = {}) =>
      fetch(node.url + path, {
        method: 'POST',
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      }),
    close: async () => {
      await node.stop();
      rmSync(dir, { recursive: true, force: true });
      if (ownSchema) await dropSchema(ownSchema);
    },
  };
}

/** A postback key as a node prints it (src/conversions/postback-keys.ts). */
export const POSTBACK_KEY = /pbk_[A-Za-z0-9_-]{43}/;

/** The postback key among what a node printed, if it printed one. */
export function printedPostbackKey(printed: readonly string[]): string | undefined {
  for (const line of printed) {
    const m = POSTBACK_KEY.exec(line);
    if (m) return m[0];
  }
  return undefined;
}

/**
 * `path` (of `/postback`) carrying the node's postback key in its query string, unless it names a
 * key itself or the node printed none: what a network's postback URL looks like by default.
 */
export function withPostbackKey(t: Pick<TestNode, 'postbackKey'>, path: string): string {
  if (t.postbackKey === undefined || /[?&]key=/.test(path)) return path;
  return `${path}${path.includes('?') ? '&' : '?'}key=${encodeURIComponent(t.postbackKey)}`;
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * A mode file's lines for a node with one `http.probe` task named `probe` calling `url`, scheduled
 * once a year (a test runs it by hand), with the exposition on when `prometheus` says so.
 */
export function probeNodeYaml(url: string, opts: { prometheus?: boolean } = {}): string {
  return [
    ...(opts.prometheus ? ['observability:', '  metrics:', '    prometheus_enabled: true'] : []),
    'cron:',
    '  tasks:',
    '    probe:',
    '      kind: http.probe',
    "      schedule: '0 0 1 1 *'",
    '      execution_scope: all',
    `      url: ${url}`,
    '',
  ].join('\n');
}

/**
 * Writes what a node counted now, as its `stats.flush` task does: the click log (which carries the
 * counts with their clicks), then every node's daily cap counts read back. A refusing database
 * throws, the counts kept for the next time.
 */
export async function persistCounts(node: SluiceNode): Promise<number> {
  return node.ledger.flush(node.clickLog);
}
