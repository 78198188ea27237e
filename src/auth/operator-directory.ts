import type { Role } from '../config/index.ts';
import { ApiError, hasCode } from '../errors/index.ts';
import type { OperatorStore } from '../storage/index.ts';
import type { ConfiguredOperator, Principal } from './authenticator.ts';
import { createOperator } from './operators.ts';

/** An operator as the ACP lists it: never a token nor its hash. */
export interface OperatorItem {
  name: string;
  role: Role;
  /** `config`: from `acp.operators`, read-only over the API; `storage`: created by the CLI or the ACP. */
  source: 'config' | 'storage';
  created_at: string | null;
  revoked_at: string | null;
}

const conflict = (message: string, cause: string) => new ApiError('resource.conflict', message, { cause });

/**
 * The operators the ACP manages (docs/audit.md#operators-over-the-acp-admin): the configured ones,
 * listed read-only, and the stored ones, created with a token shown once (stored as its SHA-256, as
 * the CLI does) and revoked by name.
 *
 * Revoking refuses (409 `resource.conflict`) a configured operator (its entry is in the config
 * files; removing it there is the only way) and the caller's own token. Only an admin revokes, and
 * never themselves, so the caller is an admin who stays: the last admin cannot be revoked over the
 * API. The one gap is two admins revoking each other at the same moment (both reads see the other
 * still active); `sluice operator create` on the database host is the way back.
 */
export class OperatorDirectory {
  readonly #configured: readonly ConfiguredOperator[];
  readonly #store: OperatorStore;
  readonly #onRevoked: (name: string) => void;

  /** `onRevoked`: told the name of each operator revoked here (the authenticator forgets it). */
  constructor(
    configured: readonly ConfiguredOperator[],
    store: OperatorStore,
    onRevoked: (name: string) => void = () => {},
  ) {
    this.#configured = configured;
    this.#store = store;
    this.#onRevoked = onRevoked;
  }

  /** Configured operators first, then stored ones in creation order; revoked ones only when asked. */
  async list(opts: { includeRevoked?: boolean } = {}): Promise<OperatorItem[]> {
    const stored = await this.#store.list();
    return [
      ...this.#configured.map((o) => ({
        name: o.name,
        role: o.role,
        source: 'config' as const,
        created_at: null,
        revoked_at: null,
      })),
      ...stored
        .filter((o) => opts.includeRevoked || o.revoked_at === null)
        .map((o) => ({
          name: o.name,
          role: o.role,
          source: 'storage' as const,
          created_at: o.created_at,
          revoked_at: o.revoked_at,
        })),
    ];
  }

  /** Creates a stored operator; its token is in the answer and nowhere else, ever. */
  async create(name: string, role: Role): Promise<{ name: string; role: Role; token: string }> {
    if (this.#configured.some((o) => o.name === name)) {
      throw conflict(
        `An operator named "${name}" is configured in acp.operators; choose another name.`,
        `operator name ${name} is configured`,
      );
    }
    try {
      const { operator, token } = await createOperator(this.#store, name, role);
      return { name: operator.name, role: operator.role, token };
    } catch (err) {
      // The one unique key a new operator can meet (a fresh token's hash never repeats).
      if (hasCode(err, 'resource.conflict'))
        throw conflict(
          `An active operator named "${name}" already exists; choose another name, or revoke it first.`,
          `operator name ${name} is taken`,
        );
      throw err;
    }
  }

  async revoke(name: string, by: Principal): Promise<OperatorItem> {
    const stored = await this.#store.list();
    const target = stored.find((o) => o.name === name && o.revoked_at === null);
    if (target === undefined) {
      if (this.#configured.some((o) => o.name === name)) {
        throw conflict(
          `Operator "${name}" is configured in acp.operators and cannot be revoked over the API; remove it from the configuration and restart the nodes.`,
          `operator ${name} is configured`,
        );
      }
      throw new ApiError('resource.not_found', `No active operator named "${name}".`, {
        cause: `no active stored operator ${name}`,
      });
    }
    if (by.source === 'storage' && by.name === name) {
      throw conflict(
        'You cannot revoke your own token; another admin can (or `sluice operator revoke`).',
        `operator ${name} tried to revoke themselves`,
      );
    }
    // Gone meanwhile (another admin revoked it first): as if it had never been there.
    const revoked = await this.#store.revoke(name);
    this.#onRevoked(name);
    if (!revoked) {
      throw new ApiError('resource.not_found', `No active operator named "${name}".`, {
        cause: `operator ${name} was revoked concurrently`,
      });
    }
    const after = (await this.#store.list()).find((o) => o.id === target.id);
    return {
      name: target.name,
      role: target.role,
      source: 'storage',
      created_at: target.created_at,
      revoked_at: after?.revoked_at ?? null,
    };
  }
}
