import type { Role } from '../config/index.ts';
import { ApiError } from '../errors/index.ts';
import type { OperatorStore } from '../storage/index.ts';
import { digestEquals, parseBearer, sha256 } from './tokens.ts';

export interface Principal {
  name: string;
  role: Role;
  source: 'config' | 'storage';
}

export interface ConfiguredOperator {
  name: string;
  role: Role;
  token_sha256: string;
}

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** True when `role` is at least `required` (viewer < operator < admin). */
export function roleAllows(role: Role, required: Role): boolean {
  return RANK[role] >= RANK[required];
}

/**
 * Resolves a bearer token to an operator. Configured operators are compared in constant time,
 * every one of them, so timing says nothing about which matched. Stored operators are found by
 * the token's SHA-256 (an index lookup on a hash of a 256-bit secret leaks nothing usable).
 */
export class Authenticator {
  readonly #configured: readonly ConfiguredOperator[];
  readonly #store: OperatorStore;

  constructor(configured: readonly ConfiguredOperator[], store: OperatorStore) {
    this.#configured = configured.map((o) => ({ ...o, token_sha256: o.token_sha256.toLowerCase() }));
    this.#store = store;
  }

  async authenticate(authorization: string | undefined): Promise<Principal> {
    const token = parseBearer(authorization);
    if (token === undefined) {
      throw new ApiError('auth.unauthorized', 'Send Authorization: Bearer <token>.', {
        cause: authorization === undefined ? 'no Authorization header' : 'malformed Authorization header',
      });
    }
    const digest = sha256(token);
    let match: ConfiguredOperator | undefined;
    for (const op of this.#configured) {
      if (digestEquals(digest, op.token_sha256) && match === undefined) match = op;
    }
    if (match) return { name: match.name, role: match.role, source: 'config' };
    const stored = await this.#store.findActiveByTokenHash(digest.toString('hex'));
    if (stored) return { name: stored.name, role: stored.role, source: 'storage' };
    throw new ApiError('auth.unauthorized', 'The token is not valid.', { cause: 'unknown or revoked token' });
  }

  /** Throws `auth.forbidden` when the principal's role is below `required`. */
  static require(principal: Principal, required: Role): void {
    if (!roleAllows(principal.role, required)) {
      throw new ApiError('auth.forbidden', `This needs the ${required} role; you are ${principal.role}.`, {
        cause: `operator ${principal.name} (${principal.role}) lacks ${required}`,
      });
    }
  }
}
