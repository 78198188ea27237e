import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CLICK_ID_LENGTH,
  CLICK_ID_RANDOM_CHARS,
  CLICK_ID_RE,
  ClickIdGenerator,
  clickIdTime,
} from '../../src/clicks/index.ts';
import { ManualClock } from '../../src/time/index.ts';

const ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** The part of an id after its 8-character time prefix. */
const randomPart = (id: string) => id.slice(CLICK_ID_LENGTH - CLICK_ID_RANDOM_CHARS);
/** The random part read as a number (exact: a BigInt of 6 bits a character). */
const numberOf = (part: string) => [...part].reduce((v, c) => v * 64n + BigInt(ALPHABET.indexOf(c)), 0n);

describe('click id', () => {
  test('1–64 characters of [A-Za-z0-9_-]: every id, whatever the clock', () => {
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
    assert.ok(CLICK_ID_RANDOM_CHARS * 6 >= 80, 'at least 80 random bits');
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

  // The ids used to be a per-process random part and a counter: from two of his own clicks a
  // visitor knew every id made between them (and the node's volume), and could reject their sales
  // by postback. Consecutive ids differed only in their last four characters, by one.
  test('unpredictable: consecutive ids of one generator share nothing but their millisecond', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 28, 23));
    const ids = new ClickIdGenerator(clock);
    const made = Array.from({ length: 10_000 }, () => ids.next());
    let sharedHead = 0;
    let counted = 0;
    for (let i = 1; i < made.length; i++) {
      const a = randomPart(made[i - 1]!);
      const b = randomPart(made[i]!);
      // Unrelated 14-character parts share their first 7 characters once in 2^42 pairs.
      if (a.slice(0, 7) === b.slice(0, 7)) sharedHead++;
      const step = numberOf(b) - numberOf(a);
      if (step > -1000n && step < 1000n) counted++;
    }
    assert.equal(sharedHead, 0, 'consecutive ids share most of their random part');
    assert.equal(counted, 0, 'consecutive ids are a small step apart (a counter)');
    assert.equal(new Set(made.map(randomPart)).size, made.length, 'a random part repeated');
  });

  test('the random part is uniform: each character position takes each of the 64 characters evenly', () => {
    const clock = new ManualClock();
    const ids = new ClickIdGenerator(clock);
    const n = 10_000;
    const counts = Array.from({ length: CLICK_ID_RANDOM_CHARS }, () => new Array<number>(64).fill(0));
    for (let i = 0; i < n; i++) {
      const part = randomPart(ids.next());
      for (let p = 0; p < part.length; p++) counts[p]![ALPHABET.indexOf(part[p]!)]!++;
    }
    // Expected 156.25 a cell, standard deviation ~12.4: ±78 is over 6 deviations (no false alarm in
    // practice), while a fixed or counting position puts all 10,000 (or none) in some cell.
    for (const [p, row] of counts.entries())
      for (const [c, k] of row.entries())
        assert.ok(Math.abs(k - n / 64) < 78, `position ${p}, character ${ALPHABET[c]}: ${k} of ${n}`);
  });

  test('two generators started together draw unrelated random parts', () => {
    const clock = new ManualClock();
    const a = new ClickIdGenerator(clock);
    const b = new ClickIdGenerator(clock);
    const x = randomPart(a.next());
    const y = randomPart(b.next());
    assert.notEqual(x.slice(0, 7), y.slice(0, 7));
  });

  test('time-ordered by millisecond: ids of later milliseconds sort after, and carry their millisecond', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12));
    const ids = new ClickIdGenerator(clock);
    const made: string[] = [];
    for (let i = 0; i < 3000; i++) {
      made.push(ids.next());
      clock.advance(1 + (i % 3) * 997);
    }
    assert.deepEqual([...made].sort(), made);
    assert.equal(clickIdTime(made.at(-1)!), clock.now() - 1 - (2999 % 3) * 997);
    assert.equal(clickIdTime('not-one-of-ours'), undefined);
  });

  test('a wall clock stepped back: ids stay unique and say the time the clock said', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23));
    const ids = new ClickIdGenerator(clock);
    const made = [ids.next(), ids.next()];
    clock.set(clock.now() - 60_000);
    made.push(ids.next(), ids.next());
    assert.equal(new Set(made).size, 4);
    assert.equal(clickIdTime(made[0]!), Date.UTC(2026, 10, 23));
    assert.equal(clickIdTime(made[3]!), Date.UTC(2026, 10, 23) - 60_000);
  });
});
