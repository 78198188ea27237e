import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import {
  SIGHTINGS_PRUNE_EVERY_MS,
  UniquenessExchange,
  UniquenessWindow,
  visitorKey,
} from '../../src/clicks/index.ts';
import type { Storage } from '../../src/storage/index.ts';
import { toNum } from '../../src/storage/sql.ts';
import { ManualClock } from '../../src/time/index.ts';
import { LogCapture, startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { until } from '../helpers/until.ts';
import { VISITOR_SECRET } from '../helpers/user-agents.ts';
import { BACKENDS, type Opened, storeSuite } from '../storage/backends.ts';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

const silent = pino({ level: 'silent' });
const HOUR = 3_600_000;
const v = (name: string) => visitorKey(name, 'exchange-test', VISITOR_SECRET);

/** One node's share of uniqueness: its window and its exchange, on its own storage connection. */
function nodeOf(name: string, storage: Storage, clock: ManualClock, maxEntries = 1000, openPageRows = 3) {
  const window = new UniquenessWindow({ clock, ttlHours: 24, maxEntries, share: true });
  // Small pages: a start reads the open windows over several.
  const exchange = new UniquenessExchange({
    openPageRows,
    window,
    store: storage.sightings,
    serverId: name,
    clock,
    logger: silent,
    flushIntervalMs: 0,
    ttlHours: 24,
    maxEntries,
  });
  return { window, exchange };
}

for (const backend of BACKENDS) {
  describe(`uniqueness exchange between two nodes sharing ${backend.name}`, async () => {
    const clock = new ManualClock(Date.parse('2026-03-01T00:00:00Z'));
    let opened: Opened;
    let second: Storage | undefined;
    let a: ReturnType<typeof nodeOf>;
    let b: ReturnType<typeof nodeOf>;
    // Registered first, so it runs before the store's own cleanup.
    after(async () => {
      await second?.close();
    });
    const { it } = await storeSuite(backend, {
      clock,
      onOpen: async (o) => {
        opened = o;
        second = opened.reopen();
        a = nodeOf('node-a', opened.storage, clock);
        b = nodeOf('node-b', second, clock);
        await a.exchange.start();
        await b.exchange.start();
      },
    });
    const both = async () => {
      await a.exchange.round();
      await b.exchange.round();
      await a.exchange.round();
    };

    it('a visitor counted unique on one node is not unique on the other after one exchange, both ways', async () => {
      assert.equal(a.window.check('f1', v('ann')), true);
      assert.equal(b.window.peek('f1', v('ann')), true, 'not told yet');
      assert.deepEqual(await a.exchange.round(), { sent: 1, learned: 0 });
      assert.deepEqual(await b.exchange.round(), { sent: 0, learned: 1 });
      assert.equal(b.window.check('f1', v('ann')), false);
      assert.equal(b.window.check('f2', v('ann')), true, 'another flow is another window');
      assert.equal(b.window.check('f1', v('bob')), true);
      await both();
      assert.equal(a.window.check('f1', v('bob')), false);
      assert.equal(a.window.check('f2', v('ann')), false);
      // Nothing comes back to the node that sent it, and nothing is read twice.
      assert.deepEqual(await a.exchange.round(), { sent: 0, learned: 0 });
      assert.deepEqual(await b.exchange.round(), { sent: 0, learned: 0 });
    });

    it('the overshoot: both nodes count a visitor unique before hearing of each other, then agree on the earlier window', async () => {
      assert.equal(a.window.check('f3', v('cat')), true);
      clock.advance(5_000);
      assert.equal(b.window.check('f3', v('cat')), true, 'within one exchange interval: counted on both');
      await both();
      clock.advance(23 * HOUR);
      assert.equal(a.window.peek('f3', v('cat')), false);
      assert.equal(b.window.peek('f3', v('cat')), false);
      // A's window (5 s earlier) ends first; B took it over, so both count the next click unique.
      clock.advance(HOUR - 5_000);
      assert.equal(a.window.peek('f3', v('cat')), true);
      assert.equal(b.window.peek('f3', v('cat')), true, "B kept A's earlier window");
      assert.equal(b.window.check('f3', v('cat')), true);
      await both();
      assert.equal(a.window.check('f3', v('cat')), false, 'and the next window is shared again');
    });

    it('a node that starts later loads the windows still open (a restart does not count returning visitors again)', async () => {
      assert.equal(a.window.check('f4', v('dan')), true);
      await a.exchange.round();
      clock.advance(HOUR);
      const third = opened.reopen();
      try {
        const c = nodeOf('node-c', third, clock);
        await c.exchange.start();
        assert.equal(c.window.check('f4', v('dan')), false);
        assert.equal(c.window.check('f4', v('eve')), true);
        assert.equal(c.window.check('f1', v('ann')), true, 'windows that ended are not loaded');
        await c.exchange.stop();
        await both();
        assert.equal(a.window.check('f4', v('eve')), false, "stop() sends the node's last sightings");
      } finally {
        await third.close();
      }
    });

    it('a start reads the open windows a page at a time, and no more than maxEntries of them, newest first', async () => {
      // Eleven visitors a millisecond apart, three sharing one moment (a page may end inside it).
      const at = clock.now();
      for (let i = 0; i < 11; i++) {
        if (i !== 4 && i !== 5) clock.advance(1);
        assert.equal(a.window.check('f6', v(`p${i}`)), true);
      }
      await a.exchange.round();
      const third = opened.reopen();
      try {
        const all = nodeOf('node-d', third, clock);
        await all.exchange.start();
        for (let i = 0; i < 11; i++) assert.equal(all.window.peek('f6', v(`p${i}`)), false, `p${i} loaded`);
        // A bound under what is open: the newest ones (later visitors) are kept.
        const firstPage = await third.sightings.open(at - 24 * HOUR, 8);
        assert.equal(firstPage.next !== undefined, true, 'a full page says where the next starts');
        const rest = await third.sightings.open(at - 24 * HOUR, 1000, firstPage.next);
        const seen = [...firstPage.rows, ...rest.rows].map((r) => `${r.flow_id}/${r.visitor_key}`);
        assert.equal(new Set(seen).size, seen.length, 'no row twice across pages');
        const direct = await third.sightings.open(at - 24 * HOUR, 1000);
        assert.deepEqual(
          seen,
          direct.rows.map((r) => `${r.flow_id}/${r.visitor_key}`),
          'pages join into the whole, oldest first',
        );
      } finally {
        await third.close();
      }
      const bounded = opened.reopen();
      try {
        const capped = nodeOf('node-f', bounded, clock, 4, 3);
        await capped.exchange.start();
        assert.equal(capped.window.peek('f6', v('p10')), false, 'the newest is loaded');
        assert.equal(capped.window.peek('f6', v('p0')), true, 'beyond maxEntries: not loaded');
      } finally {
        await bounded.close();
      }
    });

    it('windows loaded over several pages end in the order they are held: the ended ones go first, never an open one', async () => {
      // Loaded newest page first, a window held ended windows behind open ones: it evicted open
      // ones when full, and their visitors counted unique again.
      clock.advance(30 * HOUR); // every earlier test's window has ended: only these six are open
      const t0 = clock.now();
      await opened.storage.sightings.add(
        'node-y',
        Array.from({ length: 6 }, (_, i) => ({
          flow_id: 'order',
          visitor_key: v(`o${i}`),
          first_seen_at: t0 - (20 - i) * HOUR,
        })),
      );
      const again = opened.reopen();
      try {
        const small = nodeOf('node-h', again, clock, 6, 3);
        await small.exchange.start();
        clock.advance(6.5 * HOUR); // o0…o2 have ended (after 4, 5, 6 h)
        assert.equal(small.window.check('order', v('new')), true);
        assert.equal(small.window.size, 4, 'the ended ones swept, the new one in');
        for (const i of [5, 4, 3])
          assert.equal(small.window.check('order', v(`o${i}`)), false, `o${i} still open`);
      } finally {
        await again.close();
      }
    });

    it('a node that just started prunes at its first round after the start', async () => {
      const old = async () =>
        toNum(
          (
            await opened
              .sql()
              .all<{ n: unknown }>("SELECT COUNT(*) AS n FROM click_sightings WHERE flow_id = 'old'")
          )[0]?.n,
        );
      await opened.storage.sightings.add('node-z', [
        { flow_id: 'old', visitor_key: 1, first_seen_at: clock.now() - 30 * HOUR },
      ]);
      const again = opened.reopen();
      try {
        const fresh = nodeOf('node-g', again, clock);
        await fresh.exchange.start();
        assert.equal(await old(), 1, 'not in the round a start waits for');
        await fresh.exchange.round();
        assert.equal(await old(), 0, 'a node restarted within the prune interval still prunes');
      } finally {
        await again.close();
      }
    });

    it('sightings older than the TTL are pruned by the rounds', async () => {
      const count = async () =>
        toNum((await opened.sql().all<{ n: unknown }>('SELECT COUNT(*) AS n FROM click_sightings'))[0]?.n);
      assert.ok((await count()) > 0);
      clock.advance(25 * HOUR + SIGHTINGS_PRUNE_EVERY_MS);
      assert.equal(a.window.check('f5', v('fay')), true);
      await a.exchange.round();
      assert.equal(await count(), 1, 'only the sighting younger than the TTL is left');
    });
  });
}

describe('two real nodes on one PostgreSQL schema exchange sightings on their own, within the flush interval', async () => {
  const available = await pgAvailable();
  const schema = testSchema();
  let a: TestNode;
  let b: TestNode;
  before(async () => {
    if (!available) return;
    const yaml = 'clicks:\n  flush_interval_ms: 200\n';
    a = await startTestNode({ postgres: { schema }, yaml });
    b = await startTestNode({ postgres: { schema }, yaml });
  });
  after(async () => {
    if (!available) return;
    await a.close();
    await b.close();
    await dropSchema(schema);
  });

  test('a click described on one node is not unique on the other once the exchange has run', {
    skip: !available && 'postgres unavailable',
  }, async () => {
    const headers = {
      'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0',
    };
    const first = a.node.clickDescriber.describe('flow-x', 'GET', headers, '203.0.113.9', undefined);
    assert.equal(first.is_unique, true);
    await until(
      'node B to learn the visitor',
      () =>
        !b.node.clickDescriber.describe('flow-x', 'GET', headers, '203.0.113.9', undefined, false).is_unique,
      10_000,
    );
    assert.equal(
      b.node.clickDescriber.describe('flow-x', 'GET', headers, '203.0.113.9', undefined).is_unique,
      false,
    );
    assert.ok(b.node.uniquenessExchange.stats().learned >= 1);
    assert.ok(a.node.uniquenessExchange.stats().sent >= 1);
  });
});

test('a SQLite node restarted on its file still knows who clicked: a returning visitor is not unique', async () => {
  // The node forgot every open window when it stopped: each visitor who came back after a restart
  // was counted unique again, where a PostgreSQL node, which loads its sightings, was not.
  const dir = mkdtempSync(join(tmpdir(), 'sluice-uniq-'));
  const yaml = `storage:\n  sqlite:\n    path: ${join(dir, 'sluice.db')}\n`;
  const visitor = { 'user-agent': CHROME, 'x-forwarded-for': '198.51.100.23' };
  const click = async (t: TestNode) => {
    const res = await fetch(`${t.url}/go/back`, { redirect: 'manual', headers: visitor });
    await res.arrayBuffer();
    const id = res.headers.get('x-click-id')!;
    await t.node.clickLog.persist();
    return (await t.node.storage.clicks.get(id))!.is_unique;
  };
  try {
    const first = await startTestNode({ yaml });
    try {
      const admin = await first.token('admin');
      const flow = (await (
        await first.acp('/acp/traffic-flows/create', admin, { slug: 'back', name: 'back' })
      ).json()) as { id: string };
      await first.acp('/acp/streams/create', admin, {
        flow_id: flow.id,
        name: 'd',
        type: 'default',
        target_url: 'https://example.com/',
      });
      assert.deepEqual([await click(first), await click(first)], [true, false]);
    } finally {
      await first.close(); // a graceful stop: its last sightings are written
    }
    const second = await startTestNode({ yaml });
    try {
      assert.equal(await click(second), false, 'the same visitor, within the TTL, after a restart');
      const other = await fetch(`${second.url}/go/back`, {
        redirect: 'manual',
        headers: { ...visitor, 'x-forwarded-for': '198.51.100.24' },
      });
      await other.arrayBuffer();
      await second.node.clickLog.persist();
      const otherClick = await second.node.storage.clicks.get(other.headers.get('x-click-id')!);
      assert.equal(otherClick?.is_unique, true, 'a new visitor is');
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a stop whose last send cannot finish says how many sightings it did not write, the window's included", async () => {
  const clock = new ManualClock(Date.parse('2026-03-01T00:00:00Z'));
  const capture = new LogCapture();
  const window = new UniquenessWindow({ clock, ttlHours: 24, maxEntries: 100, share: true });
  let release!: () => void;
  let adding!: () => void;
  const inAdd = new Promise<void>((r) => {
    adding = r;
  });
  const hung = new Promise<number>((r) => {
    release = () => r(0);
  });
  const exchange = new UniquenessExchange({
    window,
    // A database whose writes never answer (its reads have nothing): what a stop's budget runs out on.
    store: {
      add: () => {
        adding();
        return hung;
      },
      open: async () => ({ rows: [], cursor: '', more: false }),
      openStart: async () => undefined,
      after: async (cursor: string) => ({ rows: [], cursor, more: false }),
      prune: async () => 0,
    },
    serverId: 'stuck',
    clock,
    logger: pino({}, capture),
    flushIntervalMs: 0,
    ttlHours: 24,
    maxEntries: 100,
  });
  // A round under way (its send hung), then two visitors more: the stop's send waits behind it.
  window.check('f', v('first'));
  const round = exchange.round();
  await inAdd;
  window.check('f', v('second'));
  window.check('f', v('third'));
  await exchange.stop(10);
  const said = capture.lines.find(
    (l) => l.msg === 'uniqueness exchange: the last sightings were not sent by the end of the stop',
  );
  assert.equal(said?.unsent, 3, "the round's one and the two still in the window");
  release();
  await round;
});
