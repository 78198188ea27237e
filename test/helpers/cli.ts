import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

/** The `sluice` command, run by the same Node as the tests. */
export const CLI = resolve(import.meta.dirname, '../../src/cli.ts');

/**
 * How long a `sluice start` process may take to say it is listening. Generous on purpose: on a busy
 * machine, starting Node, loading the modules and migrating takes seconds, and how many is not what
 * any test judges; the limit only turns a node that never starts into a failure instead of a hang.
 */
export const START_LIMIT_MS = 60_000;

/**
 * Runs `sluice <args>` to its exit with only PATH and the given variables in its environment,
 * and collects what it printed.
 */
export function runCli(
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      env: { PATH: process.env.PATH, ...opts.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}
