import { Type } from '@sinclair/typebox';
import { Text } from '../config/index.ts';
import { PAGE_LIMIT_DEFAULT, PageCursor, PageLimit } from '../routing/index.ts';
import type { AuditStore } from '../storage/index.ts';
import type { AcpRouter } from './acp-router.ts';
import { range, Timestamp } from './clicks-routes.ts';

const strict = { additionalProperties: false } as const;

export const AuditListBody = Type.Object(
  {
    filter: Type.Optional(
      Type.Object(
        {
          operator: Type.Optional(Text({ minLength: 1, maxLength: 64 })),
          /** `<target_type>.<verb>`, e.g. `flow.delete`. */
          action: Type.Optional(Type.String({ pattern: '^[a-z_]{1,32}\\.[a-z_]{1,32}$' })),
          target_type: Type.Optional(Type.String({ pattern: '^[a-z_]{1,32}$' })),
          target_id: Type.Optional(Text({ minLength: 1, maxLength: 200 })),
          /** ISO-8601 date or date-time with a zone, as the click log's lists take it; `to` exclusive. */
          from: Type.Optional(Timestamp),
          to: Type.Optional(Timestamp),
        },
        strict,
      ),
    ),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(PageCursor),
  },
  strict,
);

/**
 * `POST /acp/audit/list` (admin): who changed what, newest first, keyset-paged like the click log
 * (`{items, total, total_capped, next_cursor}`).
 */
export function registerAuditRoutes(acp: AcpRouter, store: AuditStore): void {
  acp.add({
    path: '/acp/audit/list',
    role: 'admin',
    body: AuditListBody,
    handler: ({ body }) =>
      store.list({
        filter: range(body.filter),
        limit: body.limit ?? PAGE_LIMIT_DEFAULT,
        cursor: body.cursor,
      }),
  });
}
