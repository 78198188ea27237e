import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openPostgres } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { START_LIMIT_MS, startCli } from '../helpers/cli.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';

/**
 * Three real node processes on one PostgreSQL, the leader killed with SIGKILL every 5 s for 30 s
 * (five kills; SLUICE_FAILOVER_SECONDS changes the length), a leader task ticking every second.
 * Checked from the run journal the task writes with its epoch: no two runs overlap, no epoch serves
 * two nodes, and a new leader is in place within lease_ttl_ms + renew_interval_ms of each kill (one
 * late attempt allowed: the nodes share two cores with the suite). The lease is short here (1.5 s,
 * renewed every 0.5 s) so that five kills fit in the suite's time; `npm run soak`'s leader-kill
 * scenario kills under a 3 s lease.
 */
const SECONDS = Number(process.env.SLUICE_FAILOVER_SECONDS ?? 30);
const KILL_EVERY_MS = 5000;
const TTL = 1500;
const RENEW = 500;
const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('leader SIGKILLed every 5 s: prompt re-election, no overlapping leader runs, no reused epoch', {
  skip,
  // Only turns a hang into a failure: besides the kills' seconds, eight node processes start (at
  // most START_LIMIT_MS each), which on a busy machine takes far longer than the kills.
  timeout: SECONDS * 1000 + 8 * START_LIMIT_MS,
}, async (t) => {
  // The leader task probes this server, which answers after 300 ms, so runs have a real duration.
  const upstream = createServer((_req, res) => setTimeout(() => res.writeHead(200).end('ok'), 300));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  const probeUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/beat`;
  const schema = testSchema();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-failover-'));
  writeFileSync(
    join(dir, 'config.test.yml'),
    [
      'app:',
      '  server:',
      '    port: 0',
      '    shutdown_timeout_ms: 2000',
      'storage:',
      '  driver: postgres',
      '  postgres:',
      `    url: ${PG_URL}`,
      `    schema: ${schema}`,
      '    pool_max: 3',
      'cluster:',
      '  leader_election: postgres',
      `  lease_ttl_ms: ${TTL}`,
      `  renew_interval_ms: ${RENEW}`,
      'observability:',
      '  logging:',
      '    level: info', // startCli waits for the `sluice started` record
      'cron:',
      '  tasks:',
      '    beat:',
      '      kind: http.probe',
      "      schedule: '* * * * * *'",
      '      execution_scope: leader',
      `      url: ${probeUrl}`,
      '      timeout_ms: 5000',
      '',
    ].join('\n'),
  );
  const store = openPostgres({ url: PG_URL, poolMax: 2, schema, clock: systemClock });
  await store.migrate();

  const nodes = new Map<string, ChildProcess>();
  const start = async (id: string) => {
    const node = await startCli(['--config-dir', dir, '--mode', 'test'], {
      cwd: dir,
      env: { APP__APP__SERVER__ID: id },
    });
    nodes.set(id, node.child);
  };
  const leader = async () => (await store.cluster.currentLease())?.holder;

  const failovers: number[] = [];
  try {
    await Promise.all(['n1', 'n2', 'n3'].map(start));
    const began = Date.now();
    const kills = Math.floor((SECONDS * 1000 - 1) / KILL_EVERY_MS);
    for (let k = 1; k <= kills; k++) {
      await sleep(Math.max(0, began + k * KILL_EVERY_MS - Date.now()));
      const victim = await leader();
      assert.ok(victim, 'someone leads before the kill');
      nodes.get(victim)!.kill('SIGKILL');
      const killedAt = performance.now();
      let next: string | undefined;
      while (next === undefined || next === victim) {
        await sleep(25);
        next = await leader();
        assert.ok(performance.now() - killedAt < TTL + RENEW + 5000, 'a new leader must appear');
      }
      failovers.push(performance.now() - killedAt);
      await start(victim); // back to three nodes
    }
    await sleep(Math.max(0, began + SECONDS * 1000 - Date.now()));
  } finally {
    for (const child of nodes.values()) child.kill('SIGTERM');
    await sleep(1500);
    for (const child of nodes.values()) child.kill('SIGKILL');
  }

  try {
    assert.equal(failovers.length, Math.floor((SECONDS * 1000 - 1) / KILL_EVERY_MS), 'kills made');
    t.diagnostic(`re-election after SIGKILL, ms: ${failovers.map((ms) => ms.toFixed(0)).join(', ')}`);
    // The bound is the lease's: the old one runs out at most TTL after the kill, and a follower
    // tries every RENEW. Its timers are the node's own, on a machine this suite shares with two
    // other node processes and PostgreSQL: one attempt may come a turn late (4.5 s was seen once
    // at a 4.25 s limit under the full suite), so one more renew interval is allowed for it.
    for (const ms of failovers)
      assert.ok(
        ms <= TTL + 2 * RENEW,
        `re-election took ${ms.toFixed(0)} ms (lease TTL + renew interval ${TTL + RENEW}, + one late attempt)`,
      );

    const runs = await store.cluster.runs('beat', 100_000);
    t.diagnostic(`leader task runs: ${runs.length}, epochs: ${new Set(runs.map((r) => r.epoch)).size}`);
    assert.ok(runs.length >= SECONDS / 2, `leader task ran ${runs.length} times`);
    const holders = new Map<number, Set<string>>();
    for (const r of runs) holders.set(r.epoch, (holders.get(r.epoch) ?? new Set()).add(r.server_id));
    for (const [epoch, ids] of holders)
      assert.equal(ids.size, 1, `epoch ${epoch} was used by ${[...ids].join(', ')}`);
    for (let i = 1; i < runs.length; i++) {
      const prev = runs[i - 1]!;
      const next = runs[i]!;
      assert.ok(next.epoch >= prev.epoch, 'epochs never go back');
      if (prev.finished_at !== null) {
        assert.ok(
          next.started_at >= prev.finished_at,
          `run ${next.run_id} started before ${prev.run_id} finished`,
        );
      } else {
        // A run cut short by SIGKILL has no end; only a new leadership may start the next run.
        assert.ok(next.epoch > prev.epoch, `run ${next.run_id} overlaps the killed run ${prev.run_id}`);
      }
    }
  } finally {
    await store.close();
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
    await new Promise<void>((r) => upstream.close(() => r()));
  }
});
