import { ApiError } from '../errors/index.ts';
import type { Row, SqlExecutor } from './sql.ts';
import type { Page, SortOrder } from './types.ts';

interface CursorState {
  by: string;
  order: SortOrder;
  value: string | number;
  id: string;
}

export function encodeCursor(c: CursorState): string {
  return Buffer.from(JSON.stringify([c.by, c.order, c.value, c.id])).toString('base64url');
}

export function decodeCursor(cursor: string, by: string, order: SortOrder): CursorState {
  try {
    const [cBy, cOrder, value, id] = JSON.parse(
      Buffer.from(cursor, 'base64url').toString('utf8'),
    ) as unknown[];
    if (
      cBy === by &&
      cOrder === order &&
      (typeof value === 'string' || typeof value === 'number') &&
      typeof id === 'string'
    ) {
      return { by, order, value, id };
    }
  } catch {
    // fall through to the one error below
  }
  throw new ApiError('validation.invalid_input', 'The cursor is not valid for this query.', {
    details: [{ path: '/cursor', message: 'pass next_cursor of a previous page with the same sort' }],
  });
}

export interface KeysetQuery<T> {
  table: string;
  columns: string;
  /** Column = value filters; undefined values are left out. Keys come from a fixed list, never callers. */
  equal: Record<string, unknown>;
  /** Sort column; always one of a fixed allow-list, never caller text. */
  by: string;
  order: SortOrder;
  limit: number;
  cursor: string | undefined;
  map: (row: Row) => T;
  /** The sort value of an item, as stored (for the next cursor). */
  valueOf: (item: T) => string | number;
  idOf: (item: T) => string;
}

/**
 * Keyset paging on (sort column, id): a page never repeats or skips rows when rows are inserted
 * between calls, which offset paging cannot promise. `total` counts the whole filtered set.
 */
export async function keysetPage<T>(exec: SqlExecutor, q: KeysetQuery<T>): Promise<Page<T>> {
  const set = Object.entries(q.equal).filter(([, v]) => v !== undefined);
  const where = set.map(([k]) => `${k} = ?`);
  const params = set.map(([, v]) => v);
  const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const [count] = await exec.all<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${q.table} ${filter}`, params);
  const cmp = q.order === 'asc' ? '>' : '<';
  if (q.cursor !== undefined) {
    const c = decodeCursor(q.cursor, q.by, q.order);
    where.push(`(${q.by} ${cmp} ? OR (${q.by} = ? AND id ${cmp} ?))`);
    params.push(c.value, c.value, c.id);
  }
  const dir = q.order === 'asc' ? 'ASC' : 'DESC';
  const rows = await exec.all(
    `SELECT ${q.columns} FROM ${q.table} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${q.by} ${dir}, id ${dir} LIMIT ?`,
    [...params, q.limit + 1],
  );
  const items = rows.slice(0, q.limit).map(q.map);
  const last = items.at(-1);
  const next_cursor =
    rows.length > q.limit && last !== undefined
      ? encodeCursor({ by: q.by, order: q.order, value: q.valueOf(last), id: q.idOf(last) })
      : null;
  return { items, total: Number(count?.n ?? 0), next_cursor };
}
