import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, type Dispatcher } from 'undici';
import { currentContext, type Logger, type Telemetry } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import {
  ALWAYS_REDACTED_HEADERS,
  type FailedCall,
  maskUrl,
  RecentFailures,
  redactHeaders,
  truncate,
} from './capture.ts';
import { instrumentInterceptor } from './instrument.ts';

export interface HttpClientOptions {
  telemetry: Telemetry;
  logger: Logger;
  clock: Clock;
  timeoutMs: number;
  totalTimeoutMs: number;
  retries: number;
  backoffMs: number;
  maxBackoffMs: number;
  captureBodyBytes: number;
  redactHeaders: readonly string[];
  secretQueryParams: readonly string[];
  recentFailures: number;
  propagateRequestId: boolean;
  /** Jitter source, injectable for tests. */
  random?: () => number;
}

export interface CallOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** A bounded name given in code (`probe:payments`), never a URL; groups captures and failures. */
  client?: string;
  /** Per attempt. */
  timeoutMs?: number;
  /** For the whole call, retries and waits included. */
  totalTimeoutMs?: number;
  retries?: number;
  /** Retry a non-idempotent method too (POST, PATCH): only when the caller knows it is safe. */
  retryNonIdempotent?: boolean;
  /** Header names whose values are secrets for this call (e.g. an http.probe task's headers). */
  secretHeaders?: readonly string[];
  /** Send the current request or run id as X-Request-Id (default from configuration). */
  propagateRequestId?: boolean;
  /** Response bytes kept in `body`; the rest is read and discarded. */
  maxBodyBytes?: number;
  signal?: AbortSignal;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  attempts: number;
  duration_ms: number;
}

/** A call that got no HTTP answer: network failure, timeout or abort (after any retries). */
export class HttpCallError extends Error {
  override readonly name = 'HttpCallError';
  readonly kind: 'network' | 'timeout' | 'aborted';
  readonly code: string | undefined;
  readonly attempts: number;
  constructor(kind: HttpCallError['kind'], message: string, attempts: number, cause: unknown) {
    super(message, { cause });
    this.kind = kind;
    this.attempts = attempts;
    this.code = (cause as { code?: string } | undefined)?.code;
  }
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
const RETRY_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const MAX_READ = 10 * 1024 * 1024;

/**
 * The one outgoing HTTP client of Sluice: a keep-alive undici Agent with the instrumentation
 * interceptor at its base, a retry loop above it (exponential backoff with equal jitter,
 * `Retry-After` honoured, idempotent methods only unless told), per-attempt and overall timeouts,
 * and call capture for operators (one debug line per attempt, one warn line per failed attempt, the
 * last failures kept per client) with secrets masked.
 */
export class HttpClient {
  readonly #agent: Agent;
  readonly #dispatcher: Dispatcher;
  readonly #o: HttpClientOptions;
  readonly #secretParams: ReadonlySet<string>;
  readonly #random: () => number;
  readonly failures: RecentFailures;

  constructor(opts: HttpClientOptions) {
    this.#o = opts;
    this.#agent = new Agent({ keepAliveTimeout: 10_000, connections: 64 });
    this.#dispatcher = this.#agent.compose(instrumentInterceptor(opts.telemetry.http.recorder, opts.clock));
    this.#secretParams = new Set(opts.secretQueryParams.map((p) => p.toLowerCase()));
    this.#random = opts.random ?? Math.random;
    this.failures = new RecentFailures(opts.recentFailures);
  }

  /** The instrumented dispatcher, for `fetch(url, { dispatcher })`-style calls. */
  get dispatcher(): Dispatcher {
    return this.#dispatcher;
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }

  async request(call: CallOptions): Promise<CallResult> {
    const o = this.#o;
    const method = (call.method ?? 'GET').toUpperCase();
    const ctx = currentContext();
    const headers: Record<string, string> = { ...call.headers };
    const requestId = ctx?.request_id ?? ctx?.run_id;
    if (
      (call.propagateRequestId ?? o.propagateRequestId) &&
      requestId &&
      !hasHeader(headers, 'x-request-id')
    ) {
      headers['x-request-id'] = requestId;
    }
    const retries = call.retries ?? o.retries;
    const mayRetry = IDEMPOTENT.has(method) || call.retryNonIdempotent === true;
    const started = o.clock.monotonic();
    const deadline = started + (call.totalTimeoutMs ?? o.totalTimeoutMs);
    const overall = AbortSignal.timeout(call.totalTimeoutMs ?? o.totalTimeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, overall]) : overall;
    const secretHeaders = new Set(
      [...ALWAYS_REDACTED_HEADERS, ...o.redactHeaders, ...(call.secretHeaders ?? [])].map((h) =>
        h.toLowerCase(),
      ),
    );
    const capture = {
      client: call.client ?? 'default',
      method,
      url: maskUrl(call.url, this.#secretParams),
      request_headers: redactHeaders(headers, secretHeaders),
      request_body: truncate(call.body, o.captureBodyBytes),
      ...(ctx?.request_id ? { request_id: ctx.request_id, trace_id: ctx.request_id } : {}),
      ...(ctx?.task ? { task: ctx.task, run_id: ctx.run_id } : {}),
    };

    for (let attempt = 1; ; attempt++) {
      const attemptStart = o.clock.monotonic();
      const attemptSignal = AbortSignal.any([signal, AbortSignal.timeout(call.timeoutMs ?? o.timeoutMs)]);
      let status: number | undefined;
      let error: unknown;
      let result: CallResult | undefined;
      let retryAfterMs: number | undefined;
      try {
        const res = await this.#dispatcher.request({
          origin: new URL(call.url).origin,
          path: pathOf(call.url),
          method: method as Dispatcher.HttpMethod,
          headers,
          body: call.body ?? null,
          signal: attemptSignal,
        });
        status = res.statusCode;
        const body = await readBody(res.body, call.maxBodyBytes ?? 1024 * 1024);
        retryAfterMs = parseRetryAfter(res.headers['retry-after'], o.clock.now());
        result = { status, headers: res.headers, body, attempts: attempt, duration_ms: 0 };
      } catch (err) {
        error = err;
      }
      const duration_ms = round3(o.clock.monotonic() - attemptStart);
      const failed = error !== undefined || (status !== undefined && status >= 500);
      const line = { ...capture, attempt, status: status ?? null, duration_ms };
      if (failed) {
        const why =
          error === undefined
            ? `HTTP ${status}`
            : describeError(
                error,
                overall.aborted
                  ? 'timeout (total)'
                  : attemptSignal.aborted && !signal.aborted
                    ? 'timeout'
                    : undefined,
              );
        o.logger.warn({ ...line, error: why }, 'http call failed');
        this.failures.add(this.#failure(capture, attempt, status, why, duration_ms));
      } else {
        o.logger.debug(line, 'http call');
      }

      const retryable =
        (error !== undefined && !call.signal?.aborted && !overall.aborted) ||
        (status !== undefined && RETRY_STATUS.has(status));
      if (attempt <= retries && mayRetry && retryable) {
        const backoff = Math.min(o.maxBackoffMs, o.backoffMs * 2 ** (attempt - 1));
        const wait = retryAfterMs ?? backoff / 2 + (this.#random() * backoff) / 2;
        if (o.clock.monotonic() + wait < deadline) {
          o.telemetry.http.retries++;
          try {
            await sleep(wait, undefined, { signal });
            continue;
          } catch {
            // the overall deadline or the caller's signal fired while waiting: fall through
          }
        }
      }
      if (result) return { ...result, duration_ms: round3(o.clock.monotonic() - started) };
      const kind = call.signal?.aborted ? 'aborted' : attemptSignal.aborted ? 'timeout' : 'network';
      throw new HttpCallError(kind, `${method} ${capture.url}: ${describeError(error)}`, attempt, error);
    }
  }

  #failure(
    c: {
      client: string;
      method: string;
      url: string;
      request_headers: Record<string, string>;
      request_body: string | undefined;
    },
    attempt: number,
    status: number | undefined,
    error: string,
    duration_ms: number,
  ): FailedCall {
    const ctx = currentContext();
    return {
      at: new Date(this.#o.clock.now()).toISOString(),
      client: c.client,
      task: ctx?.task ?? null,
      run_id: ctx?.run_id ?? null,
      request_id: ctx?.request_id ?? null,
      method: c.method,
      url: c.url,
      request_headers: c.request_headers,
      request_body: c.request_body ?? null,
      attempt,
      status: status ?? null,
      error,
      duration_ms,
    };
  }
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

function hasHeader(headers: Record<string, string>, name: string): boolean {
  return Object.keys(headers).some((k) => k.toLowerCase() === name);
}

function pathOf(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

function describeError(err: unknown, override?: string): string {
  if (override) return override;
  const e = err as { name?: string; code?: string; message?: string };
  return `${e.code ?? e.name ?? 'Error'}: ${e.message ?? String(err)}`;
}

/** `Retry-After` as milliseconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v === '') return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

async function readBody(body: AsyncIterable<Buffer>, keep: number): Promise<string> {
  const chunks: Buffer[] = [];
  let kept = 0;
  let read = 0;
  for await (const chunk of body) {
    read += chunk.length;
    if (kept < keep) {
      const part = chunk.subarray(0, keep - kept);
      chunks.push(part);
      kept += part.length;
    }
    if (read > MAX_READ) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}
