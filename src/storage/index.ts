import { resolve } from 'node:path';
import { type Config, ConfigError } from '../config/index.ts';
import type { Clock } from '../time/index.ts';
import { SqliteStorage } from './sqlite.ts';
import type { Storage } from './types.ts';

export { MIGRATIONS, type Migration } from './migrations.ts';
export { SqliteStorage } from './sqlite.ts';
export type { DbSection, OperatorRecord, OperatorStore, Storage, StorageDriver } from './types.ts';

/** Opens the configured backend. PostgreSQL arrives with the storage capability (issue #3). */
export function openStorage(config: Config, clock: Clock, cwd = process.cwd()): Storage {
  if (config.storage.driver === 'postgres') {
    throw new ConfigError(
      'config: storage.driver: postgres is not available in this build yet; expected sqlite',
    );
  }
  const path = config.storage.sqlite.path;
  return new SqliteStorage({ path: path === ':memory:' ? path : resolve(cwd, path), clock });
}
