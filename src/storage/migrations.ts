/**
 * Versioned schema migrations, applied in order and recorded in `schema_migrations`. A shipped
 * migration is never edited: add a new version instead.
 */
export interface Migration {
  version: number;
  name: string;
  sqlite: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'operators',
    sqlite: `
      CREATE TABLE operators (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
        token_sha256 TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
      CREATE UNIQUE INDEX operators_active_name ON operators (name) WHERE revoked_at IS NULL;
      CREATE UNIQUE INDEX operators_token ON operators (token_sha256);
    `,
  },
];
