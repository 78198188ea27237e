/**
 * The click log under a node's full `/go` rate (#14: "under 60 s of HTTP load at the node's full
 * `/go` rate every click is persisted — count them — and the buffer stays bounded").
 *
 *   node bench/clicks/sustained-load.bench.ts [--seconds 60] [--only light,mixed] [--postgres]
 *        [--connections 50] [--client auto|wrk|autocannon] [--subs 50000]
 *
 * Each scenario (bench/http/scenarios.ts) gets a fresh node of its own (bench/http/server-child.ts:
 * `startNode` with the shipped defaults, SQLite in a temp dir, or with `--postgres` also a schema
 * of its own on `SLUICE_TEST_PG_URL`), and the load generator in another process sends it all it
 * can take for `--seconds`, a third of the requests with `?sub1=` drawn from `--subs` values (what
 * the log's `clicks_sub1` index is keyed by: the costliest to keep at scale). Every second the harness reads the node's click log figures (buffered,
 * sent and not yet acknowledged, persisted, dropped); when the load ends it waits for the log to
 * empty and counts the clicks table on a connection of its own. Every request the node received is
 * a click (a redirect, a bot or a no-match: all are logged), so the table must hold exactly as many
 * rows as requests, with nothing dropped. The process exits 1 when it does not.
 *
 * The node's RSS is sampled with the click figures (start, peak, and once the log emptied).
 *
 * The log starts empty and ends holding everything the run sent (~2 million clicks in 60 s at the
 * light scenario's rate), so the second half of a run is the click log at scale.
 */
import { parseArgs } from 'node:util';
import type { ClicksSection } from '../../src/telemetry/index.ts';
import { fmt } from '../_util.ts';
import { loadClient, machine, startServer } from '../http/load.ts';
import { pickScenarios, requestMix } from '../http/scenarios.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    only: { type: 'string', default: 'light,mixed' },
    postgres: { type: 'boolean', default: false },
    connections: { type: 'string', default: '50' },
    client: { type: 'string', default: 'auto' },
    subs: { type: 'string', default: '50000' },
  },
});
const SECONDS = Number(values.seconds);
/** sub1 values a third of the requests draw from (0: none). */
const SUBS = Number(values.subs);
/** How long the log may take to empty once the load ends before the run is called a failure. */
const DRAIN_LIMIT_MS = 120_000;

// A scenario of unknown slugs has no clicks to count.
const runs = pickScenarios(values.only.split(','), values.postgres, (s) => s.unknown === undefined);
if (runs.length === 0) throw new Error(`no scenario named ${values.only}`);

const client = await loadClient(values.client);
console.log(`machine: ${machine()}`);
console.log(`load: ${client.name}, ${values.connections} connections, all a node takes for ${SECONDS} s`);

const held = (s: ClicksSection) => s.buffered + s.unacked;

interface Row {
  name: string;
  what: string;
  rps: number;
  persistedPerS: number;
  maxHeld: number;
  maxHeldAt: number;
  bufferMax: number;
  drainS: number;
  requests: number;
  rows: number;
  sub1: number;
  dropped: number;
  failed: number;
  /** At the start, the most sampled, and once the log emptied. */
  rssMb: [number, number, number];
}

const rows: Row[] = [];
try {
  for (const [name, what, scenario] of runs) {
    const server = await startServer(`Sluice ${name}`, 'sluice', { scenario });
    try {
      const s0 = await server.stats();
      const rows0 = await server.clickRows();
      const k0 = await server.clicks();
      const mix = requestMix(SUBS > 0 ? { ...scenario, subs: SUBS } : scenario);
      let maxHeld = 0;
      let maxHeldAt = 0;
      let peakRss = s0.rss;
      let loading = true;
      const t0 = performance.now();
      const load = client
        .run({ origin: server.origin, mix, connections: Number(values.connections), seconds: SECONDS })
        .finally(() => {
          loading = false;
        });
      // Sampled once a second while the load runs: the buffer must stay bounded, not only end empty.
      while (loading) {
        await new Promise((r) => setTimeout(r, 1000));
        const k = await server.clicks();
        peakRss = Math.max(peakRss, (await server.stats()).rss);
        if (held(k) > maxHeld) {
          maxHeld = held(k);
          maxHeldAt = (performance.now() - t0) / 1000;
        }
        process.stderr.write(
          `  ${name} ${((performance.now() - t0) / 1000).toFixed(0).padStart(3)} s: ${fmt(k.persisted - k0.persisted)} persisted, ` +
            `${fmt(k.buffered)} buffered, ${fmt(k.unacked)} unacked, ${fmt(k.dropped)} dropped\n`,
        );
      }
      const result = await load;
      const s1 = await server.stats();
      const k1 = await server.clicks();
      const loadS = (performance.now() - t0) / 1000;
      const end = performance.now();
      let k = k1;
      while (held(k) > 0 && performance.now() - end < DRAIN_LIMIT_MS) {
        await new Promise((r) => setTimeout(r, 100));
        k = await server.clicks();
      }
      const drainS = (performance.now() - end) / 1000;
      const s2 = await server.stats();
      const requests = s2.requests - s0.requests;
      const counted = await server.clickRows();
      const stored = counted.all - rows0.all;
      rows.push({
        name,
        what,
        rps: (s1.requests - s0.requests) / loadS,
        persistedPerS: (k1.persisted - k0.persisted) / loadS,
        maxHeld,
        maxHeldAt,
        bufferMax: k.buffer_max,
        drainS,
        requests,
        rows: stored,
        sub1: counted.sub1 - rows0.sub1,
        dropped: k.dropped - k0.dropped,
        failed: k.failed_flushes - k0.failed_flushes,
        rssMb: [s0.rss / 2 ** 20, Math.max(peakRss, s2.rss) / 2 ** 20, s2.rss / 2 ** 20],
      });
      if (stored !== requests || k.dropped !== k0.dropped || held(k) > 0 || result.bad > 0) {
        console.log(
          `  ${name}: FAILED: ${fmt(requests)} requests, ${fmt(stored)} clicks stored, ${fmt(k.dropped - k0.dropped)} dropped, ` +
            `${fmt(held(k))} still held, ${fmt(result.bad)} bad answers`,
        );
        process.exitCode = 1;
      }
    } finally {
      await server.stop();
    }
  }
} finally {
  await client.close();
}

console.log(`after: ${machine()}`);
console.log(
  '\n| scenario | req/s | clicks persisted/s under load | most held (buffered + unacked) | at | `buffer_max` | emptied after the load in | requests | clicks stored (with sub1) | dropped | failed flushes | RSS start → peak → end |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(
    `| ${r.name}: ${r.what} | ${fmt(r.rps)} | ${fmt(r.persistedPerS)} | ${fmt(r.maxHeld)} | ${r.maxHeldAt.toFixed(0)} s | ${fmt(r.bufferMax)} | ` +
      `${r.drainS.toFixed(1)} s | ${fmt(r.requests)} | ${fmt(r.rows)} (${fmt(r.sub1)}) | ${fmt(r.dropped)} | ${r.failed} | ` +
      `${r.rssMb.map((mb) => mb.toFixed(0)).join(' → ')} MB |`,
  );
}
