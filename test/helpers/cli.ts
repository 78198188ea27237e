import { type ChildProcess, spawn } from 'node:child_process';
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
 * and collects what it printed. With `killAfterMs`, a command still running then is killed (its
 * code is null), so a command that should return at once but serves instead fails its test rather
 * than hanging it.
 */
export function runCli(
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; killAfterMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      env: { PATH: process.env.PATH, ...opts.env },
      ...(opts.killAfterMs === undefined
        ? {}
        : { timeout: opts.killAfterMs, killSignal: 'SIGKILL' as const }),
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

/** A running `sluice start` process. */
export interface CliNode extends CliProcess {
  /** The URL from its `sluice started` log record. */
  url: string;
}

/** A `sluice` process as it runs: what it has printed so far, and its exit. */
export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
}

/**
 * Spawns `sluice <args>` with only PATH and the given variables in its environment, collecting
 * what it prints as it runs (for a test that watches a process before it exits). `echoStderr`
 * passes its stderr through to this process's.
 */
export function spawnCli(
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; echoStderr?: boolean },
): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((done) => child.on('close', done));
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    err += d;
    if (opts.echoStderr) process.stderr.write(d);
  });
  return { child, stdout: () => out, stderr: () => err, exited };
}

/**
 * Runs `sluice start <args>` with only PATH and the given variables in its environment, and
 * resolves once its stdout carries the JSON `sluice started` record (so the log level must be
 * `info` or lower). stderr is kept and passed through.
 */
export function startCli(
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<CliNode> {
  const p = spawnCli(['start', ...args], { ...opts, echoStderr: true });
  return new Promise((started, failed) => {
    const timer = setTimeout(() => {
      p.child.kill('SIGKILL');
      failed(new Error(`sluice start did not log "sluice started": ${p.stdout()}`));
    }, opts.timeoutMs ?? START_LIMIT_MS);
    let scanned = 0;
    p.child.stdout!.on('data', () => {
      const out = p.stdout();
      for (let nl = out.indexOf('\n', scanned); nl !== -1; nl = out.indexOf('\n', scanned)) {
        const line = out.slice(scanned, nl);
        scanned = nl + 1;
        if (!line.startsWith('{')) continue;
        const record = JSON.parse(line) as { message?: unknown; url?: unknown };
        if (record.message === 'sluice started' && typeof record.url === 'string') {
          clearTimeout(timer);
          started({ ...p, url: record.url });
        }
      }
    });
    p.exited.then((code) => {
      clearTimeout(timer);
      failed(new Error(`sluice start exited with ${code} before it started: ${p.stdout()}`));
    });
  });
}
