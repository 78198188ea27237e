import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type SeenVisitor, UniquenessWindow, visitorKey } from '../../src/clicks/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { seeded } from '../helpers/random.ts';
import { VISITOR_SECRET } from '../helpers/user-agents.ts';

const HOUR = 3_600_000;
/** A visitor key for a name, made the real way. */
const v = (name: string) => visitorKey(name, 'test', VISITOR_SECRET);
const window = (
  clock: ManualClock,
  options: { maxEntries?: number; share?: boolean; ttlHours?: number } = {},
) =>
  new UniquenessWindow({
    clock,
    ttlHours: options.ttlHours ?? 24,
    maxEntries: options.maxEntries ?? 1000,
    share: options.share ?? false,
  });

describe('uniqueness', () => {
  test('the first click of a visitor on a flow is unique; the next ones within the TTL are not', () => {
    const clock = new ManualClock();
    const u = window(clock);
    assert.equal(u.check('f1', v('v1')), true);
    assert.equal(u.check('f1', v('v1')), false);
    clock.advance(23 * HOUR);
    assert.equal(u.check('f1', v('v1')), false);
    assert.equal(u.check('f1', v('v2')), true, 'another visitor');
    assert.equal(u.check('f2', v('v1')), true, 'another flow');
  });

  test('the window opens with a unique click and does not slide: unique again a TTL after it', () => {
    const clock = new ManualClock();
    const u = window(clock, { ttlHours: 24 });
    assert.equal(u.check('f', v('v')), true);
    for (let h = 1; h < 24; h++) {
      clock.advance(HOUR);
      assert.equal(u.check('f', v('v')), false, `hour ${h}`);
    }
    clock.advance(HOUR);
    assert.equal(u.check('f', v('v')), true, '24 h after the unique click');
    assert.equal(u.check('f', v('v')), false);
  });

  test('expired pairs leave memory as time passes', () => {
    const clock = new ManualClock();
    const u = window(clock, { ttlHours: 1 });
    for (let i = 0; i < 500; i++) u.check('f', v(`v${i}`));
    assert.equal(u.size, 500);
    clock.advance(HOUR);
    u.check('f', v('late'));
    assert.equal(u.size, 1);
    clock.advance(HOUR);
    u.takeNew();
    assert.equal(u.size, 0);
  });

  test('bounded: beyond maxEntries the oldest pairs leave early (counted) and count unique again', () => {
    const clock = new ManualClock();
    const u = window(clock, { maxEntries: 100 });
    for (let i = 0; i < 150; i++) {
      assert.equal(u.check('f', v(`v${i}`)), true);
      clock.advance(1000);
    }
    assert.equal(u.size, 100);
    assert.equal(u.evictedEarly, 50);
    assert.equal(u.check('f', v('v149')), false, 'recent: still held');
    assert.equal(u.check('f', v('v0')), true, 'evicted early: unique again');
  });

  test('evicting the last pair of a flow while opening one on it keeps the new pair', () => {
    const clock = new ManualClock();
    const u = window(clock, { maxEntries: 1 });
    assert.equal(u.check('a', v('v')), true);
    assert.equal(u.check('a', v('w')), true); // evicts (a, v), which empties flow a's map
    assert.equal(u.check('a', v('w')), false, 'the new pair was not lost with the emptied map');
    assert.equal(u.size, 1);
  });

  test('peek tells without opening a window', () => {
    const clock = new ManualClock();
    const u = window(clock);
    assert.equal(u.peek('f', v('v')), true);
    assert.equal(u.peek('f', v('v')), true);
    assert.equal(u.size, 0);
    u.check('f', v('v'));
    assert.equal(u.peek('f', v('v')), false);
  });

  test('takeNew hands over each first sighting once, with when it was; nothing when not sharing', () => {
    const clock = new ManualClock();
    const u = window(clock, { share: true });
    u.check('f', v('a'));
    clock.advance(1500);
    u.check('f', v('a'));
    u.check('g', v('b'));
    assert.deepEqual(u.takeNew(), [
      { flow_id: 'f', visitor_key: v('a'), first_seen_at: clock.now() - 1500 },
      { flow_id: 'g', visitor_key: v('b'), first_seen_at: clock.now() },
    ]);
    assert.deepEqual(u.takeNew(), []);
    const single = window(clock, { share: false });
    single.check('f', v('a'));
    assert.deepEqual(single.takeNew(), []);
  });

  test('a pair learned from another node is not unique here until its window ends', () => {
    const clock = new ManualClock();
    const u = window(clock, { share: true });
    u.learn([
      { flow_id: 'f', visitor_key: v('v'), first_seen_at: clock.now() - 2 * HOUR },
      { flow_id: 'f', visitor_key: v('old'), first_seen_at: clock.now() - 25 * HOUR },
    ]);
    assert.equal(u.check('f', v('v')), false);
    assert.equal(u.check('f', v('old')), true, 'a window that has already ended is ignored');
    clock.advance(22 * HOUR);
    assert.equal(u.check('f', v('v')), true, "the other node's window ended");
    assert.deepEqual(
      u.takeNew().map((s) => s.visitor_key),
      [v('old'), v('v')],
      'learned pairs are not handed back',
    );
  });

  test('two nodes that both counted a visitor agree after one exchange: the earlier window wins', () => {
    const clock = new ManualClock();
    const a = window(clock, { share: true });
    const b = window(clock, { share: true });
    assert.equal(a.check('f', v('v')), true);
    clock.advance(1500);
    assert.equal(b.check('f', v('v')), true, 'b has not heard of a yet: the overshoot');
    const fromA = a.takeNew();
    const fromB = b.takeNew();
    a.learn(fromB);
    b.learn(fromA);
    clock.advance(24 * HOUR - 1300); // 24 h after a's click, 1.3 s before the end of b's own window
    assert.equal(a.check('f', v('v')), true);
    assert.equal(b.check('f', v('v')), true, "b took a's earlier window");
  });

  test('overshoot across nodes is bounded: at most one extra unique per node and window, none for visitors a flush apart', () => {
    const nodes = 3;
    const flushMs = 1000;
    const clock = new ManualClock();
    const cluster = Array.from({ length: nodes }, () => window(clock, { share: true, ttlHours: 1 }));
    const truth = window(clock, { ttlHours: 1 });
    const random = seeded(14);
    let clusterUniques = 0;
    let trueUniques = 0;
    let slowVisitorExtra = 0;
    const exchange = () => {
      const news: SeenVisitor[][] = cluster.map((u) => u.takeNew());
      cluster.forEach((u, i) => {
        u.learn(news.filter((_, j) => j !== i).flat());
      });
    };
    // Two hours of clicks at 10 ms steps: "fast" visitors click again within a flush interval on
    // another node; "slow" visitors click at most once per two flush intervals.
    for (let t = 0; t < 2 * HOUR; t += 10) {
      clock.advance(10);
      if (t % flushMs === 0) exchange();
      const fast = random() < 0.5;
      const visitor = fast
        ? `fast${Math.floor(random() * 20)}`
        : `slow${Math.floor(t / (2 * flushMs)) % 200}`;
      if (!fast && t % (2 * flushMs) !== 0) continue;
      const node = cluster[Math.floor(random() * nodes)]!;
      const unique = node.check('f', v(visitor));
      const expected = truth.check('f', v(visitor));
      if (unique) clusterUniques++;
      if (expected) trueUniques++;
      if (!fast && unique !== expected) slowVisitorExtra++;
    }
    const windows = 2 * 20; // fast visitors × one-hour windows in two hours
    assert.ok(clusterUniques >= trueUniques, 'never fewer uniques than one node would count');
    assert.ok(
      clusterUniques - trueUniques <= windows * (nodes - 1),
      `overshoot ${clusterUniques - trueUniques} > ${windows * (nodes - 1)}`,
    );
    assert.ok(clusterUniques > trueUniques, 'the scenario does produce overshoot (else it proves nothing)');
    assert.equal(slowVisitorExtra, 0, 'visitors whose clicks are a flush interval apart are counted exactly');
  });
});
