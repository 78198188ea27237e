/**
 * A whole node (SQLite, in this process) filled to a flow's limits through its ACP
 * (docs/routing.md#limits): two streams of 50 `ip` rules of 1,000 blocks each, the 100,000 a flow
 * may hold, then the click that compiles the flow, then one stream more, which is refused. For
 * each request, the longest stretch of main-thread CPU between two event-loop turns while it ran:
 * how long the node could answer no other request (CPU, not wall time, so that other processes on
 * a loaded machine do not count). The request parses and schema-checks its ~0.97 MB body in one
 * go; the rules are checked, and the flow compiled, a rule at a time.
 *
 *   node bench/routing/flow-limits-node.bench.ts
 */
import { startTestNode } from '../../test/helpers/node.ts';

/** The longest main-thread CPU stretch (ms) between two event-loop turns until `stop()`. */
function holdProbe(): { stop(): number } {
  const cpu = () => {
    const u = process.threadCpuUsage();
    return (u.user + u.system) / 1000;
  };
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
  return {
    stop: () => {
      on = false;
      return Math.max(max, cpu() - last);
    },
  };
}

let seed = 5;
const rand = (m: number) => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return Math.floor((seed / 4294967296) * m);
};
const block = () =>
  rand(2) ? `${1 + rand(222)}.${rand(256)}.${rand(256)}.0/24` : `2001:db8:${rand(65536).toString(16)}::/48`;
const filters = () => ({
  logic: 'or',
  rules: Array.from({ length: 50 }, () => ({
    field: 'ip',
    op: 'is',
    values: Array.from({ length: 1000 }, block),
  })),
});

const t = await startTestNode({});
try {
  const admin = await t.token('admin');
  const flow = (await (
    await t.acp('/acp/traffic-flows/create', admin, { slug: 'limits', name: 'limits' })
  ).json()) as {
    id: string;
  };
  const measure = async (what: string, request: () => Promise<Response>) => {
    const probe = holdProbe();
    const t0 = performance.now();
    const res = await request();
    await res.arrayBuffer();
    const wall = performance.now() - t0;
    console.log(
      `  ${what}: ${res.status} in ${wall.toFixed(0)} ms, longest hold ${probe.stop().toFixed(1)} ms`,
    );
  };
  console.log('a flow filled to its limits through the ACP of a SQLite node');
  for (const [i, what] of ['first stream of 50,000 blocks', 'second (the flow holds 100,000)'].entries()) {
    const body = {
      flow_id: flow.id,
      name: `s${i}`,
      type: 'regular',
      target_url: 'https://x.test/',
      filters: filters(),
    };
    await measure(what, () => t.acp('/acp/streams/create', admin, body));
  }
  await measure('the click that compiles the flow', () =>
    fetch(`${t.url}/go/limits`, {
      redirect: 'manual',
      headers: {
        'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0',
        'x-forwarded-for': '8.8.8.8',
      },
    }),
  );
  const more = {
    flow_id: flow.id,
    name: 'more',
    type: 'regular',
    target_url: 'https://x.test/',
    filters: filters(),
  };
  await measure('a third stream of 50,000 (refused: past the limit)', () =>
    t.acp('/acp/streams/create', admin, more),
  );
} finally {
  await t.close();
}
