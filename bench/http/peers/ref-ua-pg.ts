/**
 * `ref-ua-pg`: the reference program for a PostgreSQL node's `/go` (bench/http/peers/ref-hot-path.ts
 * does the request), every click written to PostgreSQL with `pg`, in batches. As in ref-ua.ts the
 * clicks are buffered as flat values; every 500 ms the buffer becomes statements of at most 10,000
 * clicks (Sluice's PostgreSQL batch size), each sending its clicks as one JSON parameter (a flat
 * array, ten values a click) that PostgreSQL unpacks with `jsonb` indexing, one statement at a
 * time on one connection. `pg`'s I/O is asynchronous, so this runs on the event loop, as Sluice's
 * PostgreSQL batches do.
 *
 * The table lives in a schema of its own (dropped by {@link RefProgram.stop}) and has the indexes
 * of Sluice's click log for the same lookups. Its connection is named by `application_name`, so
 * the harness can find its backend and read the database's CPU from /proc (bench/http/load.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { SluiceScenario } from '../scenarios.ts';
import { type ClickRow, REF_COLUMNS } from './ref-columns.ts';
import { refApp, refFlows } from './ref-hot-path.ts';
import type { RefProgram } from './ref-ua.ts';

const WIDTH = REF_COLUMNS.length;
const FLUSH_MS = 500;
const STATEMENT_MAX_CLICKS = 10_000;

const schemaSql = (schema: string) => `
  CREATE SCHEMA ${schema};
  CREATE TABLE ${schema}.clicks (
    click_id TEXT COLLATE "C" PRIMARY KEY, flow_id TEXT NOT NULL, stream_id TEXT,
    created_at TIMESTAMPTZ NOT NULL, country TEXT, device_type TEXT NOT NULL, os TEXT NOT NULL,
    browser TEXT NOT NULL, sub1 TEXT, is_bot BOOLEAN NOT NULL
  );
  CREATE INDEX ON ${schema}.clicks (created_at, click_id);
  CREATE INDEX ON ${schema}.clicks (flow_id, created_at, click_id);
  CREATE INDEX ON ${schema}.clicks (sub1, created_at, click_id) WHERE sub1 IS NOT NULL;`;

/** Value `k` of click `i` of the flat JSON array `a`. */
const at = (k: number) => `a->>(i * ${WIDTH} + ${k})`;
const insertSql = (schema: string) =>
  `INSERT INTO ${schema}.clicks (${REF_COLUMNS.join(', ')})
   SELECT ${at(0)}, ${at(1)}, ${at(2)}, to_timestamp((${at(3)})::bigint / 1000.0), ${at(4)}, ${at(5)},
     ${at(6)}, ${at(7)}, ${at(8)}, (${at(9)})::int = 1
   FROM (SELECT $1::jsonb AS a) AS v, generate_series(0, jsonb_array_length(a) / ${WIDTH} - 1) AS i`;

/** The `application_name` of the program's connection: its backend's name in `pg_stat_activity`. */
export type RefPgProgram = RefProgram & { applicationName: string };

export async function startRefPostgres(opts: {
  scenario: SluiceScenario;
  url: string;
  port: number;
  host: string;
}): Promise<RefPgProgram> {
  const schema = `ref_bench_${randomBytes(4).toString('hex')}`;
  const db = new pg.Client({ connectionString: opts.url, application_name: schema });
  await db.connect();
  await db.query(schemaSql(schema));
  const insert = insertSql(schema);
  let persisted = 0;
  let chain: Promise<unknown> = Promise.resolve();
  let buf: unknown[] = [];
  const flush = () => {
    if (buf.length === 0) return;
    const values = buf;
    buf = [];
    chain = chain.then(async () => {
      for (let o = 0; o < values.length; o += STATEMENT_MAX_CLICKS * WIDTH) {
        const part = values.slice(o, o + STATEMENT_MAX_CLICKS * WIDTH);
        await db.query(insert, [JSON.stringify(part)]);
        persisted += part.length / WIDTH;
      }
    });
    // A failed batch is lost (a reference keeps no retry queue), and says so.
    chain = chain.catch((err: Error) => console.error(`ref-ua-pg: batch lost: ${err.message}`));
  };
  const timer = setInterval(flush, FLUSH_MS);
  const app = refApp(refFlows(opts.scenario), (row: ClickRow) => {
    for (let i = 0; i < WIDTH; i++) buf.push(row[i]);
  });
  await app.listen({ port: opts.port, host: opts.host });
  return {
    app,
    applicationName: schema,
    persisted: () => persisted,
    rows: async () => {
      const c = new pg.Client({ connectionString: opts.url });
      await c.connect();
      try {
        const r = await c.query(`SELECT COUNT(*) AS n, COUNT(sub1) AS s FROM ${schema}.clicks`);
        return { all: Number(r.rows[0].n), sub1: Number(r.rows[0].s) };
      } finally {
        await c.end();
      }
    },
    stop: async () => {
      clearInterval(timer);
      await app.close();
      flush();
      await chain;
      await db.query(`DROP SCHEMA ${schema} CASCADE`);
      await db.end();
    },
  };
}
