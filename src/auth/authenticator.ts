import { LRUCache } from 'lru-cache';
import { ROLES, type Role } from '../config/index.ts';
import { ApiError, hasCode } from '../errors/index.ts';
import type { OperatorStore } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
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

/** A role's rank: its place in ROLES, each role allowed what the ones before it are. */
const RANK = Object.fromEntries(ROLES.map((r, i) => [r, i])) as Record<Role, number>;

/** How long a stored operator's last successful check lets it in while the database is unreachable. */
export const LAST_KNOWN_MS = 15 * 60_000;

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
  readonly #clock: Clock;
  /**
   * Stored operators this node has recently let in, by token hash: used only while the database
   * cannot be reached, so that an operator can still see the node's state (`db.status: down`
   * included) during the outage it is there to diagnose — as a viewer, whatever its role, since a
   * revocation made on another node cannot be known meanwhile. Every answer of the database
   * replaces what is here, and a revocation made on this node forgets the operator at once.
   */
  readonly #lastKnown = new LRUCache<string, { principal: Principal; at: number }>({ max: 1000 });
  /** Revocations forgotten here so far: a look-up under way while one happens does not remember its answer. */
  #forgotten = 0;

  constructor(configured: readonly ConfiguredOperator[], store: OperatorStore, clock: Clock) {
    this.#configured = configured.map((o) => ({ ...o, token_sha256: o.token_sha256.toLowerCase() }));
    this.#store = store;
    this.#clock = clock;
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
    const hex = digest.toString('hex');
    const forgotten = this.#forgotten;
    let stored: Awaited<ReturnType<OperatorStore['findActiveByTokenHash']>>;
    try {
      stored = await this.#store.findActiveByTokenHash(hex);
    } catch (err) {
      const known = this.#lastKnown.get(hex);
      if (hasCode(err, 'db.unavailable') && known !== undefined) {
        if (this.#clock.now() - known.at <= LAST_KNOWN_MS) return { ...known.principal, role: 'viewer' };
      }
      throw err;
    }
    if (stored) {
      const principal: Principal = { name: stored.name, role: stored.role, source: 'storage' };
      // Read before a revocation made here meanwhile: let in this once, not remembered.
      if (this.#forgotten === forgotten) this.#lastKnown.set(hex, { principal, at: this.#clock.now() });
      return principal;
    }
    this.#lastKnown.delete(hex);
    throw new ApiError('auth.unauthorized', 'The token is not valid.', { cause: 'unknown or revoked token' });
  }

  /** Forgets a stored operator this node let in (revoked here): an outage does not let it in again. */
  forget(name: string): void {
    this.#forgotten++;
    for (const [hash, known] of this.#lastKnown.entries())
      if (known.principal.name === name) this.#lastKnown.delete(hash);
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
