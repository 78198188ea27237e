import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { stallClients } from '../../test/helpers/stall.ts';
import { until as waitUntil } from '../../test/helpers/until.ts';
import {
  type Cluster,
  check,
  closedLoop,
  type NodeProcess,
  type Outcome,
  PERSON,
  Phases,
  percentile,
  persistedHits,
  seedFlow,
  sleep,
  startCluster,
} from '../harness.ts';

const TTL = 3000;
const RENEW = 1000;

interface Metrics {
  host: { is_leader: boolean; event_loop: { delay_p99_ms: number } };
  db: { status: string };
  tasks: Record<
    string,
    { runs: number; failures: number; p95_duration_ms: number; last_error: string | null }
  >;
}

const metrics = async (c: Cluster, n: NodeProcess) => (await c.acp<Metrics>(n, '/acp/system/metrics')).body;

/** Polls until `fn` holds; a call that fails (the database is away) counts as not yet. */
const until = (what: string, fn: () => Promise<boolean>, limitMs: number) =>
  waitUntil(what, () => fn().catch(() => false), limitMs, 50);

/**
 * Stops and starts the machine's own PostgreSQL cluster (`pg_ctlcluster`, as root on a Debian
 * box). Only `npm run soak -- db-outage --real-pg` does this; it takes the server away from
 * everything else on the machine for the outage.
 */
function realPostgres(): { down(): Promise<void>; up(): Promise<void> } {
  const version = readdirSync('/etc/postgresql')[0]!;
  const ctl = (action: string) =>
    execFileSync(
      'pg_ctlcluster',
      ['--skip-systemctl-redirect', version, 'main', action, ...(action === 'stop' ? ['-m', 'fast'] : [])],
      {
        stdio: 'inherit',
      },
    );
  return {
    down: async () => {
      ctl('stop');
    },
    up: async () => {
      ctl('start');
      execFileSync('pg_isready', ['-q', '-t', '30', '-h', '127.0.0.1', '-p', '5432']);
    },
  };
}

/**
 * PostgreSQL taken away for `seconds` mid-load (a TCP proxy drops every connection and refuses new
 * ones; with `realPg`, the server itself is stopped and restarted): the hot path keeps serving from cache, the ACP answers 503 db.unavailable, the leader
 * steps down, counters wait in memory; after the database returns, one node is re-elected and
 * every counted click is persisted.
 */
export async function dbOutage(o: { seconds: number; realPg?: boolean }): Promise<Outcome> {
  const out: Outcome = {
    scenario: o.realPg ? 'db-outage (server stopped)' : 'db-outage',
    figures: {},
    checks: [],
  };
  const c = await startCluster({
    ids: ['db-a', 'db-b'],
    proxy: true,
    leaseTtlMs: TTL,
    renewIntervalMs: RENEW,
  });
  const outage = o.realPg ? realPostgres() : c.proxy!;
  try {
    const flowId = await seedFlow(c.store, 'steady');
    // One click per node first, so the flow is in both caches when the database goes away.
    let warmClicks = 0;
    for (const n of c.nodes) {
      const r = await fetch(`${n.url}/go/steady`, { redirect: 'manual', headers: PERSON });
      await r.body?.cancel();
      if (r.status === 302) warmClicks++;
    }
    // The ACP is judged per phase, by requests sent *and* answered within it: 'recovering' runs
    // from the database's return until both nodes have confirmed it (a leader again, the database
    // up on both), and only what was sent after that must answer 200.
    type Phase = 'before' | 'outage' | 'recovering' | 'after';
    const phases = new Phases<Phase>('before');
    const tally = () => ({ before: {}, outage: {}, recovering: {}, after: {}, straddling: {} });
    const go: Record<Phase | 'straddling', Record<string, number>> = tally();
    const acp: Record<Phase | 'straddling', Record<string, number>> = tally();
    const bump = (t: Record<string, Record<string, number>>, k: number | string, sentAt: number) => {
      const p = t[phases.of(sentAt)]!;
      p[k] = (p[k] ?? 0) + 1;
    };
    let done = false;
    const loads = c.nodes.map((n) =>
      closedLoop({
        url: n.url,
        paths: () => '/go/steady',
        workers: 10,
        until: () => done,
        onAnswer: (a, sentAt) => bump(go, a, sentAt),
      }),
    );
    const prober = (async () => {
      while (!done) {
        for (const n of c.nodes) {
          const sentAt = performance.now();
          const r = await c.acp<{ error?: { code: string } }>(n, '/acp/traffic-flows/list', { limit: 1 });
          bump(acp, r.status === 200 ? 200 : `${r.status} ${r.body.error?.code}`, sentAt);
        }
        await sleep(200);
      }
    })();
    const leaders = async () =>
      (await Promise.all(c.nodes.map((n) => metrics(c, n)))).filter((m) => m.host.is_leader).length;

    await sleep(3000);
    const leadersBefore = await leaders();
    phases.enter('outage');
    const downAt = performance.now();
    await outage.down();
    await until('leader steps down', async () => (await leaders()) === 0, TTL + RENEW + 2000);
    // From the moment the database began to go (a real stop takes a while to return).
    const stepDown = performance.now() - downAt;
    await sleep(Math.max(0, o.seconds * 1000 - (performance.now() - downAt)));
    phases.enter('recovering');
    await outage.up();
    const reelected = await until('one leader again', async () => (await leaders()) === 1, 30_000);
    await until(
      'database up on both',
      async () => (await Promise.all(c.nodes.map((n) => metrics(c, n)))).every((m) => m.db.status === 'up'),
      30_000,
    );
    phases.enter('after');
    await sleep(3000);
    done = true;
    const tallies = await Promise.all(loads);
    await prober;
    const exits = await Promise.all(c.nodes.map((n) => n.stop('SIGTERM')));
    const redirects = warmClicks + tallies.reduce((n, t) => n + t.count(302), 0);
    const persisted = await persistedHits(c.store, flowId);

    const outageAcp = Object.entries(acp.outage);
    // Sent before recovery was confirmed: a 503 is as right as a 200, anything else is not.
    const unsettledAcp = Object.entries({ ...acp.recovering, ...acp.straddling });
    out.figures = {
      'outage s': o.seconds,
      '302s before / during / after': `${go.before[302] ?? 0} / ${go.outage[302] ?? 0} / ${go.after[302] ?? 0}`,
      'go non-302 answers': tallies.reduce((n, t) => n + t.answered - t.count(302) + t.failed, 0),
      'acp during outage': outageAcp.map(([k, v]) => `${k}: ${v}`).join(', '),
      'acp after recovery': Object.entries(acp.after)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', '),
      'leader stepped down after ms': Math.round(stepDown),
      're-elected after recovery ms': Math.round(reelected),
      '302s seen': redirects,
      'hits persisted': persisted.hits,
    };
    check(out, 'exactly one leader before the outage', leadersBefore === 1, leadersBefore);
    check(out, 'the hot path kept redirecting during the outage', (go.outage[302] ?? 0) > 0, go.outage);
    check(
      out,
      '/go answered only 302s, before, during and after',
      tallies.every((t) => t.answered === t.count(302) && t.failed === 0),
      tallies.map((t) => t.toJSON()),
    );
    check(
      out,
      'the ACP answered 503 db.unavailable during the outage, nothing else failing',
      outageAcp.every(([k]) => k === '200' || k === '503 db.unavailable') &&
        (acp.outage['503 db.unavailable'] ?? 0) > 0,
      acp.outage,
    );
    check(
      out,
      'the ACP answered 200 after recovery',
      Object.keys(acp.after).every((k) => k === '200') && (acp.after['200'] ?? 0) > 0,
      acp.after,
    );
    check(
      out,
      'while the database came back, the ACP answered 200 or 503 db.unavailable, nothing else',
      unsettledAcp.every(([k]) => k === '200' || k === '503 db.unavailable'),
      { recovering: acp.recovering, straddling: acp.straddling },
    );
    check(
      out,
      'the leader stepped down within lease TTL + renew interval',
      stepDown <= TTL + RENEW + 500,
      stepDown,
    );
    check(
      out,
      'both nodes exit 0 on SIGTERM',
      exits.every((e) => e === 0),
      exits,
    );
    check(out, 'clicks counted during the outage were persisted after it', persisted.hits === redirects, {
      ...persisted,
      redirects,
    });
    return out;
  } finally {
    await c.close();
  }
}

/**
 * SIGTERM to the leader mid-load: it stops accepting, answers what it accepted, flushes its
 * counters and releases the lease, so the follower takes over without waiting for the TTL.
 */
const STALLED = 20;

export async function sigterm(o: { seconds: number }): Promise<Outcome> {
  const out: Outcome = { scenario: 'sigterm', figures: {}, checks: [] };
  const c = await startCluster({ ids: ['term-a', 'term-b'], leaseTtlMs: TTL, renewIntervalMs: RENEW });
  try {
    const [a, b] = c.nodes as [NodeProcess, NodeProcess];
    await until('term-a leads', async () => (await metrics(c, a)).host.is_leader, 10_000);
    const flowId = await seedFlow(c.store, 'term');
    let exited = false;
    const workers = 50;
    const load = closedLoop({ url: a.url, paths: () => '/go/term', workers, until: () => exited });
    await sleep((o.seconds * 1000) / 2);
    // Clients stalled mid-request must not hold the stop past its deadline, nor cost a click.
    const stalled = await stallClients(a.url, STALLED);
    const t0 = performance.now();
    const code = await a.stop('SIGTERM');
    const stopMs = performance.now() - t0;
    for (const s of stalled) s.destroy();
    // Read at once: a released lease is expired now; one left to lapse would still be term-a's
    // for up to a TTL after its last renewal.
    const lease = await c.store.cluster.currentLease();
    exited = true;
    const takeover = await until('term-b leads', async () => (await metrics(c, b)).host.is_leader, TTL * 3);
    const tally = await load;
    const persisted = await persistedHits(c.store, flowId);
    const refused = tally.byError.get('ECONNREFUSED') ?? 0;
    const cut = tally.failed - refused;
    out.figures = {
      '302s seen': tally.count(302),
      'hits persisted': persisted.hits,
      'not accepted after SIGTERM': JSON.stringify(Object.fromEntries(tally.byError)),
      'graceful stop ms': Math.round(stopMs),
      'clients stalled mid-request at the stop': STALLED,
      'closed at the deadline, as the node logged': a.logs
        .filter((l) => l.message === 'connections closed at the stop deadline')
        .map((l) => l.stalled)
        .join(','),
      'lease right after the exit': lease ? `${lease.holder} until ${lease.expires_at}` : 'none (released)',
      'follower leads, ms after the exit': Math.round(takeover),
    };
    // The node exits 1 by its own timer when a stop overruns shutdown_timeout_ms + 1 s.
    check(out, `exit 0 with ${STALLED} clients stalled mid-request`, code === 0, code);
    check(out, 'only 302s answered', tally.answered === tally.count(302), tally.toJSON());
    check(out, 'every request it served was counted and persisted', persisted.hits === tally.count(302), {
      ...persisted,
      seen: tally.count(302),
    });
    // After the listener closes, new connections are refused. A request racing the close of an idle
    // keep-alive connection can see a reset — at most once per client; more would mean requests the
    // node had accepted were dropped.
    check(
      out,
      'no accepted request dropped (at most one reset per client, the rest refused)',
      cut <= workers,
      {
        refused,
        cut,
        workers,
      },
    );
    check(
      out,
      'the lease was released on stop (not left to expire)',
      lease?.holder !== 'term-a',
      lease ?? null,
    );
    check(
      out,
      'the follower took over within a renew interval of the exit',
      takeover <= RENEW + 500,
      takeover,
    );
    return out;
  } finally {
    await c.close();
  }
}

/**
 * SIGKILL to the leader while a leader task runs: the follower is elected within TTL + renew and
 * runs the task with a higher epoch; the killed run stays unfinished in the journal.
 */
export async function leaderKill(_o: { seconds: number }): Promise<Outcome> {
  const out: Outcome = { scenario: 'leader-kill', figures: {}, checks: [] };
  // The first leader's runs get no answer at all, so the kill lands mid-run whatever the machine's
  // speed; once it is dead, runs are answered after 1.5 s.
  let holding = true;
  const held: ServerResponse[] = [];
  const slow = createHttpServer((_q, res) => {
    if (holding) held.push(res);
    else setTimeout(() => res.writeHead(200).end('ok'), 1500);
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  const port = (slow.address() as { port: number }).port;
  const c = await startCluster({
    ids: ['kill-a', 'kill-b'],
    leaseTtlMs: TTL,
    renewIntervalMs: RENEW,
    yaml: `cron:\n  tasks:\n    slow_leader:\n      kind: http.probe\n      schedule: '*/2 * * * * *'\n      execution_scope: leader\n      url: http://127.0.0.1:${port}/\n      timeout_ms: 5000\n`,
  });
  try {
    const [a, b] = c.nodes as [NodeProcess, NodeProcess];
    await until('kill-a leads', async () => (await metrics(c, a)).host.is_leader, 10_000);
    await until(
      'the leader task runs on kill-a',
      async () =>
        (
          await c.acp<{ items: { runtime: { running: boolean } }[] }>(a, '/acp/cron-tasks/list', {
            filter: { running: true },
          })
        ).body.items.length === 1,
      10_000,
    );
    a.child.kill('SIGKILL');
    await a.exited;
    // What the dead leader left: a lease nobody may take before it runs out.
    const deadLease = await c.store.cluster.currentLease();
    holding = false;
    for (const res of held) res.destroy();
    const elected = await until(
      'kill-b leads',
      async () => (await metrics(c, b)).host.is_leader,
      TTL + RENEW + 5000,
    );
    const ranAgain = await until(
      'kill-b runs the task',
      async () => (await metrics(c, b)).tasks.slow_leader!.runs >= 1,
      10_000,
    );
    const runs = await c.store.cluster.runs('slow_leader');
    const killed = runs.filter((r) => r.server_id === 'kill-a' && r.finished_at === null);
    const next = runs.filter((r) => r.server_id === 'kill-b');
    out.figures = {
      're-elected after SIGKILL ms': Math.round(elected),
      'leader task ran on the new leader after ms': Math.round(elected + ranAgain),
      'journal runs': runs.length,
    };
    check(out, `re-elected within TTL + renew (${TTL + RENEW} ms)`, elected <= TTL + RENEW + 250, elected);
    check(out, 'the killed run is unfinished in the journal', killed.length >= 1, killed);
    const killedEpoch = Math.max(...killed.map((r) => r.epoch));
    // The lease is taken on the database's clock, and the journal's start times are that clock's.
    const leftUntil = deadLease?.holder === 'kill-a' ? Date.parse(deadLease.expires_at) : 0;
    check(
      out,
      "the new leader's runs began only after the dead leader's lease ran out",
      next.length > 0 && next.every((r) => Date.parse(r.started_at) >= leftUntil),
      { deadLease: deadLease ?? null, next: next.map((r) => r.started_at) },
    );
    check(
      out,
      'the new leader runs with a higher epoch',
      next.length > 0 && next.every((r) => r.epoch > killedEpoch),
      {
        killedEpoch,
        next: next.map((r) => r.epoch),
      },
    );
    return out;
  } finally {
    await c.close();
    slow.close();
  }
}

/**
 * An upstream that accepts and never answers, probed every second with a 1 s timeout, while /go
 * takes load: every run fails by timeout at about 1 s, no socket is left hanging, and the event
 * loop stays responsive.
 */
export async function hangingUpstream(o: { seconds: number }): Promise<Outcome> {
  const out: Outcome = { scenario: 'hanging-upstream', figures: {}, checks: [] };
  const held = new Set<Socket>();
  const black = createTcpServer((s) => {
    held.add(s);
    s.on('close', () => held.delete(s));
    s.on('error', () => {});
    // Read (and ignore) what arrives: a paused socket would never see the client's close.
    s.resume();
  });
  await new Promise<void>((r) => black.listen(0, '127.0.0.1', r));
  const port = (black.address() as { port: number }).port;
  const c = await startCluster({
    ids: ['hang-a'],
    yaml: `cron:\n  tasks:\n    hang:\n      kind: http.probe\n      schedule: '* * * * * *'\n      execution_scope: all\n      url: http://127.0.0.1:${port}/never\n      timeout_ms: 1000\n`,
  });
  try {
    const [n] = c.nodes as [NodeProcess];
    await seedFlow(c.store, 'busy');
    let done = false;
    const latencies: number[] = [];
    const load = closedLoop({
      url: n.url,
      paths: () => '/go/busy',
      workers: 20,
      until: () => done,
      latencies,
    });
    const delays: number[] = [];
    const t0 = performance.now();
    while (performance.now() - t0 < o.seconds * 1000) {
      await sleep(1000);
      delays.push((await metrics(c, n)).host.event_loop.delay_p99_ms);
    }
    done = true;
    const tally = await load;
    const task = (await metrics(c, n)).tasks.hang!;
    const openSockets = held.size;
    out.figures = {
      'probe runs': task.runs,
      'probe failures': task.failures,
      'probe p95 ms': task.p95_duration_ms,
      'last error': task.last_error ?? '',
      'sockets still held by the upstream': openSockets,
      'event-loop delay p99, worst 10 s window, ms': Math.max(...delays),
      '/go answered': tally.answered,
      '/go p99 ms': Number(percentile(latencies, 99).toFixed(1)),
    };
    check(out, 'every probe run failed', task.runs > 0 && task.failures === task.runs, task);
    check(out, 'by its timeout', /timeout/i.test(task.last_error ?? ''), task.last_error);
    check(
      out,
      'runs end at the 1 s timeout (p95 ≤ 1.25 s)',
      task.p95_duration_ms <= 1250,
      task.p95_duration_ms,
      { speed: true },
    );
    check(out, 'no socket left hanging (at most the run in progress)', openSockets <= 2, openSockets);
    check(out, 'event-loop delay p99 stays under 50 ms', Math.max(...delays) < 50, delays, { speed: true });
    check(
      out,
      '/go answered only 302s',
      tally.answered === tally.count(302) && tally.failed === 0,
      tally.toJSON(),
    );
    return out;
  } finally {
    await c.close();
    for (const s of held) s.destroy();
    black.close();
  }
}
