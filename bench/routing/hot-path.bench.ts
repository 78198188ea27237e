/**
 * `GET /go/:slug` on real Sluice nodes, one per scenario, against reference programs that do the
 * same job (bench/http/peers/: fastify, the flows in a map, the country from the trusted header, a
 * click id made as Sluice's, the user agent classified through an LRU cache, every click written
 * in batches: `ref-ua` to SQLite from a worker thread, `ref-ua-pg` to PostgreSQL), and against
 * fixed-302 peers (bare `node:http`, bare fastify, nginx `return 302` where installed), all
 * measured in the same run. Every server runs in its own process and the load generator in
 * another; the headline is each server's own CPU µs per request (all its threads), with req/s
 * beside it, medians over interleaved rounds. Bare fastify is the base: every other server's window
 * is paired with a fastify window right next to it. The first table is the headline, Sluice ÷ the
 * reference on each scenario (each over its paired fastify window, then round by round); on
 * PostgreSQL it adds the database backends' CPU (read from /proc, see `pgBackendsCpuUs` in
 * bench/http/load.ts). The last table splits each server's CPU by thread (main, the SQLite writer,
 * V8's helper threads: GC and compilation).
 *
 *   node bench/routing/hot-path.bench.ts [--rounds 5] [--seconds 1] [--warmup 1] [--connections 50]
 *        [--client auto|wrk|autocannon] [--only light,mixed] [--old DIR] [--rate N] [--postgres]
 *
 * `--postgres` also runs each scenario on a node whose storage is PostgreSQL (a schema of its own
 * at `SLUICE_TEST_PG_URL`), beside `ref-ua-pg`; the server CPU columns are the process alone, the
 * database backends' CPU is in the headline table's last column and the thread table.
 *
 * `--rate N` offers every server about N requests a second instead of all it can take: CPU per
 * request near one load (wrk waits a fixed think time after each answer, so the rate reached, in
 * the req/s column, is a little lower for a slower server). At saturation a slower server's figure
 * also carries the cost of waking the idle load generator on every answer (loopback runs the
 * client's receive path in the server's write), which a server answering remote clients does not
 * pay; docs/PERFORMANCE.md has the figures.
 *
 * `--client auto` (the default) uses wrk when installed (Debian: `apt-get install -y wrk`): it
 * spends a fraction of autocannon's CPU per request, so more of the two cores is left to the
 * servers. About two minutes with the defaults; `--rounds 11 --seconds 2` for a steadier figure.
 *
 * `--old DIR` also runs each scenario on the Sluice of another checkout (a before/after in one run):
 *   git worktree add /tmp/hot-old main && ln -s "$PWD/node_modules" /tmp/hot-old/node_modules
 *   node bench/routing/hot-path.bench.ts --old /tmp/hot-old ; git worktree remove --force /tmp/hot-old
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type BenchServer,
  type Entry,
  interleave,
  loadClient,
  type Measurement,
  machine,
  median,
  roundRatio,
  startNginx,
  startServer,
} from '../http/load.ts';
import { pickScenarios, requestMix, type SluiceScenario } from '../http/scenarios.ts';

const { values } = parseArgs({
  options: {
    // Short windows: on shared cores the other load comes and goes within seconds; each Sluice
    // window is paired with a bare fastify one right next to it.
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '1' },
    connections: { type: 'string', default: '50' },
    client: { type: 'string', default: 'auto' },
    only: { type: 'string' },
    old: { type: 'string' },
    rate: { type: 'string' },
    postgres: { type: 'boolean', default: false },
  },
});

const scenarios = pickScenarios(values.only?.split(','), values.postgres);

const opts = {
  rounds: Number(values.rounds),
  window: { seconds: Number(values.seconds) },
  warmup: { seconds: Number(values.warmup) },
  connections: Number(values.connections),
  rate: values.rate === undefined ? undefined : Number(values.rate),
};
const client = await loadClient(values.client);
console.log(`machine: ${machine()}`);
console.log(
  `load: ${client.name}, ${opts.connections} connections${opts.rate === undefined ? '' : ` offering ${opts.rate} req/s`}, warm-up ${values.warmup} s each, ` +
    `${opts.rounds} interleaved rounds × ${values.seconds} s`,
);

const peerMix = { paths: ['/go/bench'] };
const nginx = await startNginx('nginx return 302');
if (typeof nginx === 'string') console.log(`nginx skipped: ${nginx}`);
// The Sluice nodes start (and seed) side by side; the peers are quick.
const oldChild = values.old === undefined ? undefined : resolve(values.old, 'bench/http/server-child.ts');
/**
 * Each scenario on this checkout's Sluice, on the old one's when asked, and on the reference
 * program doing the same job (bench/http/peers/: `ref-ua`, or `ref-ua-pg` on PostgreSQL).
 */
interface Run {
  name: string;
  what: string;
  scenario: SluiceScenario;
  variant: 'sluice' | 'ref-ua' | 'ref-ua-pg';
  child?: string;
}
const runs: Run[] = scenarios.flatMap(([name, what, scenario]): Run[] => [
  { name: `Sluice ${name}`, what, scenario, variant: 'sluice' },
  ...(oldChild === undefined
    ? []
    : [{ name: `old Sluice ${name}`, what, scenario, variant: 'sluice' as const, child: oldChild }]),
  {
    name: `reference ${name}`,
    what: `${what}; the same job in a plain program`,
    scenario,
    variant: scenario.backend === 'postgres' ? 'ref-ua-pg' : 'ref-ua',
  },
]);
const [http, fastify, ...sluice] = await Promise.all([
  startServer('node:http 302', 'node-http-302'),
  startServer('fastify 302', 'fastify-302'),
  ...runs.map(({ name, scenario, variant, child }) =>
    startServer(name, variant, child === undefined ? { scenario } : { scenario, child }),
  ),
]);
const servers: BenchServer[] = [http!, fastify!, ...(typeof nginx === 'string' ? [] : [nginx]), ...sluice];
const entries: Entry[] = [
  { server: http!, mix: peerMix },
  { server: fastify!, mix: peerMix },
  ...(typeof nginx === 'string' ? [] : [{ server: nginx, mix: peerMix }]),
  ...runs.map(({ scenario }, i) => ({ server: sluice[i]!, mix: requestMix(scenario) })),
];

const base = entries[1]!;
let results: Awaited<ReturnType<typeof interleave>>;
try {
  results = await interleave(entries, client, {
    ...opts,
    base,
    onMeasure: (round, e, m, mix) =>
      process.stderr.write(
        `  round ${round + 1} ${(mix === e.mix ? e.server.name : `${e.server.name} (their requests)`).padEnd(40)} ${m.cpuUsPerReq.toFixed(1).padStart(6)} µs/req (main thread ${m.mainCpuUsPerReq.toFixed(1).padStart(6)}) ${m.rps.toFixed(0).padStart(6)} req/s\n`,
      ),
  });
} finally {
  await client.close();
  await Promise.all(servers.map((s) => s.stop()));
}

console.log(`after: ${machine()}`);
/** A figure, or a dash where it does not apply (nginx has no main thread to read). */
const orDash = (n: number, digits: number) => (Number.isNaN(n) ? '—' : n.toFixed(digits));
const mainCpu = (m: Measurement) => m.mainCpuUsPerReq;
const notFounds = new Set(sluice.filter((_, i) => runs[i]!.scenario.unknown !== undefined));
const about = new Map<string, string>(runs.map(({ name, what }) => [name, what]));
/**
 * The headline: Sluice ÷ the reference program on the same scenario, each first taken over its
 * paired bare fastify window, then Sluice's over the reference's round by round (as new ÷ old).
 */
const at = (label: string) => entries.find((e) => e.server.name === label)!;
const norm = (e: Entry, f: (m: Measurement) => number) =>
  results.of.get(e)!.map((m, i) => f(m) / f(results.baseOf.get(e)![i]!));
const cpu = (m: Measurement) => m.cpuUsPerReq;
const withDb = (m: Measurement) => m.cpuUsPerReq + (Number.isNaN(m.dbCpuUsPerReq) ? 0 : m.dbCpuUsPerReq);
/** Normalised by the fastify window's process CPU alone (a fastify window has no database). */
const normDb = (e: Entry) =>
  results.of.get(e)!.map((m, i) => withDb(m) / results.baseOf.get(e)![i]!.cpuUsPerReq);
const ofRounds = (a: number[], b: number[]) => {
  const r = a.map((x, i) => x / b[i]!);
  return `${median(r).toFixed(2)} (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)})`;
};
console.log(
  '\n| scenario | Sluice CPU-µs/req | reference CPU-µs/req | **Sluice ÷ reference** (process, median of rounds, range) | main thread: Sluice, reference, ÷ | with the database backends: Sluice, reference, ÷ |',
);
console.log('|---|---:|---:|---:|---|---|');
for (const [name] of scenarios) {
  const [sl, ref] = [at(`Sluice ${name}`), at(`reference ${name}`)];
  const [a, b] = [results.of.get(sl)!, results.of.get(ref)!];
  const med = (ms: Measurement[], f: (m: Measurement) => number) => median(ms.map(f));
  const db = !Number.isNaN(med(a, (m) => m.dbCpuUsPerReq));
  console.log(
    `| ${name} | ${med(a, cpu).toFixed(1)} | ${med(b, cpu).toFixed(1)} | **${ofRounds(norm(sl, cpu), norm(ref, cpu))}** | ` +
      `${med(a, mainCpu).toFixed(1)}, ${med(b, mainCpu).toFixed(1)}, ${ofRounds(norm(sl, mainCpu), norm(ref, mainCpu))} | ` +
      `${db ? `${med(a, withDb).toFixed(1)}, ${med(b, withDb).toFixed(1)}, ${ofRounds(normDb(sl), normDb(ref))}` : '—'} |`,
  );
}

console.log(
  '\n| server | scenario | server CPU-µs/req | bare fastify on the same requests | × bare fastify (CPU) | main thread CPU-µs/req | × bare fastify (main) | req/s | × bare fastify (req/s) | p99 ms | answers not 2xx/3xx |',
);
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
/** Bare fastify's own row: its windows on its own requests (those paired with the other peers). */
const onOwnRequests = (e: Entry) =>
  e !== base
    ? results.of.get(e)!
    : entries.filter((p) => p !== base && p.mix === base.mix).flatMap((p) => results.baseOf.get(p)!);
for (const e of entries) {
  const ms = onOwnRequests(e);
  const paired = e === base ? ms : results.baseOf.get(e)!;
  const other = ms.reduce((n, m) => n + m.load.bad, 0);
  const notFound = notFounds.has(e.server);
  console.log(
    `| ${e.server.name} | ${about.get(e.server.name) ?? 'fixed 302, one path'} | ${median(ms.map((m) => m.cpuUsPerReq)).toFixed(1)} | ` +
      `${median(paired.map((m) => m.cpuUsPerReq)).toFixed(1)} | ` +
      `${roundRatio(ms, paired, (m) => m.cpuUsPerReq).toFixed(2)} | ` +
      `${orDash(median(ms.map(mainCpu)), 1)} | ${orDash(roundRatio(ms, paired, mainCpu), 2)} | ` +
      `${median(ms.map((m) => m.rps)).toFixed(0)} | ` +
      `${roundRatio(ms, paired, (m) => m.rps).toFixed(2)} | ${median(ms.map((m) => m.p99Ms)).toFixed(1)} | ` +
      `${notFound ? `all (404, as expected)` : other} |`,
  );
  // Everything else must be a redirect, or the figure is not what it says.
  if (notFound ? other < ms.reduce((n, m) => n + m.load.answered, 0) : other > 0) process.exitCode = 1;
  // So must bare fastify's every answer on the requests it was paired on (a fixed 302 for any path).
  const baseBad = paired.reduce((n, m) => n + m.load.bad, 0);
  if (baseBad > 0) {
    console.error(`bare fastify answered ${baseBad} of ${e.server.name}'s requests with no 302`);
    process.exitCode = 1;
  }
}

// Where each Node server's CPU goes, by thread (from /proc, clock ticks: medians of its windows).
const kinds = [
  ...new Set(entries.flatMap((e) => results.of.get(e)!.flatMap((m) => Object.keys(m.threadsUsPerReq)))),
]
  .filter((k) => k !== 'other')
  .sort((x, y) => (x === 'main' ? -1 : y === 'main' ? 1 : x.localeCompare(y)));
console.log(
  `\n| server | ${kinds.map((k) => `${k} µs/req`).join(' | ')} | other threads | database backends |`,
);
console.log(`|---|${kinds.map(() => '---:|').join('')}---:|---:|`);
for (const e of entries) {
  const ms = onOwnRequests(e);
  const t = (k: string) => median(ms.map((m) => m.threadsUsPerReq[k] ?? 0));
  console.log(
    `| ${e.server.name} | ${kinds.map((k) => t(k).toFixed(1)).join(' | ')} | ${t('other').toFixed(1)} | ${orDash(median(ms.map((m) => m.dbCpuUsPerReq)), 1)} |`,
  );
}

if (oldChild !== undefined) {
  // Each side's CPU over its own paired fastify window, then new over old, round by round.
  console.log('\n| scenario | new ÷ old server CPU-µs/req (median of rounds) | range over rounds |');
  console.log('|---|---:|---|');
  for (const [name] of scenarios) {
    const [now, old] = [at(`Sluice ${name}`), at(`old Sluice ${name}`)];
    const [a, b] = [norm(now, cpu), norm(old, cpu)];
    const ratios = a.map((x, i) => x / b[i]!);
    console.log(
      `| ${name} | ${median(ratios).toFixed(2)} | ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)} |`,
    );
  }
}
