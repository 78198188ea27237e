import { Type } from '@sinclair/typebox';
import type { OperatorDirectory } from '../auth/index.ts';
import { OPERATOR_NAME_PATTERN, ROLES } from '../config/index.ts';
import type { AcpRouter } from './acp-router.ts';

const strict = { additionalProperties: false } as const;
const Name = Type.String({ pattern: OPERATOR_NAME_PATTERN });

export const OperatorListBody = Type.Object(
  { include_revoked: Type.Optional(Type.Boolean({ default: false })) },
  strict,
);
export const OperatorCreateBody = Type.Object(
  { name: Name, role: Type.Union(ROLES.map((r) => Type.Literal(r))) },
  strict,
);
export const OperatorRevokeBody = Type.Object({ name: Name }, strict);

/**
 * Operators over the ACP (admin, docs/audit.md#operators-over-the-acp-admin): list (never a token
 * or its hash), create (the token in this one answer), revoke; creating and revoking are audited as
 * `operator.create` / `operator.revoke` with the operator's name as the target — never its token.
 */
export function registerOperatorRoutes(acp: AcpRouter, operators: OperatorDirectory): void {
  acp.add({
    path: '/acp/operators/list',
    role: 'admin',
    body: OperatorListBody,
    handler: async ({ body }) => {
      const items = await operators.list({ includeRevoked: body.include_revoked ?? false });
      return { items, total: items.length };
    },
  });
  acp.add({
    path: '/acp/operators/create',
    role: 'admin',
    body: OperatorCreateBody,
    audit: { action: 'operator.create', target: ({ body }) => body.name },
    handler: async ({ body, reply }) => {
      const created = await operators.create(body.name, body.role);
      // Shown once: no cache or proxy may keep the answer that carries the token.
      reply.code(201).header('cache-control', 'no-store');
      return created;
    },
  });
  acp.add({
    path: '/acp/operators/revoke',
    role: 'admin',
    body: OperatorRevokeBody,
    audit: { action: 'operator.revoke', target: ({ body }) => body.name },
    handler: ({ body, principal }) => operators.revoke(body.name, principal),
  });
}
