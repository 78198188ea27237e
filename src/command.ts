/** The `sluice` command: parses the command line and runs a node, the doctor, or an operator or database command. */
import { parseArgs } from 'node:util';
import { createOperator, TOKEN_PREFIX } from './auth/index.ts';
import {
  type Config,
  ConfigError,
  DEFAULT_CLIENT_ERROR_RATE,
  DEFAULT_TASK_P95_MS,
  loadConfig,
  OPERATOR_NAME_PATTERN,
  ROLES,
  type Role,
} from './config/index.ts';
import { formatReport, runDoctor } from './doctor/index.ts';
import { hasCode } from './errors/index.ts';
import { startNode } from './main.ts';
import { seedDemo } from './routing/index.ts';
import { holdStopSignals, onFirstStopSignal, releaseStopSignals, SIGNAL_ECHO_MS } from './stop-signals.ts';
import {
  migrateWhenReachable,
  openStorage,
  SchemaTooNew,
  StartAbandoned,
  type Storage,
} from './storage/index.ts';
import { flushLogSync } from './telemetry/index.ts';
import { systemClock } from './time/index.ts';

/**
 * Run by `npm start` and stopped by one signal: how long the node waits, once stopped, for npm's
 * copy of it. npm forwards a stop signal to its script and stops listening for signals when the
 * script exits; a signal to the whole group that npm had not yet taken when the node exited (a
 * busy machine, a quick stop) then killed npm itself, which exited by SIGTERM instead of 0. Its copy
 * arriving says npm has taken the signal; when npm alone was signalled, no copy comes.
 */
const NPM_ECHO_WAIT_MS = 250;

/** sysexits.h: a command line that makes no sense. */
const EXIT_USAGE = 64;

const USAGE = `Usage: sluice <command> [options]

Commands:
  start [--config-dir DIR] [--mode MODE]        run a node (defaults: ./config, development)
  operator create --name NAME --role ROLE       create an ACP operator; prints its token once
                                                (ROLE: ${ROLES.join(' | ')})
  operator list [--json]                        list operators (never tokens)
  operator revoke --name NAME                   revoke an operator's token
  doctor --url URL [--url URL2] --token TOKEN   run the seven operator procedures against nodes
         [--urls URL,URL2] [--task-p95-ms N]    (version audit across nodes; token also SLUICE_TOKEN)
         [--client-error-rate R]                (0–1: a route's recent 4xx share that is a finding)
         [--single]                             (one --url: only that node; else its whole cluster)
         [--json]                               exit 0 healthy, 1 findings, 2 unreachable/refused
  migrate                                       apply pending database migrations and exit
  demo                                          create demo flows (demo, demo-position) if missing
  help, --help, -h                              this text; so does --help after a command

Commands but doctor take --config-dir DIR and --mode MODE (also APP_CONFIG_DIR, APP_MODE).
Exit codes: 0 ok, 1 failure (doctor: findings), 2 doctor could not ask a node, 64 bad usage,
78 configuration error.
`;

class UsageError extends Error {}

const COMMANDS: ReadonlySet<string> = new Set(['start', 'operator', 'doctor', 'migrate', 'demo']);

/**
 * Whether a command's arguments ask for help. Checked before a command parses or does anything, so
 * `sluice start --help` (or `migrate -h`, `operator create --help`) prints the usage rather than
 * starting a node, migrating or failing for a missing `--name`. No option takes `-h` as its value:
 * parseArgs refuses a value that starts with a dash unless it is written `--name=-h`.
 */
function asksForHelp(args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

const common = {
  'config-dir': { type: 'string' },
  mode: { type: 'string' },
} as const;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== undefined && COMMANDS.has(command) && asksForHelp(rest)) {
    process.stdout.write(USAGE);
    return 0;
  }
  switch (command) {
    case 'start':
      return start(rest);
    case 'operator':
      return operator(rest);
    case 'doctor':
      return doctor(rest);
    case 'migrate': {
      const { values } = parse(rest, common);
      await withStorage(values, async () => {});
      process.stdout.write('Migrations applied.\n');
      return 0;
    }
    case 'demo': {
      const { values } = parse(rest, common);
      const { created, server } = await withStorage(values, async (s, config) => ({
        created: await seedDemo(s),
        server: config.app.server,
      }));
      process.stdout.write(created.length ? demoTry(created, server) : 'Demo flows already exist.\n');
      return 0;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return command === undefined ? EXIT_USAGE : 0;
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

const operatorOptions = {
  ...common,
  name: { type: 'string' },
  role: { type: 'string' },
  json: { type: 'boolean' },
} as const;

const doctorOptions = {
  url: { type: 'string', multiple: true },
  urls: { type: 'string' },
  token: { type: 'string' },
  'task-p95-ms': { type: 'string' },
  'client-error-rate': { type: 'string' },
  json: { type: 'boolean' },
  single: { type: 'boolean' },
} as const;

function parse<O extends typeof common | typeof operatorOptions | typeof doctorOptions>(
  args: string[],
  options: O,
) {
  try {
    return parseArgs({ args, options, allowPositionals: false, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function start(args: string[]): Promise<number> {
  const { values } = parse(args, common);
  // A stop asked for while the node starts (a start over a large database takes seconds) is kept
  // and carried out once it has started: killed by the signal's default action instead, it wrote
  // nothing, and clicks answered in the moment between listening and these handlers were lost.
  // Held from the entry's first statement when src/cli.ts runs it (src/stop-signals.ts), from here
  // otherwise. Only a wait for an unreachable database gives up on it: nothing has been taken yet.
  holdStopSignals();
  const startAborted = new AbortController();
  onFirstStopSignal(() => startAborted.abort());
  let node: Awaited<ReturnType<typeof startNode>>;
  try {
    // stdout is the JSON log: the node's `sluice started` record carries its URL and mode.
    node = await startNode({
      configDir: values['config-dir'],
      mode: values.mode,
      startAborted: startAborted.signal,
    });
  } catch (err) {
    releaseStopSignals();
    if (err instanceof StartAbandoned) {
      // Stopped while waiting for the database: a stop asked for and done, nothing to lose.
      process.stderr.write(`sluice: ${err.message}\n`);
      return 0;
    }
    throw err;
  }
  return new Promise<number>((resolveExit) => {
    let signalledAt: number | undefined;
    let echoed: (() => void) | undefined;
    const echo = new Promise<void>((r) => {
      echoed = r;
    });
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalledAt !== undefined) {
        // A signal to the process group reaches this node and `npm start` alike, and npm forwards
        // its copy: a repeat within the echo window is the same request to stop, not impatience.
        if (performance.now() - signalledAt < SIGNAL_ECHO_MS) {
          echoed?.();
          return;
        }
        // The stop is cut short: what it had not written yet is lost, and the last record says how much.
        node.logger.error(
          { signal, ...node.unwritten() },
          'second signal during the stop: exiting now; what it had not written is lost',
        );
        flushLogSync(node.logger);
        process.stderr.write(`second ${signal}: exiting now\n`);
        process.exit(1);
      }
      signalledAt = performance.now();
      const limit = node.config.app.server.shutdown_timeout_ms;
      const timer = setTimeout(() => {
        // What the node still held is lost (a batch under way may yet have committed): say how much.
        node.logger.error({ timeout_ms: limit, ...node.unwritten() }, 'graceful stop timed out; exiting');
        flushLogSync(node.logger);
        process.exit(1);
      }, limit + 1000);
      timer.unref();
      node.logger.info({ signal }, 'signal received');
      node.stop().then(
        async (outcome) => {
          // Stopped: the deadline is met, whatever the wait below takes.
          clearTimeout(timer);
          if (!outcome.complete)
            process.stderr.write(
              `sluice: stopped without writing ${outcome.clicks_lost} answered clicks and ${outcome.counts_lost.clicks} counted clicks: the database refused them\n`,
            );
          if (process.env.npm_lifecycle_event !== undefined) {
            // Not unref'd: the wait itself is what keeps the process until npm has the signal.
            const wait = new Promise<void>((r) => setTimeout(r, NPM_ECHO_WAIT_MS));
            await Promise.race([echo, wait]);
          }
          resolveExit(outcome.complete ? 0 : 1);
        },
        (err) => {
          node.logger.error({ err }, 'error during stop');
          resolveExit(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // Only now: between the two, a signal's default action would have been back for a moment.
    const early = releaseStopSignals();
    if (early !== undefined) onSignal(early.signal);
  });
}

/**
 * A value echoed in a usage error, an operator token in it cut to its prefix: flags given in the
 * wrong order put the token where a URL was expected (a security review saw it printed whole).
 */
function withoutTokens(value: string): string {
  return value.replaceAll(new RegExp(`${TOKEN_PREFIX}[A-Za-z0-9_-]+`, 'g'), `${TOKEN_PREFIX}…`);
}

/** `sluice doctor`: talks to running nodes over their ACP only; reads no configuration. */
async function doctor(args: string[]): Promise<number> {
  const { values } = parse(args, doctorOptions);
  const urls = [...(values.url ?? []), ...(values.urls?.split(',') ?? [])]
    .map((u) => u.trim())
    .filter(Boolean);
  if (urls.length === 0) throw new UsageError('doctor needs --url URL (or --urls URL,URL)');
  for (const u of urls) {
    if (!URL.canParse(u) || !/^https?:$/.test(new URL(u).protocol))
      throw new UsageError(`not an http(s) URL: ${withoutTokens(u)}`);
  }
  // The environment keeps the token out of shell history and `ps`.
  const token = values.token ?? process.env.SLUICE_TOKEN;
  if (!token) throw new UsageError('doctor needs --token TOKEN (or SLUICE_TOKEN in the environment)');
  const level = values['task-p95-ms'] === undefined ? DEFAULT_TASK_P95_MS : Number(values['task-p95-ms']);
  if (!Number.isInteger(level) || level < 1)
    throw new UsageError('--task-p95-ms must be a positive integer (ms)');
  const rateArg = values['client-error-rate'];
  const rate = rateArg === undefined ? DEFAULT_CLIENT_ERROR_RATE : Number(rateArg);
  if (rateArg?.trim() === '' || !(rate >= 0 && rate <= 1))
    throw new UsageError('--client-error-rate must be a number from 0 to 1');
  const report = await runDoctor({
    urls,
    token,
    taskP95Ms: level,
    clientErrorRate: rate,
    discover: values.single !== true,
  });
  process.stdout.write(
    values.json
      ? `${JSON.stringify(report, null, 2)}\n`
      : formatReport(report, { colour: process.stdout.isTTY === true && !process.env.NO_COLOR }),
  );
  return report.exit_code;
}

/**
 * A browser's user agent for the demo's follow-up `curl`: curl's own is a bot's, which the node
 * answers but never counts as a click (README.md, "A quick tour").
 */
const DEMO_BROWSER =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** What `sluice demo` suggests next: a browser's click on the demo flow, at the configured address. */
function demoTry(created: string[], server: Config['app']['server']): string {
  const host = ['0.0.0.0', '::', ''].includes(server.host) ? '127.0.0.1' : server.host;
  const address = `${host.includes(':') ? `[${host}]` : host}:${server.port === 0 ? '<port>' : server.port}`;
  return (
    `Created demo flows: ${created.join(', ')}. Try a browser's click:\n` +
    `  curl -si -A '${DEMO_BROWSER}' -H 'cf-ipcountry: DE' http://${address}/go/demo | grep -i location\n`
  );
}

async function withStorage<T>(
  values: { 'config-dir'?: string; mode?: string },
  fn: (s: Storage, config: Config) => Promise<T>,
): Promise<T> {
  const { config } = loadConfig({ configDir: values['config-dir'], mode: values.mode });
  const storage = openStorage(config, systemClock);
  try {
    // A one-off command does not wait for the database: it says at once why it cannot reach it.
    await migrateWhenReachable(storage, { clock: systemClock, waitMs: 0 });
    return await fn(storage, config);
  } finally {
    await storage.close();
  }
}

async function operator(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  const { values } = parse(rest, operatorOptions);
  const name = values.name as string | undefined;
  switch (sub) {
    case 'create': {
      const role = values.role as string | undefined;
      if (!name || !new RegExp(OPERATOR_NAME_PATTERN).test(name))
        throw new UsageError('--name NAME is required ([A-Za-z0-9._@-], at most 64)');
      if (!role || !(ROLES as readonly string[]).includes(role))
        throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
      const { operator: op, token } = await withStorage(values, (s) =>
        createOperator(s.operators, name, role as Role),
      );
      process.stdout.write(
        `Created operator "${op.name}" (role ${op.role}). Its token, shown only this once:\n\n    ${token}\n\n`,
      );
      return 0;
    }
    case 'list': {
      const ops = await withStorage(values, (s) => s.operators.list());
      if (values.json) {
        process.stdout.write(`${JSON.stringify(ops, null, 2)}\n`);
      } else {
        process.stdout.write(`${'NAME'.padEnd(24)} ${'ROLE'.padEnd(9)} ${'CREATED'.padEnd(25)} REVOKED\n`);
        for (const o of ops) {
          process.stdout.write(
            `${o.name.padEnd(24)} ${o.role.padEnd(9)} ${o.created_at.padEnd(25)} ${o.revoked_at ?? '-'}\n`,
          );
        }
      }
      return 0;
    }
    case 'revoke': {
      if (!name) throw new UsageError('--name NAME is required');
      const revoked = await withStorage(values, (s) => s.operators.revoke(name));
      if (!revoked) {
        process.stderr.write(`no active operator named "${name}"\n`);
        return 1;
      }
      process.stdout.write(`Revoked operator "${name}".\n`);
      return 0;
    }
    default:
      throw new UsageError(`unknown operator command "${sub ?? ''}" (create, list, revoke)`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = err.exitCode;
    } else if (err instanceof UsageError) {
      process.stderr.write(`sluice: ${err.message}\n\n${USAGE}`);
      process.exitCode = EXIT_USAGE;
    } else if (err instanceof SchemaTooNew || hasCode(err, 'db.unavailable')) {
      // The message says it all (the migrations it does not know, the address that refused); a
      // stack would bury it.
      process.stderr.write(`sluice: ${err.message}\n`);
      process.exitCode = 1;
    } else if (hasCode(err, 'resource.conflict')) {
      process.stderr.write('sluice: an active operator with that name already exists\n');
      process.exitCode = 1;
    } else {
      process.stderr.write(`sluice: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    }
  },
);
