import type { PostbackKeys } from '../conversions/index.ts';
import type { AcpRouter } from './acp-router.ts';

/**
 * `POST /acp/postback/rotate-key` (admin; docs/clicks.md#postback-keys): a new postback key, in
 * this one answer, replaces the stored one, which stays accepted for `postback.key_grace_hours`;
 * audited as `postback_key.rotate`, never with the key. A configured key is 409 `resource.conflict`.
 */
export function registerPostbackRoutes(acp: AcpRouter, keys: PostbackKeys): void {
  acp.add({
    path: '/acp/postback/rotate-key',
    role: 'admin',
    audit: { action: 'postback_key.rotate', target: () => 'postback_key' },
    handler: async ({ reply }) => {
      const key = await keys.rotate();
      // Shown once: no cache or proxy may keep the answer that carries the key.
      reply.header('cache-control', 'no-store');
      return { key };
    },
  });
}
