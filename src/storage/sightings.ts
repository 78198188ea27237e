import { BatchStatement } from './batch.ts';
import { deleteInChunks, type Row, type SqlExecutor, toIso, toNum } from './sql.ts';
import { storableText } from './storable.ts';
import type { ChunkedDelete, Sighting, SightingPage, SightingStore } from './types.ts';

const INSERT = new BatchStatement({
  columns: ['text', 'bigint', 'timestamptz', 'text'],
  sqlite:
    'INSERT INTO click_sightings (flow_id, visitor_key, first_seen_at, server_id) VALUES (?1, ?2, ?3, ?4)',
  postgres: `INSERT INTO click_sightings (flow_id, visitor_key, first_seen_at, server_id)
    SELECT * FROM {rows} AS r (flow_id, visitor_key, first_seen_at, server_id)`,
});

const PRUNE_CHUNK = 5000;

const toSighting = (r: Row): Sighting => ({
  flow_id: String(r.flow_id),
  visitor_key: toNum(r.visitor_key),
  first_seen_at: Date.parse(toIso(r.first_seen_at)!),
});

/**
 * Writers on PostgreSQL hold this lock from before their insert to their commit. It conflicts with
 * itself and with other writes of the table, not with reads: inserts into the table happen one
 * transaction after another, so `seq` values become visible in increasing order and a reader that
 * has seen a seq will never see a smaller one appear later. (Without it, an insert that drew its
 * seqs first but committed last would be skipped by a reader that had moved past them.)
 */
const PG_WRITE_LOCK = 'LOCK TABLE click_sightings IN SHARE ROW EXCLUSIVE MODE';

/**
 * The newest seq and the rows after the cursor in one statement, so both come from one snapshot:
 * with commits in seq order, every row up to `top` is visible to it.
 */
const AFTER = `
  SELECT t.top, o.seq, o.flow_id, o.visitor_key, o.first_seen_at
  FROM (SELECT COALESCE(MAX(seq), 0) AS top FROM click_sightings) AS t LEFT JOIN (
    SELECT seq, flow_id, visitor_key, first_seen_at FROM click_sightings
    WHERE seq > ? AND server_id <> ? ORDER BY seq LIMIT ?
  ) AS o ON 1 = 1`;

const openQuery = (paged: boolean) => `
  SELECT t.top, o.seq, o.flow_id, o.visitor_key, o.first_seen_at
  FROM (SELECT COALESCE(MAX(seq), 0) AS top FROM click_sightings) AS t LEFT JOIN (
    SELECT seq, flow_id, visitor_key, first_seen_at FROM click_sightings
    WHERE ${paged ? '(first_seen_at, seq) > (?, ?)' : 'first_seen_at >= ?'}
    ORDER BY first_seen_at, seq LIMIT ?
  ) AS o ON 1 = 1`;
const OPEN_FIRST = openQuery(false);
const OPEN_AFTER = openQuery(true);
/** The newest open window beyond those to keep: loading starts after it. */
const OPEN_CUTOFF = `SELECT first_seen_at, seq FROM click_sightings WHERE first_seen_at >= ?
  ORDER BY first_seen_at DESC, seq DESC LIMIT 1 OFFSET ?`;

/** Where an `open` page ends: the last row's time (ISO) and seq. */
function parseOpenCursor(cursor: string): [string, number] {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|(\d{1,16})$/.exec(cursor);
  if (m === null) throw new Error(`sightings: not an open() cursor: ${JSON.stringify(cursor)}`);
  return [m[1]!, Number(m[2])];
}

function parseCursor(cursor: string): number {
  if (!/^\d{1,16}$/.test(cursor)) throw new Error(`sightings: not a cursor: ${JSON.stringify(cursor)}`);
  return Number(cursor);
}

const present = (r: Row) => r.flow_id !== null && r.flow_id !== undefined;
const cursorOf = (r: Row) => `${toIso(r.first_seen_at)}|${toNum(r.seq)}`;

/** Where a SQLite node writes sightings instead of its own connection: its writer thread. */
export interface SightingWriter {
  addSightings(serverId: string, rows: readonly Sighting[]): Promise<number>;
  run(sql: string, params: readonly unknown[]): Promise<number>;
}

/**
 * The first sightings nodes share (migration 10), and a single node keeps for its next start; see
 * {@link SightingStore}. On a SQLite node, inserts and pruning go to the writer thread when there
 * is one (`writer`), as the click log's do: the event loop never holds a write transaction.
 */
export class SqlSightings implements SightingStore {
  readonly #x: SqlExecutor;
  readonly #writer: SightingWriter | undefined;

  constructor(x: SqlExecutor, writer?: SightingWriter) {
    this.#x = x;
    this.#writer = writer;
  }

  add(serverId: string, rows: readonly Sighting[]): Promise<number> {
    if (rows.length === 0) return Promise.resolve(0);
    if (this.#writer !== undefined) return this.#writer.addSightings(serverId, rows);
    const values = rows.map((s) => [
      storableText(s.flow_id),
      s.visitor_key,
      new Date(s.first_seen_at).toISOString(),
      serverId,
    ]);
    if (this.#x.dialect === 'sqlite') return this.#x.batch(INSERT, values);
    return this.#x.transaction(async (tx) => {
      await tx.run(PG_WRITE_LOCK);
      return tx.batch(INSERT, values);
    });
  }

  /**
   * The open windows oldest first, a page at a time (`after`: the last page's `next`, or where
   * {@link openStart} says to begin): in the order a window's entries must be learned (each ends
   * after the one before), without holding a million rows at once.
   */
  async open(since: number, limit: number, after?: string): Promise<SightingPage> {
    const from = new Date(since).toISOString();
    const rows =
      after === undefined
        ? await this.#x.all(OPEN_FIRST, [from, limit])
        : // A cursor is a row at or after `since` (the last page's, or openStart's): the row value
          // alone bounds the index range (with `since` beside it, SQLite walked from `since` each page).
          await this.#x.all(OPEN_AFTER, [...parseOpenCursor(after), limit]);
    const found = rows.filter(present);
    const last = found.at(-1);
    return {
      rows: found.map(toSighting),
      cursor: String(toNum(rows[0]!.top)),
      more: false,
      ...(found.length === limit && last !== undefined ? { next: cursorOf(last) } : {}),
    };
  }

  /** Where to start {@link open} to get only the newest `keep` open windows; undefined: from the oldest. */
  async openStart(since: number, keep: number): Promise<string | undefined> {
    const [row] = await this.#x.all(OPEN_CUTOFF, [new Date(since).toISOString(), keep]);
    return row === undefined ? undefined : cursorOf(row);
  }

  async after(cursor: string, serverId: string, limit: number): Promise<SightingPage> {
    const from = parseCursor(cursor);
    const rows = await this.#x.all(AFTER, [from, serverId, limit]);
    const found = rows.filter(present);
    const more = found.length === limit;
    // A full page: go on from its last row. Otherwise everything up to the newest seq was seen
    // (this node's own rows included); a cursor never goes back (pruning may lower the maximum).
    const next = more ? toNum(found.at(-1)!.seq) : Math.max(from, toNum(rows[0]!.top));
    return { rows: found.map(toSighting), cursor: String(next), more };
  }

  async prune(before: number, opts: ChunkedDelete = {}): Promise<number> {
    return deleteInChunks(
      this.#writer ?? this.#x,
      `DELETE FROM click_sightings WHERE seq IN
         (SELECT seq FROM click_sightings WHERE first_seen_at < ? ORDER BY first_seen_at LIMIT ?)`,
      [new Date(before).toISOString()],
      opts.chunkRows ?? PRUNE_CHUNK,
      opts.signal,
    );
  }
}
