import { randomUUID } from 'node:crypto';
import type { Role } from '../config/index.ts';
import type { Clock } from '../time/index.ts';
import { toBool } from './clicks.ts';
import { type Fence, fenceClause } from './cluster-store.ts';
import { fromMicros, toMicros } from './money.ts';
import { keysetPage } from './paging.ts';
import { type Row, type SqlExecutor, type SqlReader, toIso, toNum } from './sql.ts';
import { type ColumnKind, storableText } from './storable.ts';
import type {
  FlowFilter,
  FlowInput,
  FlowRecord,
  FlowSortKey,
  FlowStore,
  OperatorRecord,
  OperatorStore,
  Page,
  PageQuery,
  StreamFilter,
  StreamInput,
  StreamRecord,
  StreamSortKey,
  StreamStore,
  StreamTarget,
} from './types.ts';
import { MAX_IN_LIST } from './types.ts';

const iso = (clock: Clock) => new Date(clock.now()).toISOString();

const OPERATOR_COLUMNS = 'id, name, role, created_at, revoked_at';
const toOperator = (r: Row): OperatorRecord => ({
  id: toNum(r.id),
  name: String(r.name),
  role: r.role as Role,
  created_at: toIso(r.created_at)!,
  revoked_at: toIso(r.revoked_at),
});

export class SqlOperators implements OperatorStore {
  readonly #x: SqlExecutor;
  readonly #clock: Clock;
  constructor(x: SqlExecutor, clock: Clock) {
    this.#x = x;
    this.#clock = clock;
  }
  async create(name: string, role: Role, tokenSha256: string): Promise<OperatorRecord> {
    const [row] = await this.#x.all(
      `INSERT INTO operators (name, role, token_sha256, created_at) VALUES (?, ?, ?, ?) RETURNING ${OPERATOR_COLUMNS}`,
      [name, role, tokenSha256.toLowerCase(), iso(this.#clock)],
    );
    return toOperator(row!);
  }
  async list(): Promise<OperatorRecord[]> {
    return (await this.#x.all(`SELECT ${OPERATOR_COLUMNS} FROM operators ORDER BY id`)).map(toOperator);
  }
  async findActiveByTokenHash(tokenSha256: string): Promise<OperatorRecord | undefined> {
    const [row] = await this.#x.all(
      `SELECT ${OPERATOR_COLUMNS} FROM operators WHERE token_sha256 = ? AND revoked_at IS NULL`,
      [tokenSha256],
    );
    return row && toOperator(row);
  }
  async revoke(name: string): Promise<boolean> {
    return (
      (await this.#x.run('UPDATE operators SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL', [
        iso(this.#clock),
        name,
      ])) > 0
    );
  }
  async countActive(): Promise<number> {
    const [row] = await this.#x.all<{ n: unknown }>(
      'SELECT COUNT(*) AS n FROM operators WHERE revoked_at IS NULL',
    );
    return toNum(row?.n);
  }
}

const FLOW_COLUMNS =
  'id, slug, name, status, rotation, forward_query, bot_action, timezone, cost_per_click_micros, currency, clicks, no_match, bots, uniques, last_click_at, version, created_at, updated_at';
const toFlow = (r: Row): FlowRecord => ({
  id: String(r.id),
  slug: String(r.slug),
  name: String(r.name),
  status: r.status as FlowRecord['status'],
  rotation: r.rotation as FlowRecord['rotation'],
  forward_query: toBool(r.forward_query),
  bot_action: r.bot_action as FlowRecord['bot_action'],
  timezone: String(r.timezone),
  cost_per_click: fromMicros(r.cost_per_click_micros),
  currency: String(r.currency),
  clicks: toNum(r.clicks),
  no_match: toNum(r.no_match),
  bots: toNum(r.bots),
  uniques: toNum(r.uniques),
  last_click_at: toIso(r.last_click_at),
  version: toNum(r.version),
  created_at: toIso(r.created_at)!,
  updated_at: toIso(r.updated_at)!,
});

/** `?, ?, ?` for an `IN (...)` list, refused beyond {@link MAX_IN_LIST} values. */
export function inList(values: readonly unknown[]): string {
  if (values.length > MAX_IN_LIST) throw new RangeError(`at most ${MAX_IN_LIST} values in one IN list`);
  return values.map(() => '?').join(', ');
}

/** Builds `SET a = ?, b = ?` from the defined keys of a change set (keys from a fixed list only). */
function setClause(
  changes: Record<string, unknown>,
  allowed: readonly string[],
  encode: (k: string, v: unknown) => unknown,
) {
  const keys = allowed.filter((k) => changes[k] !== undefined);
  return { sql: keys.map((k) => `${k} = ?`).join(', '), params: keys.map((k) => encode(k, changes[k])) };
}

const FLOW_MUTABLE = [
  'slug',
  'name',
  'status',
  'rotation',
  'forward_query',
  'bot_action',
  'timezone',
  'cost_per_click_micros',
  'currency',
] as const;
/**
 * Values as both backends take them: booleans as 0/1 on SQLite (PostgreSQL's is BOOLEAN), money
 * as micro-units (src/storage/money.ts).
 */
const encodeFlow = (dialect: string) => (k: string, v: unknown) =>
  k === 'forward_query' && dialect === 'sqlite' ? (v ? 1 : 0) : v;
/** A flow change set with money in the column's unit. */
function flowColumns(changes: Partial<FlowInput>): Record<string, unknown> {
  const { cost_per_click, ...rest } = changes;
  return cost_per_click === undefined
    ? rest
    : { ...rest, cost_per_click_micros: toMicros(cost_per_click) ?? 0 };
}

/** Column types of the sort keys (migration 2), which a list cursor is checked against. */
const FLOW_SORT_KIND: Record<FlowSortKey, ColumnKind> = {
  created_at: 'timestamp',
  slug: 'text',
  name: 'text',
  clicks: 'int8',
};
const STREAM_SORT_KIND: Record<StreamSortKey, ColumnKind> = {
  position: 'int4',
  created_at: 'timestamp',
  name: 'text',
  hits: 'int8',
};

export class SqlFlows implements FlowStore {
  readonly #x: SqlExecutor;
  readonly #clock: Clock;
  /** Where lists read: each page counts and sorts the filtered set (see {@link keysetPage}). */
  readonly #read: SqlReader;
  constructor(x: SqlExecutor, clock: Clock, read: SqlReader = x) {
    this.#x = x;
    this.#clock = clock;
    this.#read = read;
  }
  async create(input: FlowInput): Promise<FlowRecord> {
    const now = iso(this.#clock);
    const [row] = await this.#x.all(
      `INSERT INTO traffic_flows (id, slug, name, status, rotation, forward_query, bot_action, timezone,
         cost_per_click_micros, currency, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${FLOW_COLUMNS}`,
      [
        randomUUID(),
        input.slug,
        input.name,
        input.status,
        input.rotation,
        encodeFlow(this.#x.dialect)('forward_query', input.forward_query ?? false),
        input.bot_action ?? 'route',
        input.timezone ?? 'UTC',
        toMicros(input.cost_per_click ?? 0) ?? 0,
        input.currency ?? 'USD',
        now,
        now,
      ],
    );
    return toFlow(row!);
  }
  async get(id: string): Promise<FlowRecord | undefined> {
    const [row] = await this.#x.all(`SELECT ${FLOW_COLUMNS} FROM traffic_flows WHERE id = ?`, [id]);
    return row && toFlow(row);
  }
  async getBySlug(slug: string): Promise<FlowRecord | undefined> {
    const [row] = await this.#x.all(`SELECT ${FLOW_COLUMNS} FROM traffic_flows WHERE slug = ?`, [slug]);
    return row && toFlow(row);
  }
  async bySlugs(slugs: readonly string[]): Promise<FlowRecord[]> {
    if (slugs.length === 0) return [];
    return (
      await this.#x.all(`SELECT ${FLOW_COLUMNS} FROM traffic_flows WHERE slug IN (${inList(slugs)})`, slugs)
    ).map(toFlow);
  }
  async update(
    id: string,
    changes: Partial<FlowInput>,
    expectedVersion?: number,
  ): Promise<FlowRecord | undefined> {
    const set = setClause(flowColumns(changes), FLOW_MUTABLE, encodeFlow(this.#x.dialect));
    const guard = expectedVersion === undefined ? '' : ' AND version = ?';
    const [row] = await this.#x.all(
      `UPDATE traffic_flows SET ${set.sql ? `${set.sql}, ` : ''}version = version + 1, updated_at = ?
       WHERE id = ?${guard} RETURNING ${FLOW_COLUMNS}`,
      [...set.params, iso(this.#clock), id, ...(expectedVersion === undefined ? [] : [expectedVersion])],
    );
    return row && toFlow(row);
  }
  async delete(id: string): Promise<FlowRecord | undefined> {
    return this.#x.transaction(async (tx) => {
      const [row] = await tx.all(`SELECT ${FLOW_COLUMNS} FROM traffic_flows WHERE id = ?`, [id]);
      if (!row) return undefined;
      // Explicit, so it holds even where foreign keys are not enforced.
      await tx.run('DELETE FROM streams WHERE flow_id = ?', [id]);
      await tx.run('DELETE FROM traffic_flows WHERE id = ?', [id]);
      // Its clicks stay, and their money is in its currency (reports read it from here).
      await tx.run('INSERT INTO deleted_flows (id, currency) VALUES (?, ?) ON CONFLICT (id) DO NOTHING', [
        id,
        row.currency,
      ]);
      return toFlow(row);
    });
  }
  list(q: PageQuery<FlowFilter, FlowSortKey>): Promise<Page<FlowRecord>> {
    return keysetPage(this.#read, {
      table: 'traffic_flows',
      columns: FLOW_COLUMNS,
      equal: { status: q.filter.status, slug: q.filter.slug },
      by: q.sort.by,
      kind: FLOW_SORT_KIND[q.sort.by],
      order: q.sort.order,
      limit: q.limit,
      cursor: q.cursor,
      map: toFlow,
      valueOf: (f) => f[q.sort.by],
      idOf: (f) => f.id,
    });
  }
}

const STREAM_COLUMNS =
  'id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code, redirect_mode, daily_cap, hits, uniques, last_hit_at, target_status, target_checked_at, target_error, version, created_at, updated_at';
const toStream = (r: Row): StreamRecord => ({
  id: String(r.id),
  flow_id: String(r.flow_id),
  name: String(r.name),
  type: r.type as StreamRecord['type'],
  position: toNum(r.position),
  weight: toNum(r.weight),
  status: r.status as StreamRecord['status'],
  filters: JSON.parse(String(r.filters)) as StreamRecord['filters'],
  target_url: String(r.target_url),
  redirect_code: toNum(r.redirect_code) as StreamRecord['redirect_code'],
  redirect_mode: r.redirect_mode as StreamRecord['redirect_mode'],
  daily_cap: toNum(r.daily_cap),
  hits: toNum(r.hits),
  uniques: toNum(r.uniques),
  last_hit_at: toIso(r.last_hit_at),
  target_status: (r.target_status ?? null) as StreamRecord['target_status'],
  target_checked_at: toIso(r.target_checked_at),
  target_error: (r.target_error ?? null) as string | null,
  version: toNum(r.version),
  created_at: toIso(r.created_at)!,
  updated_at: toIso(r.updated_at)!,
});

const STREAM_MUTABLE = [
  'name',
  'type',
  'position',
  'weight',
  'status',
  'filters',
  'target_url',
  'redirect_code',
  'redirect_mode',
  'daily_cap',
] as const;
const encodeStream = (k: string, v: unknown) => (k === 'filters' ? JSON.stringify(v) : v);
/** What `targets.check` records on a stream (migration 3); null together: never checked. */
const TARGET_CHECK_COLUMNS = ['target_status', 'target_error', 'target_checked_at'] as const;

export class SqlStreams implements StreamStore {
  readonly #x: SqlExecutor;
  readonly #clock: Clock;
  /** Where lists read: each page counts and sorts the filtered set (see {@link keysetPage}). */
  readonly #read: SqlReader;
  constructor(x: SqlExecutor, clock: Clock, read: SqlReader = x) {
    this.#x = x;
    this.#clock = clock;
    this.#read = read;
  }
  async create(s: StreamInput): Promise<StreamRecord> {
    const now = iso(this.#clock);
    const [row] = await this.#x.all(
      `INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code,
         redirect_mode, daily_cap, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${STREAM_COLUMNS}`,
      [
        randomUUID(),
        s.flow_id,
        s.name,
        s.type,
        s.position,
        s.weight,
        s.status,
        JSON.stringify(s.filters),
        s.target_url,
        s.redirect_code,
        s.redirect_mode ?? 'http',
        s.daily_cap ?? 0,
        now,
        now,
      ],
    );
    return toStream(row!);
  }
  async get(id: string): Promise<StreamRecord | undefined> {
    const [row] = await this.#x.all(`SELECT ${STREAM_COLUMNS} FROM streams WHERE id = ?`, [id]);
    return row && toStream(row);
  }
  async update(
    id: string,
    changes: Partial<Omit<StreamInput, 'flow_id'>>,
    expectedVersion?: number,
  ): Promise<StreamRecord | undefined> {
    const set = setClause(changes, STREAM_MUTABLE, encodeStream);
    // A new target has not been checked: the last check's result (an "unreachable" badge) was about
    // the old one. The right-hand sides read the row as it was, so an unchanged URL keeps it.
    const url = changes.target_url;
    const reset =
      url === undefined
        ? []
        : TARGET_CHECK_COLUMNS.map((c) => `${c} = CASE WHEN target_url = ? THEN ${c} END, `);
    const guard = expectedVersion === undefined ? '' : ' AND version = ?';
    const [row] = await this.#x.all(
      `UPDATE streams SET ${set.sql ? `${set.sql}, ` : ''}${reset.join('')}version = version + 1, updated_at = ?
       WHERE id = ?${guard} RETURNING ${STREAM_COLUMNS}`,
      [
        ...set.params,
        ...reset.map(() => url),
        iso(this.#clock),
        id,
        ...(expectedVersion === undefined ? [] : [expectedVersion]),
      ],
    );
    return row && toStream(row);
  }
  async delete(id: string): Promise<StreamRecord | undefined> {
    const [row] = await this.#x.all(`DELETE FROM streams WHERE id = ? RETURNING ${STREAM_COLUMNS}`, [id]);
    return row && toStream(row);
  }
  list(q: PageQuery<StreamFilter, StreamSortKey>): Promise<Page<StreamRecord>> {
    return keysetPage(this.#read, {
      table: 'streams',
      columns: STREAM_COLUMNS,
      equal: { flow_id: q.filter.flow_id, status: q.filter.status, type: q.filter.type },
      by: q.sort.by,
      kind: STREAM_SORT_KIND[q.sort.by],
      order: q.sort.order,
      limit: q.limit,
      cursor: q.cursor,
      map: toStream,
      valueOf: (s) => s[q.sort.by],
      idOf: (s) => s.id,
    });
  }
  async setTargetStatus(
    id: string,
    targetUrl: string,
    status: 'ok' | 'unreachable',
    error: string | null,
    checkedAt: string,
    fence?: Fence,
  ): Promise<boolean> {
    const ts = this.#x.dialect === 'postgres' ? 'CAST(? AS TIMESTAMPTZ)' : '?';
    const f = fenceClause(fence);
    const n = await this.#x.run(
      `UPDATE streams SET target_status = ?, target_error = ?, target_checked_at = ${ts}
       WHERE id = ? AND target_url = ?${f.sql}`,
      [status, storableText(error), checkedAt, id, targetUrl, ...f.params],
    );
    return n === 1;
  }

  async ofFlow(flowId: string): Promise<StreamRecord[]> {
    return (
      await this.#x.all(`SELECT ${STREAM_COLUMNS} FROM streams WHERE flow_id = ? ORDER BY position, id`, [
        flowId,
      ])
    ).map(toStream);
  }

  async ofFlows(flowIds: readonly string[]): Promise<StreamRecord[]> {
    if (flowIds.length === 0) return [];
    return (
      await this.#x.all(
        `SELECT ${STREAM_COLUMNS} FROM streams WHERE flow_id IN (${inList(flowIds)}) ORDER BY flow_id, position, id`,
        flowIds,
      )
    ).map(toStream);
  }

  async activeTargets(afterId: string | undefined, limit: number): Promise<StreamTarget[]> {
    // On streams_status_id (status, id): the page starts where the last one ended, whatever the size.
    const rows = await this.#x.all(
      `SELECT s.id, s.flow_id, f.slug, s.target_url FROM streams AS s JOIN traffic_flows AS f ON f.id = s.flow_id
       WHERE s.status = 'active'${afterId === undefined ? '' : ' AND s.id > ?'} ORDER BY s.id LIMIT ?`,
      afterId === undefined ? [limit] : [afterId, limit],
    );
    return rows.map((r) => ({
      id: String(r.id),
      flow_id: String(r.flow_id),
      flow_slug: String(r.slug),
      target_url: String(r.target_url),
    }));
  }
}
