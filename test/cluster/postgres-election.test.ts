import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PostgresElection } from '../../src/cluster/index.ts';
import { openPostgres, type Storage } from '../../src/storage/index.ts';
import { createLogger } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';
import { dropSchema, PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { TcpProxy } from '../helpers/tcp-proxy.ts';
import { until } from '../helpers/until.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('leader election on PostgreSQL', { skip }, () => {
  const schema = testSchema();
  const stores: Storage[] = [];
  const open = (url = PG_URL) => {
    const s = openPostgres({ url, poolMax: 2, schema, clock: systemClock });
    stores.push(s);
    return s;
  };
  const elect = (store: Storage, id: string, ttl = 600, renew = 100, logs = new LogCapture()) =>
    new PostgresElection({
      store: store.cluster,
      serverId: id,
      clock: systemClock,
      logger: createLogger({ level: 'info', name: 'sluice', serverId: id, destination: logs }),
      leaseTtlMs: ttl,
      renewIntervalMs: renew,
    });
  before(async () => {
    await open().migrate();
  });
  after(async () => {
    for (const s of stores) await s.close().catch(() => {});
    await dropSchema(schema);
  });

  test('one leader among several; a graceful stop hands over at once with a new epoch', async () => {
    const store = open();
    const logs = { a: new LogCapture(), b: new LogCapture(), c: new LogCapture() };
    const [a, b, c] = [
      elect(store, 'a', 5000, 100, logs.a),
      elect(open(), 'b', 5000, 100, logs.b),
      elect(open(), 'c', 5000, 100, logs.c),
    ];
    try {
      await Promise.all([a.start(), b.start(), c.start()]);
      const leaders = [a, b, c].filter((e) => e.isLeader());
      assert.equal(leaders.length, 1);
      const first = leaders[0]!;
      const epoch = first.epoch();
      const leaderName = first === a ? 'a' : first === b ? 'b' : 'c';
      for (const e of [a, b, c]) assert.equal(e.leaderId(), leaderName, 'every node knows who leads');
      await first.stop();
      // Read at once: a lease left to lapse would still be the old leader's for up to 5 s; a released
      // one is free now (or already the next leader's), so the handover does not wait for the TTL.
      assert.notEqual((await store.cluster.currentLease())?.holder, leaderName, 'the lease was released');
      // Handing the lease over on a stop is routine: info, not the warning a lost lease gets.
      const steppedDown = logs[leaderName as keyof typeof logs].lines.filter(
        (l) => l.message === 'stepped down',
      );
      assert.deepEqual(
        steppedDown.map((l) => [l.level, l.reason]),
        [['info', 'node stopping']],
      );
      await until('a new leader', () => [a, b, c].some((e) => e !== first && e.isLeader()), 10_000);
      const next = [a, b, c].find((e) => e !== first && e.isLeader())!;
      assert.ok(next.epoch() > epoch, 'the epoch grows when leadership changes hands');
    } finally {
      for (const e of [a, b, c]) await e.stop();
    }
  });

  test('a node stopped while its renewal wins the lease gives the lease back', async () => {
    const store = open();
    const leader = elect(store, 'ga', 5000, 50);
    // The follower's own store, its acquire held at a gate the test opens: the renewal is in
    // flight when stop() is called, and wins the lease only after it.
    const real = open().cluster;
    let gate: Promise<void> = Promise.resolve();
    let open_: () => void = () => {};
    let asking: () => void = () => {};
    const gated = new Proxy(real, {
      get(target, key, receiver) {
        if (key === 'acquire') {
          return async (...args: Parameters<typeof real.acquire>) => {
            asking();
            await gate;
            return target.acquire(...args);
          };
        }
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const follower = new PostgresElection({
      store: gated,
      serverId: 'gb',
      clock: systemClock,
      logger: createLogger({ level: 'warn', name: 'sluice', serverId: 'gb', destination: new LogCapture() }),
      leaseTtlMs: 5000,
      renewIntervalMs: 50,
    });
    try {
      await leader.start();
      await follower.start();
      assert.equal(follower.isLeader(), false);
      const held = new Promise<void>((r) => {
        asking = r;
      });
      gate = new Promise<void>((r) => {
        open_ = r;
      });
      await held; // the next renewal has asked and waits at the gate
      await leader.stop(); // the lease is free: the waiting renewal will win it
      const stopping = follower.stop();
      open_();
      await stopping;
      assert.equal((await store.cluster.currentLease())?.holder, undefined, 'nobody holds the lease');
    } finally {
      open_();
      await leader.stop();
      await follower.stop();
    }
  });

  // Leases here are seconds long, not a few hundred ms: a leader must still believe its lease when
  // the test looks right after start(), however long a busy machine took to connect and acquire.
  test('a stale epoch is fenced: its writes are refused once the lease moved on', async () => {
    const store = open();
    const a = elect(store, 'fa', 5000, 50);
    const b = elect(open(), 'fb', 5000, 50);
    try {
      await a.start();
      assert.equal(a.isLeader(), true);
      const staleFence = a.fence()!;
      assert.equal(
        await store.cluster.startRun(
          { run_id: 'r-ok', task: 't', server_id: 'fa', epoch: staleFence.epoch },
          staleFence,
        ),
        true,
      );
      // a stops (its lease released); b takes over with a new epoch, and a's fence no longer holds.
      await a.stop();
      await b.start();
      await until('b to lead', () => b.isLeader(), 10_000);
      assert.ok(b.epoch() > staleFence.epoch);
      assert.equal(
        await store.cluster.startRun(
          { run_id: 'r-stale', task: 't', server_id: 'fa', epoch: staleFence.epoch },
          staleFence,
        ),
        false,
      );
      assert.equal(
        await store.cluster.finishRun('r-ok', null, staleFence),
        false,
        'finishing under a lost lease is refused too',
      );
      assert.equal(
        await store.cluster.startRun(
          { run_id: 'r-new', task: 't', server_id: 'fb', epoch: b.epoch() },
          b.fence(),
        ),
        true,
      );
    } finally {
      // A failed test must not leave a leader renewing into the next one.
      await a.stop();
      await b.stop();
    }
  });

  test('a leader that cannot reach the database steps down before its lease could pass to another', async () => {
    const pgUrl = new URL(PG_URL);
    const proxy = new TcpProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
    await proxy.start();
    const via = new URL(PG_URL);
    via.port = String(proxy.port);
    const ttl = 3000;
    const a = elect(open(via.toString()), 'cut', ttl, 100);
    const b = elect(open(), 'other', ttl, 100);
    try {
      await a.start();
      assert.equal(a.isLeader(), true);
      await b.start();
      assert.equal(b.isLeader(), false);
      let steppedDownAt = 0;
      a.onChange((leader) => {
        if (!leader) steppedDownAt = performance.now();
      });
      let tookOverAt = 0;
      b.onChange((leader) => {
        if (leader) tookOverAt = performance.now();
      });
      await proxy.down();
      // isLeader() is arithmetic on the monotonic clock (no timer has to fire), so the limit holds
      // by design: the lease is believed only until 2.7 s after the last renewal began.
      await until('a to step down', () => !a.isLeader(), ttl + 500);
      // Cut off, it cannot tell who leads: never itself (the procedures would find the leader
      // tasks covered by a node that runs none).
      assert.equal(a.leaderId(), undefined);
      await until('b to take over', () => b.isLeader(), 10_000);
      assert.equal(a.leaderId(), undefined);
      assert.ok(steppedDownAt > 0 && tookOverAt > 0);
      assert.ok(steppedDownAt <= tookOverAt, 'no moment with two leaders');
    } finally {
      await a.stop();
      await b.stop();
      // An open proxy would keep the test process alive after a failure.
      await proxy.down();
    }
  });
});
