import { ApiError } from '../errors/index.ts';
import type { Row, SqlReader } from './sql.ts';
import { type ColumnKind, idProblem, storableProblem } from './storable.ts';
import type { Page, SortOrder } from './types.ts';

interface CursorState {
  /**
   * The list the cursor pages (its table). Lists share sorts (newest first on `created_at`) and
   * their ids fit each other's columns, so without it a conversions cursor paged the clicks list.
   */
  list: string;
  by: string;
  order: SortOrder;
  value: string | number;
  id: string;
}

export function encodeCursor(c: CursorState): string {
  return Buffer.from(JSON.stringify([c.list, c.by, c.order, c.value, c.id])).toString('base64url');
}

/**
 * The cursor of a page, checked before any query: the same list and sort, and a sort value and id
 * that the sort column and the id column can be compared with on both backends. A cursor is opaque
 * but not trusted (anyone who can list can write one): a string for an integer column, `1e23`, a
 * bad timestamp or U+0000 would otherwise be a PostgreSQL error (500) where SQLite quietly compares.
 * A cursor made before cursors named their list is refused too: it cannot say which list it pages.
 */
export function decodeCursor(
  cursor: string,
  list: string,
  by: string,
  order: SortOrder,
  kind: ColumnKind,
  checkId: (id: unknown) => string | undefined = idProblem,
): CursorState {
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    // the one error below
  }
  if (
    !Array.isArray(parts) ||
    parts.length !== 5 ||
    parts[0] !== list ||
    parts[1] !== by ||
    parts[2] !== order
  ) {
    throw invalidCursor(
      'not a next_cursor of this list and sort; pass next_cursor of a previous page of this list with the same sort',
    );
  }
  const [, , , value, id] = parts as [string, string, SortOrder, unknown, unknown];
  const valueProblem = storableProblem(kind, value);
  if (valueProblem !== undefined) throw invalidCursor(`its ${by} value ${valueProblem}`);
  const idProblemText = checkId(id);
  if (idProblemText !== undefined) throw invalidCursor(`its id ${idProblemText}`);
  return { list, by, order, value: value as string | number, id: id as string };
}

function invalidCursor(why: string): ApiError {
  return new ApiError('validation.invalid_input', `/cursor: ${why}`, {
    details: [{ path: '/cursor', message: why }],
  });
}

export interface KeysetQuery<T> {
  table: string;
  columns: string;
  /** Column = value filters; undefined values are left out. Keys come from a fixed list, never callers. */
  equal: Record<string, unknown>;
  /** Sort column; always one of a fixed allow-list, never caller text. */
  by: string;
  /** Its type, which a cursor's sort value is checked against. */
  kind: ColumnKind;
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
 * between calls, which offset paging cannot promise. `total` counts the whole filtered set, and
 * most sort keys have no index: at 500,000 streams a page is a scan and a top-N sort (0.1–0.3 s),
 * so a SQLite node reads its lists on the reader thread (`exec` is then that thread).
 */
export async function keysetPage<T>(exec: SqlReader, q: KeysetQuery<T>): Promise<Page<T>> {
  // Checked first: a refused cursor sends no query at all.
  const after = q.cursor === undefined ? undefined : decodeCursor(q.cursor, q.table, q.by, q.order, q.kind);
  const set = Object.entries(q.equal).filter(([, v]) => v !== undefined);
  const where = set.map(([k]) => `${k} = ?`);
  const params = set.map(([, v]) => v);
  const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const [count] = await exec.all<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${q.table} ${filter}`, params);
  const cmp = q.order === 'asc' ? '>' : '<';
  if (after !== undefined) {
    where.push(`(${q.by} ${cmp} ? OR (${q.by} = ? AND id ${cmp} ?))`);
    params.push(after.value, after.value, after.id);
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
      ? encodeCursor({ list: q.table, by: q.by, order: q.order, value: q.valueOf(last), id: q.idOf(last) })
      : null;
  return { items, total: Number(count?.n ?? 0), next_cursor };
}
