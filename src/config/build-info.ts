import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from './schema.ts';

export interface BuildInfo {
  /** `app.version` / `APP_VERSION`; undefined when unset, so system metrics can omit it. */
  version: string | undefined;
  /** `app.commit` / `APP_COMMIT`, else the checkout's git HEAD, else `unknown`. */
  commit: string;
}

export function resolveBuildInfo(config: Config, cwd = process.cwd()): BuildInfo {
  return { version: config.app.version, commit: config.app.commit ?? gitHead(cwd) ?? 'unknown' };
}

/** Reads HEAD without spawning git: a detached hash, a loose ref, or a packed ref. */
export function gitHead(cwd: string): string | undefined {
  try {
    const gitDir = join(cwd, '.git');
    const head = readFileSync(join(gitDir, 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return /^[0-9a-f]{40,64}$/.test(head) ? head : undefined;
    const ref = head.slice(5);
    try {
      return readFileSync(join(gitDir, ref), 'utf8').trim();
    } catch {
      const packed = readFileSync(join(gitDir, 'packed-refs'), 'utf8');
      const line = packed.split('\n').find((l) => l.endsWith(` ${ref}`));
      return line?.split(' ')[0];
    }
  } catch {
    return undefined;
  }
}
