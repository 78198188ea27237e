import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { openPostgres, type Storage } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { PG_URL, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { flowInput, streamInput } from '../helpers/records.ts';
import { BACKENDS } from './backends.ts';

/**
 * Text that a list sorts or pages on compares bytewise on both backends, whatever PostgreSQL's
 * database collation is: with an en_US database a flows list sorted by name ordered "eclair, Ecĺair,
 * Éclair, Euro flow, same, Same, Same" where SQLite ordered bytes (found by a backend differential
 * test).
 */

const NAMES = ['Éclair', 'eclair', 'Ecĺair', 'Euro flow', 'Same', 'Same', 'same'];
/** UTF-8 byte order (SQLite's BINARY, PostgreSQL's "C"). */
const BYTES = ['Ecĺair', 'Euro flow', 'Same', 'Same', 'eclair', 'same', 'Éclair'];

/** The TEXT columns that lists sort or page on, or break ties with (`id`), or filter with. */
const BYTEWISE: Record<string, readonly string[]> = {
  traffic_flows: ['id', 'slug', 'name'],
  streams: ['id', 'flow_id', 'name'],
  audit_log: ['id', 'operator', 'action', 'target_type', 'target_id'],
  clicks: ['click_id'],
  conversions: ['id', 'click_id'],
  nodes: ['server_id'],
  task_runs: ['run_id', 'task'],
};

interface Case {
  label: string;
  available(): Promise<boolean>;
  open(): Promise<{ storage: Storage; cleanup(): Promise<void> }>;
}

/** A database of its own whose default collation is ICU's en-US, as a cloud PostgreSQL's often is. */
function enUsDatabase(): Case {
  const db = `sluice_coll_${testSchema().slice('sluice_t_'.length)}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  let made: Promise<boolean> | undefined;
  return {
    label: 'postgres (en-US database)',
    available: () => {
      made ??= (async () => {
        if (!(await pgAvailable())) return false;
        try {
          await admin(`CREATE DATABASE ${db} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`);
          return true;
        } catch (err) {
          process.stderr.write(`# no en-US database here (${(err as Error).message}): skipping it\n`);
          return false;
        }
      })();
      return made;
    },
    open: async () => {
      const url = new URL(PG_URL);
      url.pathname = `/${db}`;
      const storage = openPostgres({ url: url.toString(), poolMax: 2, schema: 'sluice', clock: systemClock });
      await storage.migrate();
      return {
        storage,
        cleanup: async () => {
          await storage.close();
          await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
        },
      };
    },
  };
}

const CASES: Case[] = [
  ...BACKENDS.map((b) => ({ label: b.label, available: b.available, open: b.open })),
  enUsDatabase(),
];

for (const c of CASES) {
  describe(`names sort bytewise on ${c.label}`, async () => {
    const available = await c.available();
    let storage: Storage;
    let cleanup: () => Promise<void>;
    before(async () => {
      if (!available) return;
      ({ storage, cleanup } = await c.open());
    });
    after(async () => {
      if (available) await cleanup();
    });
    const it = (name: string, fn: () => Promise<void>) =>
      test(name, { skip: !available && `${c.label} unavailable` }, fn);

    it('flows and streams listed by name, two to a page through cursors, in byte order', async () => {
      const flow = await storage.flows.create(flowInput('parent'));
      for (const [i, name] of NAMES.entries()) {
        await storage.flows.create(flowInput(`f${i}`, { name }));
        await storage.streams.create(streamInput(flow.id, { name }));
      }
      for (const order of ['asc', 'desc'] as const) {
        const flows: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await storage.flows.list({
            filter: {},
            sort: { by: 'name', order },
            limit: 2,
            cursor,
          });
          flows.push(...page.items.map((f) => f.name));
          cursor = page.next_cursor ?? undefined;
        } while (cursor !== undefined);
        const streams: string[] = [];
        do {
          const page = await storage.streams.list({
            filter: { flow_id: flow.id },
            sort: { by: 'name', order },
            limit: 2,
            cursor,
          });
          streams.push(...page.items.map((s) => s.name));
          cursor = page.next_cursor ?? undefined;
        } while (cursor !== undefined);
        const want = order === 'asc' ? BYTES : [...BYTES].reverse();
        assert.deepEqual(
          flows.filter((n) => n !== 'parent'),
          want,
        );
        assert.deepEqual(streams, want);
      }
    });
  });
}

const postgres = BACKENDS.find((b) => b.name === 'postgres')!;
test('PostgreSQL columns that lists sort or page on are COLLATE "C", whatever the database collation', async (t) => {
  if (!(await postgres.available())) return t.skip('postgres unavailable');
  const opened = await postgres.open();
  try {
    const rows = await opened.sql().all<{ tbl: string; col: string; coll: string }>(
      `SELECT c.relname AS tbl, a.attname AS col, co.collname AS coll
       FROM pg_attribute AS a
       JOIN pg_class AS c ON c.oid = a.attrelid
       JOIN pg_collation AS co ON co.oid = a.attcollation
       WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
         AND a.atttypid = 'text'::regtype AND NOT a.attisdropped`,
    );
    const collation = new Map(rows.map((r) => [`${r.tbl}.${r.col}`, r.coll]));
    const want = Object.entries(BYTEWISE).flatMap(([tbl, cols]) => cols.map((col) => `${tbl}.${col}`));
    assert.deepEqual(
      want.map((k) => [k, collation.get(k)]),
      want.map((k) => [k, 'C']),
    );
  } finally {
    await opened.cleanup();
  }
});
