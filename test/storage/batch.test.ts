import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BatchStatement, batchJson } from '../../src/storage/batch.ts';
import { BACKENDS, type Opened, storeSuite } from './backends.ts';

// PostgreSQL receives a batch as one JSON text, written by batch.ts: every text a click log may
// carry (quotes, backslashes and what reads like an escape, braces, commas, the word NULL, empty,
// non-ASCII, control characters) must come back exactly, NULL as NULL, on both backends alike.
const AWKWARD = [
  'plain',
  'with "double" quotes',
  'back\\slash \\" and \\\\',
  '{braces},{and},commas',
  'NULL',
  '',
  ' leading and trailing ',
  'ünïcödé ✓ 漢字 😀',
  'tab\tnew\nline\rcr',
  'control \u0001\u001f and del \u007f',
  "single 'quote'",
  null,
];

const SPEC = {
  columns: ['integer', 'text', 'bigint', 'boolean', 'timestamptz'],
  sqlite: 'INSERT INTO batch_probe (n, t, b, f, at) VALUES (?1, ?2, ?3, ?4, ?5)',
  postgres: 'INSERT INTO batch_probe (n, t, b, f, at) SELECT * FROM {rows} AS r (n, t, b, f, at)',
} as const;
const INSERT = new BatchStatement(SPEC);

for (const backend of BACKENDS) {
  describe(`batch statements on ${backend.name}`, async () => {
    let o: Opened;
    const { available } = await storeSuite(backend, {
      onOpen: async (x) => {
        o = x;
        const ts = backend.name === 'postgres' ? 'TIMESTAMPTZ' : 'TEXT';
        await o
          .sql()
          .script(`CREATE TABLE batch_probe (n INTEGER PRIMARY KEY, t TEXT, b BIGINT, f BOOLEAN, at ${ts})`);
      },
    });

    test('awkward text, NULLs, big integers, booleans and timestamps come back as sent', {
      skip: !available && `${backend.name} unavailable`,
    }, async () => {
      const rows = AWKWARD.map((t, n) => [
        n,
        t,
        n % 2 ? 2 ** 53 - 1 - n : n === 0 ? 0 : -n * 1000,
        n % 3 === 0,
        n % 4 ? `2026-01-0${1 + (n % 9)}T00:00:00.000Z` : null,
      ]);
      assert.equal(await o.sql().batch(INSERT, rows), rows.length);
      const got = await o
        .sql()
        .all<Record<string, unknown>>('SELECT n, t, b, f, at FROM batch_probe ORDER BY n');
      assert.deepEqual(
        got.map((r) => [
          Number(r.n),
          r.t,
          Number(r.b),
          r.f === null ? null : Boolean(r.f),
          r.at instanceof Date ? r.at.toISOString() : r.at,
        ]),
        rows,
      );
    });

    test('a statement written for PostgreSQL alone runs there, and SQLite refuses it writing nothing', {
      skip: !available && `${backend.name} unavailable`,
    }, async () => {
      const pgOnly = new BatchStatement({ ...SPEC, sqlite: null });
      const rows = [[90, 'pg only', 1, true, null]];
      if (backend.name === 'postgres') assert.equal(await o.sql().batch(pgOnly, rows), 1);
      else await assert.rejects(o.sql().batch(pgOnly, rows), /no SQLite form/);
      const got = await o.sql().all('SELECT n FROM batch_probe WHERE n = 90');
      assert.equal(got.length, backend.name === 'postgres' ? 1 : 0);
    });

    test('a lone surrogate is stored as U+FFFD, and the rest of its batch as sent', {
      skip: !available && `${backend.name} unavailable`,
    }, async () => {
      const sent = ['lone high \ud800 here', 'lone low \udc00', 'a pair 😀 stays', 'and a backslash \\ud800'];
      const rows = sent.map((t, i) => [100 + i, t, 1, true, null]);
      assert.equal(await o.sql().batch(INSERT, rows), rows.length);
      const got = await o.sql().all<{ t: string }>('SELECT t FROM batch_probe WHERE n >= 100 ORDER BY n');
      assert.deepEqual(
        got.map((r) => r.t),
        ['lone high \ufffd here', 'lone low \ufffd', 'a pair 😀 stays', 'and a backslash \\ud800'],
      );
    });
  });
}

// A batch's JSON is written a chunk of rows at a time so that no event-loop turn holds the whole
// batch (#12). The text `\ud` (a backslash, then "ud": any visitor can send it as a sub-id) looks
// like a lone surrogate's escape to the check, and its redo must stay within its chunk too.
describe('a batch as JSON', () => {
  /** The most rows one `JSON.stringify` call was handed while `fn` ran. */
  async function largestStringify(fn: () => Promise<unknown>): Promise<number> {
    const original = JSON.stringify;
    let largest = 0;
    JSON.stringify = ((value: unknown, ...rest: unknown[]) => {
      if (Array.isArray(value)) largest = Math.max(largest, value.length);
      return (original as (...a: unknown[]) => string)(value, ...rest);
    }) as typeof JSON.stringify;
    try {
      await fn();
    } finally {
      JSON.stringify = original;
    }
    return largest;
  }
  const rows = Array.from({ length: 10_000 }, (_, i) => [`c${i}`, `sub-${i}`, i, true, null]);

  test('is written a chunk of rows at a time, also when a row holds a backslash before "ud"', async () => {
    assert.ok((await largestStringify(() => batchJson(rows))) <= 256);
    const tricky = rows.map((r, i) => (i === 5000 ? [r[0], 'x\\udy', ...r.slice(2)] : r));
    const largest = await largestStringify(() => batchJson(tricky));
    assert.ok(largest <= 256, `one JSON.stringify call serialised ${largest} rows`);
    assert.deepEqual(JSON.parse(await batchJson(tricky)), tricky);
  });

  test('a BigInt is written as its decimal text', async () => {
    const json = await batchJson([
      [1n, 'a'],
      [9007199254740993n, null],
    ]);
    assert.equal(json, '[["1","a"],["9007199254740993",null]]');
  });
});
