import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from './schema.ts';

export interface BuildInfo {
  /** `app.version` / `APP_VERSION`; undefined when unset, so system metrics can omit it. */
  version: string | undefined;
  /** `app.commit` / `APP_COMMIT`, else the checkout's git HEAD, else `unknown`. */
  commit: string;
}

/** The checkout this code runs from (src/config/ is two levels below its root). */
const CODE_ROOT = resolve(import.meta.dirname, '..', '..');

/**
 * The build identifier: `app.commit`, else the HEAD of the checkout Sluice runs from, else that of
 * the working directory (Sluice installed as a package inside a deployment's own repository), else
 * `unknown`. The checkout's own HEAD comes first: a node started from another directory
 * (`node /opt/sluice/src/cli.ts start` from /etc/sluice) reported `unknown`.
 */
export function resolveBuildInfo(config: Config, cwd = process.cwd(), codeRoot = CODE_ROOT): BuildInfo {
  return {
    version: config.app.version,
    commit: config.app.commit ?? gitHead(codeRoot) ?? gitHead(cwd) ?? 'unknown',
  };
}

const OBJECT_ID = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** How many symbolic refs (`ref: ...` inside a ref) are followed before giving up on a loop. */
const MAX_SYMREF_DEPTH = 5;

/**
 * Reads HEAD without spawning git: a detached hash, a loose ref, or a packed ref, in a plain
 * checkout or a linked worktree (`git worktree add`, a submodule). There `.git` is a file,
 * `gitdir: <path>`, naming the worktree's own git directory, whose `commondir` file names the
 * repository's shared one: HEAD is the worktree's, branches and `packed-refs` are shared
 * (https://git-scm.com/docs/gitrepository-layout, "worktrees" and "commondir").
 */
export function gitHead(cwd: string): string | undefined {
  try {
    const gitDir = ownGitDir(join(cwd, '.git'));
    const dirs = [gitDir];
    const common = readOptional(join(gitDir, 'commondir'));
    if (common !== undefined) dirs.push(resolve(gitDir, common));
    let value = readFileSync(join(gitDir, 'HEAD'), 'utf8').trim();
    for (let depth = 0; value.startsWith('ref: ') && depth < MAX_SYMREF_DEPTH; depth++) {
      const next = lookupRef(dirs, value.slice(5).trim());
      if (next === undefined) return undefined;
      value = next;
    }
    return OBJECT_ID.test(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** `.git` itself when it is a directory; the directory its `gitdir:` line names when it is a file. */
function ownGitDir(dotGit: string): string {
  if (statSync(dotGit).isDirectory()) return dotGit;
  const m = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'));
  if (!m) throw new Error(`${dotGit} names no gitdir`);
  // A relative pointer (submodules, `git worktree add --relative-paths`) is relative to the file.
  return resolve(dotGit, '..', m[1]!.trim());
}

/** A ref's content: loose in each directory in turn, then in that directory's `packed-refs`. */
function lookupRef(dirs: readonly string[], ref: string): string | undefined {
  for (const dir of dirs) {
    const loose = readOptional(join(dir, ref));
    if (loose !== undefined) return loose;
    const packed = readOptional(join(dir, 'packed-refs'));
    const line = packed?.split('\n').find((l) => l.trimEnd().endsWith(` ${ref}`) && !l.startsWith('#'));
    if (line) return line.split(' ')[0];
  }
  return undefined;
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}
