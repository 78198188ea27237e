/**
 * A flow with many `ip` rule values (docs/routing.md#rules, #limits): how long compiling it
 * holds the event loop, what the compiled flow keeps in memory, and what one click's decision
 * costs against it. The CIDRs are random (seeded): four in five IPv4 (prefixes /8–/32, most of
 * them /16–/24, as datacenter lists are), one in five IPv6 (/16–/128), 1,000 per rule and 50
 * rules per stream (the per-rule and per-stream limits), every rule `ip is_not` joined by `and`,
 * so that a click outside every range is judged by every rule (the worst case of a click).
 * The routing service compiles a flow, and checks a stream's rules when written, a rule at a time
 * with pauses between: "longest hold" is the most main-thread CPU time between two event-loop
 * turns meanwhile. Times are main-thread CPU time, not wall time, so that other processes on a
 * loaded machine do not count.
 *
 *   node --expose-gc bench/routing/ip-rules.bench.ts [--cidrs 100000] [--rounds 5]
 */
import { parseArgs } from 'node:util';
import { compileFlowSliced } from '../../src/routing/compiled-flow.ts';
import { compileFlow, decide, ruleProblems } from '../../src/routing/index.ts';
import { ruleProblemsSliced } from '../../src/routing/rules.ts';
import type { StreamRecord } from '../../src/storage/index.ts';
import { TimeSlice } from '../../src/time/index.ts';
import { flowRecord, streamRecord, visitor } from '../../test/helpers/records.ts';
import { median } from '../_util.ts';

const { values: args } = parseArgs({
  options: { cidrs: { type: 'string', default: '100000' }, rounds: { type: 'string', default: '5' } },
});
const CIDRS = Number(args.cidrs);
const ROUNDS = Number(args.rounds);
const PER_RULE = 1_000;
const RULES_PER_STREAM = 50;

let seed = 11;
const rand = () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed / 4294967296;
};
const int = (n: number) => Math.floor(rand() * n);
const v4 = () => `${int(224)}.${int(256)}.${int(256)}.${int(256)}`;
const v6 = () =>
  Array.from({ length: 8 }, (_, i) => (i === 0 ? 0x2000 + int(0x2000) : int(0x10000)).toString(16)).join(':');
const cidr = () => {
  if (rand() < 0.8) {
    const r = rand();
    const bits = r < 0.1 ? 8 + int(8) : r < 0.9 ? 16 + int(9) : 25 + int(8);
    return `${v4()}/${bits}`;
  }
  return `${v6()}/${16 + int(113)}`;
};
// Addresses as a rule keeps them: the network written as given (host bits may be set).
const values = Array.from({ length: CIDRS }, cidr);

const streams: StreamRecord[] = [];
for (let at = 0, i = 0; at < values.length; i++) {
  const rules = [];
  for (let r = 0; r < RULES_PER_STREAM && at < values.length; r++, at += PER_RULE)
    rules.push({ field: 'ip', op: 'is_not' as const, values: values.slice(at, at + PER_RULE) });
  streams.push(streamRecord({ id: `s${i}`, flow_id: 'f', type: 'regular', position: i, filters: { rules } }));
}
streams.push(streamRecord({ id: 'fallback', flow_id: 'f', type: 'default', position: 0 }));
const flow = flowRecord({ id: 'f', slug: 'ips' });
// As rows arrive from a database driver: flat strings from JSON.
const rows = (): StreamRecord[] => JSON.parse(JSON.stringify(streams));

const gc = (globalThis as { gc?: () => void }).gc;
const settle = () => {
  gc?.();
  gc?.();
  return process.memoryUsage();
};
const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MB`;
/** Main-thread CPU time, ms: what a piece of work costs whatever else the machine runs. */
const cpu = () => {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1000;
};
/** The most main-thread CPU time (ms) between two event-loop turns while `work` runs. */
async function longestHold(work: () => Promise<unknown>): Promise<number> {
  let last = cpu();
  let max = 0;
  let on = true;
  const tick = () => {
    const now = cpu();
    max = Math.max(max, now - last);
    last = now;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  on = false;
  return Math.max(max, cpu() - last);
}

console.log(
  `ip rules: ${CIDRS.toLocaleString('en')} CIDRs in ${streams.length - 1} streams (${PER_RULE} a rule, ${RULES_PER_STREAM} rules a stream)${gc ? '' : ' — run with --expose-gc for settled figures'}`,
);

// Write-time checks (what one stream's create or update runs), per stream.
{
  const times: number[] = [];
  for (const s of streams.slice(0, -1)) {
    const t0 = cpu();
    const problems = ruleProblems(s.filters);
    times.push(cpu() - t0);
    if (problems.length > 0) throw new Error(`generated values refused: ${problems[0]!.message}`);
  }
  const holds: number[] = [];
  for (const s of streams.slice(0, Math.min(ROUNDS, streams.length - 1)))
    holds.push(await longestHold(() => ruleProblemsSliced(s.filters, new TimeSlice())));
  console.log(
    `  write-time checks of one stream of ${Math.min(CIDRS, PER_RULE * RULES_PER_STREAM).toLocaleString('en')} values: ${median(times).toFixed(1)} ms median in one go (${Math.max(...times).toFixed(1)} ms max, the first cold); a rule at a time, longest hold ${median(holds).toFixed(1)} ms median`,
  );
}

let compiled: ReturnType<typeof compileFlow>;
// Memory the compiled flow keeps beside its input rows (measured first: a heap that has compiled
// before keeps pages it would reuse).
{
  const input = rows();
  const before = settle();
  compiled = compileFlow(flow, input);
  const after = settle();
  console.log(
    `  memory kept by the compiled flow: heap ${mb(after.heapUsed - before.heapUsed)}, external ${mb(after.external - before.external)}, rss ${mb(after.rss - before.rss)}`,
  );
}

// Compile: in one synchronous call (the whole compile holds the event loop), then as the node does.
{
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const input = rows();
    settle();
    const t0 = cpu();
    compiled = compileFlow(flow, input);
    times.push(cpu() - t0);
  }
  const holds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const input = rows();
    settle();
    holds.push(await longestHold(() => compileFlowSliced(flow, input, () => undefined, new TimeSlice())));
  }
  console.log(
    `  compile in one go: ${median(times).toFixed(1)} ms median, ${Math.max(...times).toFixed(1)} ms max of ${ROUNDS}; a rule at a time (as the node does), longest hold ${median(holds).toFixed(1)} ms median, ${Math.max(...holds).toFixed(1)} ms max`,
  );
}

// One click: decide() for addresses outside every range, so every rule is judged.
{
  const addresses = Array.from({ length: 1024 }, (_, i) => (i % 2 ? v6() : v4()));
  const visitors = addresses.map((client) => visitor('DE', { client }));
  const N = Math.max(200, Math.min(200_000, Math.round(2e9 / CIDRS / 50)));
  let sink = 0;
  const times: number[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) sink += decide(compiled, visitors[i & 1023]!, Math.random)?.weight ?? 0;
    if (r > 0) times.push(((performance.now() - t0) * 1e6) / N);
  }
  const ruleCount = Math.ceil(CIDRS / PER_RULE);
  console.log(
    `  one click judged by all ${ruleCount} ip rules: ${(median(times) / 1000).toFixed(2)} µs median (${(median(times) / ruleCount).toFixed(0)} ns a rule)${sink < 0 ? '' : ''}`,
  );
}
