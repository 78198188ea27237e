import { randomBytes } from 'node:crypto';
import type { Storage } from '../storage/index.ts';

/** The name the visitor-key secret is kept under in the database. */
export const VISITOR_SECRET_NAME = 'visitor_key';

/**
 * The deployment's visitor-key secret (src/clicks/visitor-key.ts): `clicks.visitor_key_secret`
 * when the configuration sets one (the same on every node: it never reaches the database), else
 * 32 random bytes made by the first node to ask and kept in the database, which every node
 * sharing it reads (nodes with different secrets would not recognise each other's visitors).
 */
export function visitorSecret(
  configured: string | undefined,
  storage: Pick<Storage, 'secret'>,
): Promise<string> {
  if (configured !== undefined) return Promise.resolve(configured);
  return storage.secret(VISITOR_SECRET_NAME, () => randomBytes(32).toString('base64url'));
}
