import { Type } from '@sinclair/typebox';
import { Text } from '../config/index.ts';
import type { HttpClient } from '../http-client/index.ts';
import { PAGE_LIMIT_DEFAULT, PageLimit } from '../routing/index.ts';
import type { AcpRouter } from './acp-router.ts';

export const RecentFailuresBody = Type.Object(
  {
    client: Type.Optional(Text({ minLength: 1, maxLength: 128 })),
    task: Type.Optional(Text({ minLength: 1, maxLength: 64 })),
    limit: Type.Optional(PageLimit),
  },
  { additionalProperties: false },
);

/**
 * `POST /acp/http-client/recent-failures` (operator role): the last failed outgoing calls kept in
 * memory, newest first, with URL, headers and payload masked as in the logs — seed procedure 2's
 * "examine the task's HTTP call parameters".
 */
export function registerHttpClientRoutes(acp: AcpRouter, client: HttpClient): void {
  acp.add({
    path: '/acp/http-client/recent-failures',
    role: 'operator',
    body: RecentFailuresBody,
    handler: ({ body }) => {
      const items = client.failures.list({
        client: body.client,
        task: body.task,
        limit: body.limit ?? PAGE_LIMIT_DEFAULT,
      });
      return { items, total: items.length };
    },
  });
}
