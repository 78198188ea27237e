import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { CLICK_ID_LENGTH, CLICK_ID_RE, ClickIdGenerator, clickIdTime } from '../../src/clicks/index.ts';
import { ManualClock } from '../../src/time/index.ts';

/** 11 random bytes whose last three (the counter's start) are `seq`. */
function bytesWithSeq(seq: number): Buffer {
  const b = randomBytes(11);
  b.writeUIntBE(seq, 8, 3);
  return b;
}

describe('click id (§11)', () => {
  test('1–64 characters of [A-Za-z0-9_-]: every id, whatever the clock and random bytes', () => {
    const clock = new ManualClock(0);
    for (const start of [0, 1, Date.UTC(2026, 0, 1), 2 ** 48 - 2]) {
      clock.set(start);
      for (let g = 0; g < 20; g++) {
        const ids = new ClickIdGenerator(clock);
        for (let i = 0; i < 500; i++) {
          const id = ids.next();
          assert.match(id, CLICK_ID_RE);
          assert.equal(id.length, CLICK_ID_LENGTH);
          if (i % 7 === 0) clock.advance(1);
        }
      }
    }
    assert.ok(CLICK_ID_LENGTH <= 64);
  });

  test('unique at volume: a million ids from one generator, many in each millisecond', () => {
    const clock = new ManualClock();
    const ids = new ClickIdGenerator(clock);
    const seen = new Set<string>();
    for (let i = 0; i < 1_000_000; i++) {
      seen.add(ids.next());
      if (i % 5000 === 0) clock.advance(1);
    }
    assert.equal(seen.size, 1_000_000);
  });

  test('unique across generators (nodes, restarts) made in the same millisecond on the same clock', () => {
    const clock = new ManualClock();
    const seen = new Set<string>();
    for (let g = 0; g < 20; g++) {
      const ids = new ClickIdGenerator(clock);
      for (let i = 0; i < 25_000; i++) seen.add(ids.next());
    }
    assert.equal(seen.size, 20 * 25_000);
  });

  test('the random part is what keeps generators apart: the same random bytes give the same ids', () => {
    const clock = new ManualClock();
    const bytes = randomBytes(11);
    const a = new ClickIdGenerator(clock, bytes);
    const b = new ClickIdGenerator(clock, bytes);
    assert.equal(a.next(), b.next());
    const c = new ClickIdGenerator(clock, randomBytes(11));
    assert.notEqual(a.next().slice(8, 18), c.next().slice(8, 18));
  });

  test('time-ordered: ids sort as they were made, and carry their millisecond', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12));
    const ids = new ClickIdGenerator(clock, bytesWithSeq(0));
    const made: string[] = [];
    for (let i = 0; i < 3000; i++) {
      made.push(ids.next());
      if (i % 10 === 0) clock.advance(1 + (i % 3) * 997);
    }
    assert.deepEqual([...made].sort(), made);
    const last = made.at(-1)!;
    assert.equal(clickIdTime(last), clock.now());
    assert.equal(clickIdTime('not-one-of-ours'), undefined);
  });

  test('a wall clock stepped back does not repeat ids: the last millisecond is kept', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23));
    const ids = new ClickIdGenerator(clock, bytesWithSeq(100));
    const made = [ids.next(), ids.next()];
    clock.set(clock.now() - 60_000);
    made.push(ids.next(), ids.next());
    assert.equal(new Set(made).size, 4);
    assert.deepEqual([...made].sort(), made);
    assert.equal(clickIdTime(made[3]!), Date.UTC(2026, 10, 23));
  });

  test('the 24-bit counter wrapping within one millisecond moves on to the next millisecond', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23));
    const ids = new ClickIdGenerator(clock, bytesWithSeq(2 ** 24 - 3));
    const made = Array.from({ length: 6 }, () => ids.next());
    assert.equal(new Set(made).size, 6);
    assert.deepEqual([...made].sort(), made);
    assert.equal(clickIdTime(made[0]!), clock.now());
    assert.equal(clickIdTime(made[5]!), clock.now() + 1);
    // The clock catching up with the borrowed millisecond changes nothing.
    clock.advance(1);
    const next = ids.next();
    assert.ok(next > made[5]!);
    assert.equal(clickIdTime(next), clock.now());
  });
});
