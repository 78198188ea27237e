import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, type Dispatcher } from 'undici';
import type { Config, Redactor } from '../config/index.ts';
import { currentContext, type Logger, type Telemetry, type WorkContext } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';
import { type FailedCall, RecentFailures, truncate } from './capture.ts';
import { RequestTracker, TrackedDispatcher } from './instrument.ts';

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
  /** The node's one rule for what of a URL and headers may be shown (`Redactor.of(config)`). */
  redactor: Redactor;
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

const EMPTY: Record<string, string> = Object.freeze({}) as Record<string, string>;
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
const RETRY_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const MAX_READ = 10 * 1024 * 1024;
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * The one outgoing HTTP client of Sluice: a keep-alive undici Agent instrumented at its base (every
 * request it sends is counted, see RequestTracker), a retry loop above it (exponential backoff with equal jitter,
 * `Retry-After` honoured, idempotent methods only unless told), per-attempt and overall timeouts,
 * and call capture for operators (one debug line per attempt, one warn line per failed attempt, the
 * last failures kept per client) with secrets masked.
 */
export class HttpClient {
  readonly #dispatcher: TrackedDispatcher;
  readonly #o: HttpClientOptions;
  readonly #random: () => number;
  readonly failures: RecentFailures;
  readonly #targets = new Map<string, Target>();

  /** The client as `http_client` asks (docs/http-client.md). */
  static fromConfig(
    config: Config,
    deps: Pick<HttpClientOptions, 'telemetry' | 'logger' | 'clock' | 'redactor'>,
  ): HttpClient {
    const hc = config.http_client;
    return new HttpClient({
      ...deps,
      timeoutMs: hc.timeout_ms,
      totalTimeoutMs: hc.total_timeout_ms,
      retries: hc.retries,
      backoffMs: hc.backoff_ms,
      maxBackoffMs: hc.max_backoff_ms,
      captureBodyBytes: hc.capture_body_bytes,
      recentFailures: hc.recent_failures,
      propagateRequestId: hc.propagate_request_id,
    });
  }

  constructor(opts: HttpClientOptions) {
    this.#o = opts;
    const agent = new Agent({
      keepAliveTimeout: 10_000,
      connections: 64,
      connect: { timeout: opts.timeoutMs },
    });
    this.#dispatcher = new TrackedDispatcher(
      agent,
      new RequestTracker(opts.telemetry.http.recorder, opts.clock),
    );
    this.#random = opts.random ?? Math.random;
    this.failures = new RecentFailures(opts.recentFailures);
  }

  /** The instrumented dispatcher, for `fetch(url, { dispatcher })`-style calls. */
  get dispatcher(): Dispatcher {
    return this.#dispatcher;
  }

  async close(): Promise<void> {
    await this.#dispatcher.close();
  }

  async request(call: CallOptions): Promise<CallResult> {
    const o = this.#o;
    const method = (call.method ?? 'GET').toUpperCase();
    const ctx = currentContext();
    const { origin, path, authorization } = this.#target(call.url);
    let headers = call.headers ?? EMPTY;
    // Credentials in the URL (`https://user:pass@host/`) are sent as Basic authorization, as curl
    // sends them: undici's request takes an origin and a path and would drop them silently.
    if (authorization !== undefined && !hasHeader(headers, 'authorization')) {
      headers = { ...headers, authorization };
    }
    const requestId = ctx?.request_id ?? ctx?.run_id;
    if (
      (call.propagateRequestId ?? o.propagateRequestId) &&
      requestId &&
      !hasHeader(headers, 'x-request-id')
    ) {
      headers = { ...headers, 'x-request-id': requestId };
    }
    const retries = call.retries ?? o.retries;
    const mayRetry = IDEMPOTENT.has(method) || call.retryNonIdempotent === true;
    const attemptMs = call.timeoutMs ?? o.timeoutMs;
    const started = o.clock.monotonic();
    const deadline = started + (call.totalTimeoutMs ?? o.totalTimeoutMs);
    // Capture fields are only built when a line is written (debug enabled, or a failure).
    let capture: Capture | undefined;
    const captured = () => {
      capture ??= this.#capture(call, method, headers, ctx);
      return capture;
    };

    for (let attempt = 1; ; attempt++) {
      const attemptStart = o.clock.monotonic();
      // undici's own timers bound the attempt (cheap, no AbortController per call): the wait for
      // the response headers, and each pause in the body, by the attempt's limit or what is left
      // of the call's. A signal is only wired when the caller gave one.
      const limit = Math.max(1, Math.min(attemptMs, deadline - attemptStart));
      let status: number | undefined;
      let error: unknown;
      let result: CallResult | undefined;
      let retryAfterMs: number | undefined;
      try {
        const res = await this.#dispatcher.request({
          origin,
          path,
          method: method as Dispatcher.HttpMethod,
          ...(headers === EMPTY ? {} : { headers }),
          ...(call.body === undefined ? {} : { body: call.body }),
          headersTimeout: limit,
          bodyTimeout: limit,
          ...(call.signal ? { signal: call.signal } : {}),
        });
        status = res.statusCode;
        const body = await readBody(
          res.body,
          res.headers['content-length'],
          call.maxBodyBytes ?? 1024 * 1024,
        );
        if (status >= 400) retryAfterMs = parseRetryAfter(res.headers['retry-after'], o.clock.now());
        result = { status, headers: res.headers, body, attempts: attempt, duration_ms: 0 };
      } catch (err) {
        error = err;
      }
      const timedOut = error !== undefined && TIMEOUT_CODES.has((error as { code?: string }).code ?? '');
      const failed = error !== undefined || (status !== undefined && status >= 500);
      if (failed || o.logger.isLevelEnabled('debug')) {
        const duration_ms = round3(o.clock.monotonic() - attemptStart);
        const line = { ...captured().line, attempt, status: status ?? null, duration_ms };
        if (failed) {
          const why =
            error === undefined
              ? `HTTP ${status}`
              : timedOut
                ? `timeout after ${limit} ms (${this.#describe(error)})`
                : this.#describe(error);
          o.logger.warn({ ...line, error: why }, 'http call failed');
          this.failures.add(this.#failure(captured(), attempt, status, why, duration_ms));
        } else {
          o.logger.debug(line, 'http call');
        }
      }

      const retryable =
        (error !== undefined && !call.signal?.aborted) || (status !== undefined && RETRY_STATUS.has(status));
      if (attempt <= retries && mayRetry && retryable) {
        const backoff = Math.min(o.maxBackoffMs, o.backoffMs * 2 ** (attempt - 1));
        const wait = retryAfterMs ?? backoff / 2 + (this.#random() * backoff) / 2;
        if (o.clock.monotonic() + wait < deadline) {
          o.telemetry.http.retries++;
          try {
            await sleep(wait, undefined, call.signal ? { signal: call.signal } : {});
            continue;
          } catch {
            // the caller gave up while we waited: fall through with what we have
          }
        }
      }
      if (result) return { ...result, duration_ms: round3(o.clock.monotonic() - started) };
      const kind = call.signal?.aborted ? 'aborted' : timedOut ? 'timeout' : 'network';
      throw new HttpCallError(
        kind,
        `${method} ${captured().line.url}: ${this.#describe(error)}`,
        attempt,
        error,
      );
    }
  }

  /** A transport error as it may be shown: any URL in its message masked like the call's own. */
  #describe(error: unknown): string {
    return this.#o.redactor.text(describeError(error));
  }

  /** Origin, path and credentials of a URL; parsed once per distinct URL (probes and checks repeat theirs). */
  #target(url: string): Target {
    let t = this.#targets.get(url);
    if (t === undefined) {
      const u = new URL(url);
      t = { origin: u.origin, path: `${u.pathname}${u.search}` };
      if (u.username !== '' || u.password !== '') {
        const pair = Buffer.concat([
          percentDecoded(u.username),
          Buffer.from(':'),
          percentDecoded(u.password),
        ]);
        t.authorization = `Basic ${pair.toString('base64')}`;
      }
      if (this.#targets.size >= 1000) this.#targets.delete(this.#targets.keys().next().value!);
      this.#targets.set(url, t);
    }
    return t;
  }

  #capture(
    call: CallOptions,
    method: string,
    headers: Record<string, string>,
    ctx: WorkContext | undefined,
  ): Capture {
    const o = this.#o;
    return {
      line: {
        client: call.client ?? 'default',
        method,
        url: o.redactor.url(call.url),
        request_headers: o.redactor.headers(headers, call.secretHeaders),
        request_body: truncate(call.body, o.captureBodyBytes),
        ...(ctx?.request_id ? { request_id: ctx.request_id, trace_id: ctx.request_id } : {}),
        ...(ctx?.task ? { task: ctx.task, run_id: ctx.run_id } : {}),
      },
      ctx,
    };
  }

  #failure(
    c: Capture,
    attempt: number,
    status: number | undefined,
    error: string,
    duration_ms: number,
  ): FailedCall {
    return {
      at: new Date(this.#o.clock.now()).toISOString(),
      client: c.line.client,
      task: c.ctx?.task ?? null,
      run_id: c.ctx?.run_id ?? null,
      request_id: c.ctx?.request_id ?? null,
      method: c.line.method,
      url: c.line.url,
      request_headers: c.line.request_headers,
      request_body: c.line.request_body ?? null,
      attempt,
      status: status ?? null,
      error,
      duration_ms,
    };
  }
}

/**
 * A URL's user or password as the bytes it stands for, as curl sends them: each `%XX` one byte,
 * whatever they spell, and anything else (a malformed escape too, which the URL parser keeps as
 * written) as its UTF-8. `decodeURIComponent` would throw on `%ZZ` or on bytes that are not UTF-8.
 */
function percentDecoded(text: string): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  for (let i = text.indexOf('%'); i !== -1; i = text.indexOf('%', i + 1)) {
    const hex = text.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) continue;
    parts.push(Buffer.from(text.slice(from, i)), Buffer.from([Number.parseInt(hex, 16)]));
    from = i + 3;
    i += 2;
  }
  parts.push(Buffer.from(text.slice(from)));
  return Buffer.concat(parts);
}

/** Where a URL's call goes, and the Basic authorization its `user:password@` part stands for. */
interface Target {
  origin: string;
  path: string;
  authorization?: string;
}

interface Capture {
  line: {
    client: string;
    method: string;
    url: string;
    request_headers: Record<string, string>;
    request_body: string | undefined;
    request_id?: string;
    trace_id?: string;
    task?: string;
    run_id?: string | undefined;
  };
  ctx: WorkContext | undefined;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

function hasHeader(headers: Record<string, string>, name: string): boolean {
  return Object.keys(headers).some((k) => k.toLowerCase() === name);
}

function describeError(err: unknown): string {
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

/** The response text, at most `keep` bytes of it; a large body is streamed and mostly discarded. */
async function readBody(
  body: AsyncIterable<Buffer> & { text(): Promise<string> },
  contentLength: string | string[] | undefined,
  keep: number,
): Promise<string> {
  const declared = typeof contentLength === 'string' ? Number(contentLength) : Number.NaN;
  if (declared <= keep) return body.text();
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
