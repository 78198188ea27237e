import { randomUUID } from 'node:crypto';
import { ApiError, hasCode } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import { logPage, logWhere, subsOf, toBool } from './clicks.ts';
import { fromMicros, fromMicrosSum, toMicros } from './money.ts';
import { inList } from './repositories.ts';
import { microsOf, type Row, type SqlExecutor, type SqlReader, sumMicros, toIso, toNum } from './sql.ts';
import { clickIdProblem, idProblem, storableText } from './storable.ts';
import { SUB_COLUMNS } from './sub-ids.ts';
import type {
  ClickRecord,
  ConversionFilter,
  ConversionInput,
  ConversionRecord,
  ConversionStore,
  ConversionSums,
  LogPage,
  LogPageQuery,
} from './types.ts';

/** The click's attribution copied into its conversion, in this order. */
const ATTRIBUTION = [
  'flow_id',
  'stream_id',
  'outcome',
  'country',
  'device_type',
  'os',
  'browser',
  'language',
  'referrer_host',
  ...SUB_COLUMNS,
  'is_unique',
  'is_bot',
] as const;

const OWN = 'id, click_id, txid, status, payout_micros, currency, postbacks, created_at, updated_at';
const COLUMNS = `${OWN}, click_created_at, ${ATTRIBUTION.join(', ')}`;

// The first postback of (click_id, txid) inserts; the next ones update status, payout and currency
// and count themselves. `postbacks = 1` afterwards tells a new conversion on both backends.
const ON_CONFLICT = `ON CONFLICT (click_id, txid) DO UPDATE SET status = excluded.status,
    payout_micros = excluded.payout_micros, currency = excluded.currency,
    postbacks = conversions.postbacks + 1, updated_at = excluded.updated_at
  RETURNING ${COLUMNS}`;

/** PostgreSQL types a parameter in a SELECT list as text; SQLite would read the cast as NUMERIC. */
const ts = (dialect: SqlExecutor['dialect']) => (dialect === 'postgres' ? 'CAST(? AS TIMESTAMPTZ)' : '?');
const own = (dialect: SqlExecutor['dialect']) =>
  `?, ?, ?, ?, CAST(? AS BIGINT), CAST(? AS TEXT), 1, ${ts(dialect)}, ${ts(dialect)}`;

/** Attribution read from the click log in the same statement: no row when the click is unknown. */
const fromClickLog = (dialect: SqlExecutor['dialect']) =>
  `INSERT INTO conversions (${COLUMNS})
   SELECT ${own(dialect)}, c.created_at, ${ATTRIBUTION.map((a) => `c.${a}`).join(', ')}
   FROM clicks AS c WHERE c.click_id = ?
   ${ON_CONFLICT}`;

/**
 * PostgreSQL: the postbacks of a moment in one statement, one round trip (as statements of their
 * own each cost the node's main thread 170–210 µs, most of it the socket write; together ~90 µs).
 * Their own values come as one JSON parameter; a postback whose click is unknown gets no row back.
 */
const fromClickLogMany = `INSERT INTO conversions (${COLUMNS})
   SELECT j.id, j.click_id, j.txid, j.status, j.payout_micros, j.currency, 1, j.created_at, j.updated_at,
     c.created_at, ${ATTRIBUTION.map((a) => `c.${a}`).join(', ')}
   FROM json_to_recordset(CAST(? AS JSON)) AS j(id TEXT, click_id TEXT, txid TEXT, status TEXT,
     payout_micros BIGINT, currency TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ)
   JOIN clicks AS c ON c.click_id = j.click_id
   ${ON_CONFLICT}`;

/** SQLSTATEs of a statement that lost to another one (deadlock, serialization): worth sending again. */
const CONFLICTS = new Set(['40P01', '40001']);

/** Postbacks that share one PostgreSQL statement at most. */
const MANY_MAX = 500;
/**
 * Statements of postbacks go no more often than this on PostgreSQL: a lone postback at once, those
 * that follow within the window together in the next.
 */
const MANY_EVERY_MS = 10;

interface QueuedUpsert {
  /** `click_id`, NUL, `txid` as stored: what the conflict target and a returned row are matched by. */
  key: string;
  own: readonly unknown[];
  clickId: string;
  resolve: (rows: Row[]) => void;
  reject: (err: unknown) => void;
}

/**
 * The upserts of postbacks that name a written click, gathered and sent together (see
 * {@link fromClickLogMany}). One conversion appears once in a statement (PostgreSQL refuses to
 * update a row twice in one): the postback route applies a conversion's postbacks one after
 * another anyway, and a second one that came would wait for the next statement. A statement the
 * database refuses applied nothing: each of its postbacks is then sent alone (all at once), so
 * each answers for itself; one that meets an unavailable database fails every postback in it.
 */
class UpsertsTogether {
  readonly #x: SqlExecutor;
  readonly #alone: string;
  #queue: QueuedUpsert[] = [];
  #running: Promise<void> | undefined;
  #sentAt = Number.NEGATIVE_INFINITY;

  constructor(x: SqlExecutor, alone: string) {
    this.#x = x;
    this.#alone = alone;
  }

  add(key: string, own: readonly unknown[], clickId: string): Promise<Row[]> {
    return new Promise<Row[]>((resolve, reject) => {
      this.#queue.push({ key, own, clickId, resolve, reject });
      this.#running ??= this.#run();
    });
  }

  async #run(): Promise<void> {
    while (this.#queue.length > 0) {
      const wait = this.#sentAt + MANY_EVERY_MS - performance.now();
      await new Promise<void>((r) => (wait > 0 ? setTimeout(r, wait) : setImmediate(r)));
      this.#sentAt = performance.now();
      const keys = new Set<string>();
      const now: QueuedUpsert[] = [];
      const later: QueuedUpsert[] = [];
      for (const u of this.#queue) {
        if (now.length < MANY_MAX && !keys.has(u.key)) {
          keys.add(u.key);
          now.push(u);
        } else later.push(u);
      }
      this.#queue = later;
      if (now.length === 1 || !(await this.#together(now))) await Promise.all(now.map((u) => this.#send(u)));
    }
    this.#running = undefined;
  }

  /** All in one statement; false when it failed (nothing applied). */
  async #together(upserts: readonly QueuedUpsert[]): Promise<boolean> {
    const json = JSON.stringify(
      upserts.map(
        ({ own: [id, click_id, txid, status, payout_micros, currency, created_at, updated_at] }) => ({
          id,
          click_id,
          txid,
          status,
          payout_micros,
          currency,
          created_at,
          updated_at,
        }),
      ),
    );
    let rows: Row[];
    try {
      rows = await this.#x.all(fromClickLogMany, [json]);
    } catch (err) {
      // The server is unreachable (or its connection was lost, the statement perhaps applied):
      // each alone would meet the same, one connection timeout each, with every postback behind
      // them waiting. They fail together, for the network to send again.
      // A deadlock or serialization failure is the statement's luck, not the server's state:
      // alone, each goes through.
      if (!hasCode(err, 'db.unavailable') || CONFLICTS.has(String((err.cause as { code?: unknown })?.code)))
        return false;
      for (const u of upserts) u.reject(err);
      return true;
    }
    const byKey = new Map(rows.map((r) => [`${String(r.click_id)}\u0000${String(r.txid)}`, r]));
    for (const u of upserts) {
      const row = byKey.get(u.key);
      u.resolve(row === undefined ? [] : [row]);
    }
    return true;
  }

  async #send(u: QueuedUpsert): Promise<void> {
    try {
      u.resolve(await this.#x.all(this.#alone, [...u.own, u.clickId]));
    } catch (err) {
      u.reject(err);
    }
  }
}

/** Attribution given by the caller (a click not yet flushed from a node's buffer). */
const fromGiven = `INSERT INTO conversions (${COLUMNS})
   VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ${ATTRIBUTION.map(() => '?').join(', ')})
   ${ON_CONFLICT}`;

const toConversion = (r: Row): ConversionRecord => ({
  conversion_id: String(r.id),
  click_id: String(r.click_id),
  txid: r.txid === '' || r.txid === null || r.txid === undefined ? null : String(r.txid),
  status: r.status as ConversionRecord['status'],
  payout: fromMicros(r.payout_micros),
  currency: String(r.currency),
  postbacks: toNum(r.postbacks),
  created_at: toIso(r.created_at)!,
  updated_at: toIso(r.updated_at)!,
  click_created_at: toIso(r.click_created_at)!,
  flow_id: String(r.flow_id),
  stream_id: r.stream_id === null ? null : String(r.stream_id),
  outcome: r.outcome as ConversionRecord['outcome'],
  country: (r.country ?? null) as string | null,
  device_type: r.device_type as ConversionRecord['device_type'],
  os: String(r.os),
  browser: String(r.browser),
  language: (r.language ?? null) as string | null,
  referrer_host: (r.referrer_host ?? null) as string | null,
  ...subsOf(r),
  is_unique: toBool(r.is_unique),
  is_bot: toBool(r.is_bot),
});

function invalid(path: string, message: string): ApiError {
  return new ApiError('validation.invalid_input', `${path}: ${message}`, { details: [{ path, message }] });
}

/**
 * Conversions, one row per (click_id, txid); an absent txid is stored as '' so that the unique
 * index holds it once on both backends (NULLs never conflict). The click's attribution is copied
 * in: a click row is never changed after it is written, so the copy cannot drift, conversions
 * outlive the click log's retention, and reports sum conversions without joining millions of clicks.
 */
export class SqlConversions implements ConversionStore {
  readonly #x: SqlExecutor;
  readonly #clock: Clock;
  readonly #fromClickLog: string;
  /** Where the list reads (SQLite: the reader thread), as the clicks list does. */
  readonly #read: SqlReader;
  /** Where postbacks write (a SQLite node: the writer thread, whose commits hold no event loop). */
  readonly #write: SqlReader;
  /** PostgreSQL: postbacks that arrive together go in one statement. */
  readonly #together: UpsertsTogether | undefined;

  constructor(x: SqlExecutor, clock: Clock, read: SqlReader = x, write: SqlReader = x) {
    this.#x = x;
    this.#clock = clock;
    this.#fromClickLog = fromClickLog(x.dialect);
    this.#read = read;
    this.#write = write;
    this.#together = x.dialect === 'postgres' ? new UpsertsTogether(x, this.#fromClickLog) : undefined;
  }

  async upsert(
    input: ConversionInput,
    click?: ClickRecord,
  ): Promise<{ conversion: ConversionRecord; created: boolean } | undefined> {
    const idProblemText = clickIdProblem(input.click_id);
    if (idProblemText !== undefined) throw invalid('/click_id', idProblemText);
    const payout = toMicros(input.payout);
    if (payout === undefined) throw invalid('/payout', 'must be a decimal from 0 to 9007199254.740991');
    const now = new Date(this.#clock.now()).toISOString();
    const own = [
      randomUUID(),
      input.click_id,
      storableText(input.txid ?? ''),
      input.status,
      payout,
      storableText(input.currency),
      now,
      now,
    ];
    let rows: Row[];
    if (click === undefined) {
      rows =
        this.#together === undefined
          ? await this.#write.all(this.#fromClickLog, [...own, input.click_id])
          : await this.#together.add(`${input.click_id}\u0000${own[2]}`, own, input.click_id);
    } else {
      if (click.click_id !== input.click_id) throw new Error('upsert: the click given is not the postback’s');
      rows = await this.#write.all(fromGiven, [
        ...own,
        click.created_at,
        ...ATTRIBUTION.map((a) => click[a]),
      ]);
    }
    const row = rows[0];
    if (row === undefined) return undefined;
    const conversion = toConversion(row);
    return { conversion, created: conversion.postbacks === 1 };
  }

  async list(q: LogPageQuery<ConversionFilter>): Promise<LogPage<ConversionRecord>> {
    const f = q.filter;
    const { where, params } = logWhere(
      { flow_id: f.flow_id, stream_id: f.stream_id, status: f.status },
      f.from,
      f.to,
    );
    return logPage(this.#read, {
      table: 'conversions',
      columns: COLUMNS,
      idColumn: 'id',
      where,
      params,
      limit: q.limit,
      cursor: q.cursor,
      checkId: idProblem,
      map: toConversion,
      idOf: (c) => c.conversion_id,
    });
  }

  async ofClick(clickId: string): Promise<ConversionRecord[]> {
    if (clickIdProblem(clickId) !== undefined) return [];
    return (
      await this.#x.all(`SELECT ${COLUMNS} FROM conversions WHERE click_id = ? ORDER BY created_at, id`, [
        clickId,
      ])
    ).map(toConversion);
  }

  async sumsBy(
    column: 'flow_id' | 'stream_id',
    ids: readonly string[],
  ): Promise<Map<string, ConversionSums>> {
    const out = new Map<string, ConversionSums>();
    if (ids.length === 0) return out;
    // Micro-units summed by the database are exact (an integer sum on both backends); ORDER BY
    // currency makes each revenue object's keys come out sorted on both backends alike.
    const rows = await this.#x.all(
      `SELECT ${column} AS k, currency, COUNT(*) AS n, ${sumMicros('payout_micros', 'micros')} FROM conversions
       WHERE ${column} IN (${inList(ids)}) AND status <> 'rejected'
       GROUP BY ${column}, currency ORDER BY ${column}, currency`,
      ids,
    );
    for (const r of rows) {
      const key = String(r.k);
      let sums = out.get(key);
      if (sums === undefined) {
        sums = { conversions: 0, revenue: {} };
        out.set(key, sums);
      }
      sums.conversions += toNum(r.n);
      sums.revenue[String(r.currency)] = fromMicrosSum(microsOf(r, 'micros'));
    }
    return out;
  }
}
