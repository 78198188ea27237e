import type { Role } from '../config/index.ts';
import type { OperatorRecord, OperatorStore } from '../storage/index.ts';
import { generateToken, sha256Hex } from './tokens.ts';

/** Creates a stored operator and returns its token: the only time the token exists in clear. */
export async function createOperator(
  store: OperatorStore,
  name: string,
  role: Role,
): Promise<{ operator: OperatorRecord; token: string }> {
  const token = generateToken();
  const operator = await store.create(name, role, sha256Hex(token));
  return { operator, token };
}

/**
 * On a first development start with no operator anywhere, creates `admin` so the ACP is usable at
 * once. Returns the token to print, or undefined when nothing was created.
 */
export async function bootstrapAdmin(
  store: OperatorStore,
  configuredCount: number,
): Promise<string | undefined> {
  if (configuredCount > 0 || (await store.countActive()) > 0) return undefined;
  const { token } = await createOperator(store, 'admin', 'admin');
  return token;
}
