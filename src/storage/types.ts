import type { Role } from '../config/index.ts';

export type StorageDriver = 'sqlite' | 'postgres';

/** An ACP operator kept in storage; the token itself is never stored, only its SHA-256. */
export interface OperatorRecord {
  id: number;
  name: string;
  role: Role;
  created_at: string;
  revoked_at: string | null;
}

export interface OperatorStore {
  /** Throws ApiError `resource.conflict` when an active operator has that name or token. */
  create(name: string, role: Role, tokenSha256: string): Promise<OperatorRecord>;
  list(): Promise<OperatorRecord[]>;
  findActiveByTokenHash(tokenSha256: string): Promise<OperatorRecord | undefined>;
  /** True when an active operator of that name was revoked. */
  revoke(name: string): Promise<boolean>;
  countActive(): Promise<number>;
}

/** The `db` section of system metrics (§5). */
export interface DbSection {
  driver: StorageDriver;
  status: 'up' | 'down';
  pool: { size: number; idle: number; waiting: number };
  queries: number;
  errors: number;
  avg_ms: number;
  p95_ms: number;
  last_error: string | null;
}

/**
 * One interface over the embedded SQLite file and a shared PostgreSQL. Every query is timed into
 * the `db` section. A backend that cannot reach its database throws ApiError `db.unavailable`.
 */
export interface Storage {
  readonly driver: StorageDriver;
  readonly operators: OperatorStore;
  /** Applies pending versioned migrations; idempotent. */
  migrate(): Promise<void>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  stats(): DbSection;
  close(): Promise<void>;
}
