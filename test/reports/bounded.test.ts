import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import { type ReportQuery, reportCsv, runReport } from '../../src/reports/index.ts';
import type { Storage } from '../../src/storage/index.ts';
import { SqlReports } from '../../src/storage/reports.ts';
import type { Row, SqlExecutor } from '../../src/storage/sql.ts';
import { BACKENDS, type Opened, storeSuite } from '../storage/backends.ts';

/** Clicks seeded: sub1 takes 150,000 values (the first 50,000 twice), as visitors' own sub-ids do. */
const CLICKS = 200_000;
const SUBS = 150_000;
const DAY = Date.UTC(2026, 2, 10);
const COST_MICROS = 50_000;
/** A sale on every thousandth click (i % 1000 = 7), paying 1–7 whole units by i. */
const sold = (i: number) => i % 1000 === 7;
const payout = (i: number) => ((Math.floor(i / 1000) % 7) + 1) * 1_000_000;

/** Clicks and their sales, written by the database itself (a recursive CTE, or generate_series). */
function seedSql(dialect: 'sqlite' | 'postgres', flowId: string): string[] {
  const rows =
    dialect === 'postgres'
      ? `generate_series(0, ${CLICKS - 1}) AS n(i)`
      : `(WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${CLICKS - 1}) SELECT i FROM n) AS n`;
  const at =
    dialect === 'postgres'
      ? `to_timestamp(${DAY / 1000} + (i * 86000.0 / ${CLICKS}))`
      : `strftime('%Y-%m-%dT%H:%M:%fZ', ${DAY / 1000} + (i * 86000.0 / ${CLICKS}), 'unixepoch')`;
  const bool = (e: string) => (dialect === 'postgres' ? `(${e})` : `CASE WHEN ${e} THEN 1 ELSE 0 END`);
  return [
    `INSERT INTO clicks (click_id, flow_id, stream_id, created_at, outcome, country, device_type, os, browser, sub1,
        is_unique, is_bot, cost_micros)
      SELECT 'c' || i, '${flowId}', NULL, ${at}, 'redirect', 'DE', 'mobile', 'Android', 'Chrome',
        's' || (i % ${SUBS}), ${bool('true')}, ${bool('false')}, ${COST_MICROS}
      FROM ${rows}`,
    `INSERT INTO conversions (id, click_id, txid, status, payout_micros, currency, postbacks, created_at, updated_at,
        click_created_at, flow_id, stream_id, outcome, country, device_type, os, browser, sub1, is_unique, is_bot)
      SELECT 'v' || i, 'c' || i, '', 'sale', ((i / 1000) % 7 + 1) * 1000000, 'USD', 1, ${at}, ${at}, ${at},
        '${flowId}', NULL, 'redirect', 'DE', 'mobile', 'Android', 'Chrome', 's' || (i % ${SUBS}), ${bool('true')}, ${bool('false')}
      FROM ${rows} WHERE i % 1000 = 7`,
  ];
}

/** The report computed exactly, in JavaScript, from the seed's own formula: per sub1, clicks and revenue. */
function exact(): Map<string, { clicks: number; revenue: number }> {
  const by = new Map<string, { clicks: number; revenue: number }>();
  for (let i = 0; i < CLICKS; i++) {
    const sub = `s${i % SUBS}`;
    let e = by.get(sub);
    if (e === undefined) {
      e = { clicks: 0, revenue: 0 };
      by.set(sub, e);
    }
    e.clicks++;
    if (sold(i)) e.revenue += payout(i) / 1_000_000;
  }
  return by;
}

/** The first `n` sub-ids by `metric` descending, ties by sub1 ascending (as a report breaks them). */
function top(by: Map<string, { clicks: number; revenue: number }>, metric: 'clicks' | 'revenue', n: number) {
  return [...by]
    .sort(([a, x], [b, y]) => y[metric] - x[metric] || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, n)
    .map(([sub, e]) => [sub, e.clicks, e.revenue]);
}

/**
 * An executor that counts the rows each statement hands to JavaScript (its transactions' too):
 * what a report materialises in the node.
 */
function counting(x: SqlExecutor, seen = { most: 0 }): SqlExecutor & { seen: { most: number } } {
  return {
    seen,
    dialect: x.dialect,
    async all<T = Row>(sql: string, params?: readonly unknown[]): Promise<T[]> {
      const out = await x.all<T>(sql, params);
      seen.most = Math.max(seen.most, out.length);
      return out;
    },
    run: (sql, params) => x.run(sql, params),
    batch: (stmt, rows) => x.batch(stmt, rows),
    script: (sql) => x.script(sql),
    transaction: (fn) => x.transaction((tx) => fn(counting(tx, seen))),
  };
}

for (const backend of BACKENDS) {
  describe(`reports over many groups on ${backend.label}: bounded by limit`, async () => {
    let opened: Opened;
    let storage: Storage;
    const expected = exact();
    const query = (over: Partial<ReportQuery>): ReportQuery => ({
      from: '2026-03-10',
      to: '2026-03-11',
      group_by: ['sub1'],
      ...over,
    });
    /** The node's storage with its reports read through a counting executor. */
    const counted = () => {
      const x = counting(opened.sql());
      const reports = new SqlReports(x);
      return { reader: x.seen, storage: Object.assign(Object.create(storage) as Storage, { reports }) };
    };

    const { it } = await storeSuite(backend, {
      onOpen: async (o) => {
        opened = o;
        storage = opened.storage;
        const flow = await storage.flows.create({
          slug: 'many',
          name: 'many',
          status: 'active',
          rotation: 'position',
          cost_per_click: COST_MICROS / 1_000_000,
        });
        for (const sql of seedSql(backend.name, flow.id)) await opened.sql().run(sql);
      },
    });

    it(`${SUBS.toLocaleString('en')} sub1 values, limit 10: ten groups reach JavaScript, the top ten of an exact computation, totals over all`, async () => {
      const { reader, storage: s } = counted();
      const r = await runReport(s, query({ limit: 10 }));
      // Before, every group of the click log and of the conversions came back (150,200 rows here).
      assert.equal(reader.most, 10, 'at most 10 rows a statement reached JavaScript');
      assert.deepEqual(
        r.rows.map((row) => [row.sub1, row.clicks, row.revenue]),
        top(expected, 'clicks', 10),
      );
      assert.equal(r.total_rows, SUBS);
      assert.equal(r.truncated, true);
      assert.equal(r.totals.clicks, CLICKS);
      assert.equal(r.totals.cost, (CLICKS * COST_MICROS) / 1_000_000);
      let revenue = 0;
      for (const e of expected.values()) revenue += e.revenue;
      assert.equal(r.totals.revenue, revenue);
      // The node's own storage (on SQLite, its reader thread) answers the same.
      assert.deepEqual(await runReport(storage, query({ limit: 10 })), r);
    });

    it('sorted by revenue and by sub1 too, and the CSV has the same ten rows', async () => {
      const { reader, storage: s } = counted();
      const byRevenue = await runReport(s, query({ limit: 10, sort: { by: 'revenue', order: 'desc' } }));
      assert.deepEqual(
        byRevenue.rows.map((row) => [row.sub1, row.clicks, row.revenue]),
        top(expected, 'revenue', 10),
      );
      const bySub = await runReport(s, query({ limit: 5, sort: { by: 'sub1', order: 'desc' } }));
      const subs = [...expected.keys()].sort().reverse().slice(0, 5);
      assert.deepEqual(
        bySub.rows.map((row) => row.sub1),
        subs,
      );
      assert.equal(reader.most, 10, 'at most 10 rows a statement');
      const csv = reportCsv(byRevenue, ['sub1']).trimEnd().split('\r\n');
      assert.equal(csv.length, 11, 'a header and ten rows');
      assert.deepEqual(
        csv.slice(1).map((line) => line.split(',')[0]),
        byRevenue.rows.map((row) => row.sub1),
      );
    });

    it('reports.max_rows cuts a larger limit: the first rows of the same order, truncated', async () => {
      const { reader, storage: s } = counted();
      const r = await runReport(s, query({ limit: 100_000 }), undefined, { maxRows: 1000 });
      assert.equal(r.rows.length, 1000);
      assert.equal(reader.most, 1000, 'at most 1,000 rows a statement');
      assert.deepEqual([r.total_rows, r.truncated, r.totals.clicks], [SUBS, true, CLICKS]);
      assert.deepEqual(
        r.rows.slice(0, 10).map((row) => [row.sub1, row.clicks, row.revenue]),
        top(expected, 'clicks', 10),
      );
    });

    it('a report whose rows all fit is not truncated', async () => {
      const r = await runReport(storage, query({ group_by: ['country'], limit: 10, source: 'clicks' }));
      assert.deepEqual(
        r.rows.map((row) => [row.country, row.clicks]),
        [['DE', CLICKS]],
      );
      assert.equal(r.total_rows, 1);
      assert.equal(r.truncated, false);
    });

    it('past its time budget a report is refused, naming the setting; the next one answers', async () => {
      // A millisecond: no scan of 200,000 clicks ends in it (the check runs as the scan goes).
      await assert.rejects(
        runReport(storage, query({ limit: 10 }), undefined, { timeoutMs: 1 }),
        (err: unknown) =>
          err instanceof ApiError &&
          err.code === 'validation.invalid_input' &&
          /reports\.query_timeout_ms \(1 ms\)/.test(err.message),
      );
      const r = await runReport(storage, query({ limit: 3 }), undefined, { timeoutMs: 600_000 });
      assert.equal(r.rows.length, 3);
      assert.equal(r.totals.clicks, CLICKS);
    });
  });
}
