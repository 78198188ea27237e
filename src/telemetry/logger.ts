import { type DestinationStream, type Logger, pino } from 'pino';
import { REDACTED } from '../config/index.ts';

export type { Logger } from 'pino';

/**
 * Every path a secret can reach a log record through. pino compiles these once (fast-redact),
 * so the cost is paid only when a record is written.
 */
export const REDACT_PATHS: readonly string[] = [
  'authorization',
  'cookie',
  'token',
  'password',
  'headers.authorization',
  'headers.cookie',
  'headers["set-cookie"]',
  'headers["proxy-authorization"]',
  '*.authorization',
  '*.cookie',
  '*.token',
  '*.password',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["set-cookie"]',
  '*.headers["proxy-authorization"]',
];

export interface LoggerOptions {
  level: string;
  name: string;
  serverId: string;
  /** Where JSON lines go; stdout (asynchronously buffered) when absent. */
  destination?: DestinationStream;
}

/**
 * How long a final flush ({@link flushLogSync}) waits for a stdout that takes nothing more (a full
 * pipe, a stalled log collector) before the exit goes on without the rest.
 */
export const FINAL_FLUSH_WAIT_MS = 500;

/** When each logger's stdout gives up retrying a write that would block: never, until a final flush. */
const giveUp = new WeakMap<Logger, { at: number }>();

/**
 * The one root logger: JSON lines with `level` as a label, ISO `time`, `message`, and the node's
 * `server_id` on every record (docs/telemetry.md#logs).
 */
export function createLogger(opts: LoggerOptions): Logger {
  const limit = { at: Number.POSITIVE_INFINITY };
  // Node opens stdout (a pipe: a log collector, npm) without blocking once `process.stdout` is
  // made, so a write a full pipe cannot take fails with EAGAIN, which the bound below applies to;
  // left blocking, a final flush behind a stalled reader would wait in the kernel, unbounded.
  if (opts.destination === undefined) void process.stdout.fd;
  const logger = pino(
    {
      level: opts.level,
      name: opts.name,
      messageKey: 'message',
      base: { server_id: opts.serverId },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    },
    opts.destination ??
      pino.destination({ dest: 1, sync: false, retryEAGAIN: () => performance.now() < limit.at }),
  );
  giveUp.set(logger, limit);
  return logger;
}

/**
 * The same logger without the redaction pass, for records whose every field is a string or a
 * number under a key no path of {@link REDACT_PATHS} names (redaction would leave them as they
 * are): an `api error` record costs ~8 µs of CPU with the redaction pass, ~2 µs without
 * (`bench/telemetry/log-record.bench.ts`). The front door's `api error`
 * records of `/go` are such records, and a flood of unknown slugs writes one each.
 */
export function unredacted(logger: Logger): Logger {
  return logger.child({}, { redact: [] });
}

/**
 * Writes what the root logger still holds, now and on this thread. The stdout destination writes
 * asynchronously, and `process.exit` does not wait for a write under way: a record logged just
 * before a forced exit (a second stop signal, a stop past its deadline) is flushed with this first.
 */
export function flushLogSync(logger: Logger): void {
  // Bounded: a stdout that cannot take more would otherwise hold the exit forever (sonic-boom's
  // flushSync sleeps and retries a blocked write without end; a review found it).
  const limit = giveUp.get(logger);
  if (limit !== undefined) limit.at = performance.now() + FINAL_FLUSH_WAIT_MS;
  const stream = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as
    | { flushSync?: () => void }
    | undefined;
  try {
    stream?.flushSync?.();
  } catch {
    // A destination that is not ready or is gone: nothing more can reach it.
  }
}

type LogArgs = [obj: unknown, msg?: string, ...args: unknown[]];

/**
 * A request's logger, created lazily: fastify asks for one per request, but a served redirect logs
 * nothing, so the pino child (and its bindings serialisation) is only built when a line is written.
 * Every line carries `request_id` and `trace_id` with the same value (seed, Errors rule 3).
 */
export class LazyRequestLogger {
  readonly #root: Logger;
  readonly #requestId: string;
  #child: Logger | undefined;

  constructor(root: Logger, requestId: string) {
    this.#root = root;
    this.#requestId = requestId;
  }

  get logger(): Logger {
    this.#child ??= this.#root.child({ request_id: this.#requestId, trace_id: this.#requestId });
    return this.#child;
  }

  get level(): string {
    return this.#root.level;
  }

  fatal(...a: LogArgs): void {
    if (this.#root.isLevelEnabled('fatal')) (this.logger.fatal as (...x: LogArgs) => void)(...a);
  }
  error(...a: LogArgs): void {
    if (this.#root.isLevelEnabled('error')) (this.logger.error as (...x: LogArgs) => void)(...a);
  }
  warn(...a: LogArgs): void {
    if (this.#root.isLevelEnabled('warn')) (this.logger.warn as (...x: LogArgs) => void)(...a);
  }
  info(...a: LogArgs): void {
    if (this.#root.isLevelEnabled('info')) (this.logger.info as (...x: LogArgs) => void)(...a);
  }
  debug(...a: LogArgs): void {
    if (this.#root.isLevelEnabled('debug')) (this.logger.debug as (...x: LogArgs) => void)(...a);
  }
  trace(...a: LogArgs): void {
    if (this.#root.isLevelEnabled('trace')) (this.logger.trace as (...x: LogArgs) => void)(...a);
  }
  silent(): void {}
  child(bindings: Record<string, unknown>): Logger {
    return this.logger.child(bindings);
  }
}
