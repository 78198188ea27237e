import { randomBytes } from 'node:crypto';
import type { Clock } from '../time/index.ts';
import { logPage, logWhere } from './clicks.ts';
import { type Row, type SqlExecutor, toIso } from './sql.ts';
import { idProblem, storableProblem, storableText } from './storable.ts';
import type { AuditEntry, AuditFilter, AuditRecord, AuditStore, LogPage, LogPageQuery } from './types.ts';

const COLUMNS = 'id, created_at, operator, action, target_type, target_id, request_id, server_id';

const toAudit = (r: Row): AuditRecord => ({
  id: String(r.id),
  created_at: toIso(r.created_at)!,
  operator: String(r.operator),
  action: String(r.action),
  target_type: String(r.target_type),
  target_id: String(r.target_id),
  request_id: String(r.request_id),
  server_id: String(r.server_id),
});

let sequence = 0;

/**
 * A row id that sorts as the rows were written on this node, even within one millisecond (the
 * keyset order breaks created_at ties by id): the time, a per-process sequence, then randomness
 * that keeps ids of different nodes apart.
 */
function auditId(now: number): string {
  sequence = (sequence + 1) % 0x1_0000_0000;
  return `${now.toString(16).padStart(12, '0')}-${sequence.toString(16).padStart(8, '0')}-${randomBytes(6).toString('hex')}`;
}

/**
 * The audit log (docs/audit.md) over the shared SQL: rows stamped with this node's clock (the log
 * record of the same write carries the same instant), listed newest first with the click log's
 * keyset paging.
 */
export class SqlAudit implements AuditStore {
  readonly #x: SqlExecutor;
  readonly #clock: Clock;

  constructor(x: SqlExecutor, clock: Clock) {
    this.#x = x;
    this.#clock = clock;
  }

  async append(e: AuditEntry): Promise<AuditRecord> {
    const ts = this.#x.dialect === 'postgres' ? 'CAST(? AS TIMESTAMPTZ)' : '?';
    // The values come from the node (names, ids, request ids already validated), but U+0000 in a
    // stored name must not make the audit of a write fail on PostgreSQL alone.
    const now = this.#clock.now();
    const [row] = await this.#x.all(
      `INSERT INTO audit_log (${COLUMNS}) VALUES (?, ${ts}, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
      [
        auditId(now),
        new Date(now).toISOString(),
        storableText(e.operator),
        storableText(e.action),
        storableText(e.target_type),
        storableText(e.target_id),
        storableText(e.request_id),
        storableText(e.server_id),
      ],
    );
    return toAudit(row!);
  }

  async list(q: LogPageQuery<AuditFilter>): Promise<LogPage<AuditRecord>> {
    const f = q.filter;
    const { where, params } = logWhere(
      { operator: f.operator, action: f.action, target_type: f.target_type, target_id: f.target_id },
      f.from,
      f.to,
    );
    return logPage(this.#x, {
      table: 'audit_log',
      columns: COLUMNS,
      idColumn: 'id',
      where,
      params,
      limit: q.limit,
      cursor: q.cursor,
      checkId: idProblem,
      map: toAudit,
      idOf: (a) => a.id,
    });
  }

  async deleteOlderThan(before: string): Promise<number> {
    const problem = storableProblem('timestamp', before);
    if (problem !== undefined) throw new Error(`deleteOlderThan: before ${problem}`);
    // A week of ACP writes is small (people make them): one statement on the created_at index.
    return this.#x.run('DELETE FROM audit_log WHERE created_at < ?', [before]);
  }
}
