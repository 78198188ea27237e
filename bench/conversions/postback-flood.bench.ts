/**
 * Postbacks against `/go`: what a flood of conversions costs the node's main thread, and what it
 * does to the clicks answered meanwhile.
 *
 *   node bench/conversions/postback-flood.bench.ts [--rounds 3] [--seconds 5] [--go-rate 500]
 *        [--postback-rate 1000] [--clicks 2000] [--old DIR] [--postgres] [--cpu-prof DIR]
 *
 * Each server is a real Sluice node (bench/http/server-child.ts, the `light` scenario: one flow,
 * five streams, SQLite in a temp dir or with `--postgres` a schema of its own) with a postback key
 * configured (`postback.key_sha256`), which every postback carries, as in production. The harness first
 * clicks `--clicks` times and waits until the click log holds them, so that every postback finds
 * its click in the database (not in the node's buffer). Then, per round and per server:
 *
 *   quiet      `/go` alone at `--go-rate` (its p99 is the reference)
 *   postbacks  postbacks alone at `--postback-rate`: the node's main-thread CPU µs per postback,
 *              over a window in which it received nothing else (a third of them update a
 *              conversion, the rest insert one until each (click, txid) exists)
 *   unknown    the same with click ids no click has (404 at once: no wait, the id holds no time)
 *   healthz    `GET /healthz` at the same rate: what any request costs the main thread (fastify's
 *              pipeline, the request context, telemetry), for scale
 *   flood      `/go` at `--go-rate` and postbacks at `--postback-rate` at once, from two load
 *              generator processes: `/go`'s p99 during the flood
 *
 * Every load comes from autocannon in a process of its own, paced to its rate. Figures are
 * medians over rounds; with `--old DIR` (another checkout, e.g. the code before a change) each
 * round measures both, one after the other, and the table gives both side by side:
 *   mkdir /tmp/pb-old && git archive main | tar -x -C /tmp/pb-old && ln -s "$PWD/node_modules" /tmp/pb-old/
 *   node bench/conversions/postback-flood.bench.ts --old /tmp/pb-old ; rm -rf /tmp/pb-old
 *
 * `--cpu-prof DIR` runs each node with `--cpu-prof` into DIR (a profile per node, written when
 * it stops), to see where a postback's time goes.
 */
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  autocannonClient,
  type BenchServer,
  type LoadClient,
  type Measurement,
  machine,
  measure,
  median,
  startServer,
} from '../http/load.ts';
import { BROWSER_UA, type RequestMix, requestMix, type SluiceScenario } from '../http/scenarios.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    'go-rate': { type: 'string', default: '500' },
    'postback-rate': { type: 'string', default: '1000' },
    clicks: { type: 'string', default: '2000' },
    old: { type: 'string' },
    postgres: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const GO_RATE = Number(values['go-rate']);
const PB_RATE = Number(values['postback-rate']);
const CLICKS = Number(values.clicks);
/** Conversions per click: each postback names one of these txids, so most of a run's postbacks update. */
const TXIDS = 3;

/** The postback key every postback carries, as a network's would; the node is configured with its hash. */
const KEY = 'bench-postback-key';
const scenario: SluiceScenario = {
  flows: 1,
  streams: 5,
  macros: 'stream',
  country: false,
  config: `postback:\n  key_sha256: ${createHash('sha256').update(KEY).digest('hex')}\n`,
  ...(values.postgres ? { backend: 'postgres' as const } : {}),
};
const flags =
  values['cpu-prof'] === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${resolve(values['cpu-prof'])}`];

interface Node {
  label: string;
  server: BenchServer;
  postbacks: RequestMix;
}

/** Clicks `n` times (a browser's user agent: every one a click) and waits until the log holds them. */
async function clickIds(server: BenchServer, n: number): Promise<string[]> {
  const before = (await server.clicks()).persisted;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${server.origin}/go/bench`, {
      redirect: 'manual',
      headers: { 'user-agent': BROWSER_UA, 'x-forwarded-for': `10.0.${i >> 8}.${i & 255}` },
    });
    await r.arrayBuffer();
    const id = r.headers.get('x-click-id');
    if (id === null) throw new Error(`${server.name}: /go answered ${r.status} without X-Click-Id`);
    ids.push(id);
  }
  const until = performance.now() + 30_000;
  while ((await server.clicks()).persisted - before < n) {
    if (performance.now() > until) throw new Error(`${server.name}: the clicks were not written in 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return ids;
}

function postbackMix(ids: readonly string[]): RequestMix {
  const paths = ids.flatMap((id) =>
    Array.from(
      { length: TXIDS },
      (_, t) => `/postback?click_id=${id}&status=sale&payout=1.25&txid=t${t}&key=${KEY}`,
    ),
  );
  return { paths, userAgent: 'network-postback/1.0' };
}

const unknownMix: RequestMix = {
  paths: Array.from({ length: 1000 }, (_, i) => `/postback?click_id=nope${i}&payout=1&key=${KEY}`),
  userAgent: 'network-postback/1.0',
};
const healthzMix: RequestMix = { paths: ['/healthz'] };
const goMix = requestMix(scenario);

const goLoad = { mix: goMix, connections: 10, rate: GO_RATE, seconds: SECONDS };
const pbLoad = (mix: RequestMix) => ({ mix, connections: 50, rate: PB_RATE, seconds: SECONDS });

type Window = 'quiet' | 'postbacks' | 'unknown' | 'healthz' | 'flood go' | 'flood postbacks';
const results = new Map<string, Map<Window, Measurement[]>>();
const record = (label: string, w: Window, m: Measurement) => {
  const byWindow = results.get(label) ?? new Map<Window, Measurement[]>();
  results.set(label, byWindow);
  const list = byWindow.get(w) ?? [];
  byWindow.set(w, list);
  list.push(m);
  process.stderr.write(
    `  ${label} ${w}: ${Math.round(m.rps)} req/s, p99 ${m.p99Ms.toFixed(1)} ms, ` +
      `main thread ${m.mainCpuUsPerReq.toFixed(0)} µs/req, bad ${m.load.bad}\n`,
  );
};

async function round(node: Node, a: LoadClient, b: LoadClient): Promise<void> {
  const { label, server } = node;
  record(label, 'quiet', await measure(server, a, goLoad));
  record(label, 'postbacks', await measure(server, a, pbLoad(node.postbacks)));
  record(label, 'unknown', await measure(server, a, pbLoad(unknownMix)));
  record(label, 'healthz', await measure(server, a, pbLoad(healthzMix)));
  // Two generators at once; each one's latency is its own requests'.
  const [go, pb] = await Promise.all([
    measure(server, a, goLoad),
    measure(server, b, pbLoad(node.postbacks)),
  ]);
  record(label, 'flood go', go);
  record(label, 'flood postbacks', pb);
}

const children: [string, string | undefined][] = [
  ['new', undefined],
  ...(values.old === undefined
    ? []
    : [['old', resolve(values.old, 'bench/http/server-child.ts')] as [string, string]]),
];

console.log(`machine: ${machine()}`);
console.log(
  `load: autocannon; /go at ${GO_RATE}/s (10 connections), postbacks at ${PB_RATE}/s (50 connections), ` +
    `${ROUNDS} rounds of ${SECONDS} s windows, ${CLICKS} clicks × ${TXIDS} txids, ${values.postgres ? 'PostgreSQL' : 'SQLite'}`,
);

const a = await autocannonClient();
const b = await autocannonClient();
const nodes: Node[] = [];
try {
  for (const [label, child] of children) {
    const server = await startServer(`Sluice ${label}`, 'sluice', {
      scenario,
      flags,
      ...(child === undefined ? {} : { child }),
    });
    nodes.push({ label, server, postbacks: postbackMix(await clickIds(server, CLICKS)) });
  }
  // Warm-up, not counted: every conversion is inserted once, JIT and caches warm.
  for (const n of nodes) {
    await a.run({ origin: n.server.origin, ...pbLoad(n.postbacks), seconds: 2 });
    await a.run({ origin: n.server.origin, ...goLoad, seconds: 1 });
  }
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? nodes : [...nodes].reverse();
    for (const n of order) await round(n, a, b);
  }
} finally {
  for (const n of nodes) await n.server.stop();
  await a.close();
  await b.close();
}

console.log(`after: ${machine()}`);
const med = (label: string, w: Window, f: (m: Measurement) => number) =>
  median((results.get(label)?.get(w) ?? []).map(f));
const cols = children.map(([label]) => label);
console.log(`\n| figure (median of ${ROUNDS} rounds) | ${cols.join(' | ')} |`);
console.log(`|---|${cols.map(() => '---:').join('|')}|`);
const row = (what: string, f: (label: string) => string) =>
  console.log(`| ${what} | ${cols.map(f).join(' | ')} |`);
const us = (n: number) => `${n.toFixed(0)} µs`;
const ms = (n: number) => `${n.toFixed(1)} ms`;
row('`/go` p99, quiet', (l) => ms(med(l, 'quiet', (m) => m.p99Ms)));
row(`\`/go\` p99 during ${PB_RATE} postbacks/s`, (l) => ms(med(l, 'flood go', (m) => m.p99Ms)));
row('postback p99 during the flood', (l) => ms(med(l, 'flood postbacks', (m) => m.p99Ms)));
row('main-thread CPU per postback', (l) => us(med(l, 'postbacks', (m) => m.mainCpuUsPerReq)));
row('process CPU per postback (all threads)', (l) => us(med(l, 'postbacks', (m) => m.cpuUsPerReq)));
row('main-thread CPU per unknown-id postback (404)', (l) => us(med(l, 'unknown', (m) => m.mainCpuUsPerReq)));
row('main-thread CPU per `/healthz` (any request)', (l) => us(med(l, 'healthz', (m) => m.mainCpuUsPerReq)));
row('main-thread CPU per `/go` click, quiet', (l) => us(med(l, 'quiet', (m) => m.mainCpuUsPerReq)));
row('postbacks answered per second', (l) => med(l, 'postbacks', (m) => m.rps).toFixed(0));
