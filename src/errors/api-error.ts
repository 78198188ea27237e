import { ERROR_CODES, type ErrorCode } from './codes.ts';

export interface ApiErrorOptions {
  /** Shown to the caller and logged; only when set. Must not hold secrets. */
  details?: unknown;
  /** The underlying cause, logged as `error`, never shown for a 5xx. */
  cause?: unknown;
  /** Response headers that belong to this error's answer (e.g. `Allow` of a 405). */
  headers?: Readonly<Record<string, string>>;
}

/** An error that maps to a contract code and its HTTP status. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: unknown;
  readonly headers: Readonly<Record<string, string>> | undefined;

  constructor(code: ErrorCode, message?: string, opts: ApiErrorOptions = {}) {
    super(message ?? ERROR_CODES[code].message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.details = opts.details;
    this.headers = opts.headers;
  }
}

/** Whether `err` is an {@link ApiError} with the contract code `code`. */
export function hasCode(err: unknown, code: ErrorCode): err is ApiError {
  return err instanceof ApiError && err.code === code;
}

/** The JSON body of every API error response. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; request_id: string; details?: unknown };
}

/** `Name: message` of an error and of its causes, for the `error` field of the log record. */
export function describeCause(err: unknown): string {
  const parts: string[] = [];
  let cur: unknown = err;
  for (let depth = 0; cur !== undefined && cur !== null && depth < 5; depth++) {
    if (cur instanceof Error) {
      const code = (cur as { code?: unknown }).code;
      parts.push(`${cur.name}${typeof code === 'string' ? ` [${code}]` : ''}: ${cur.message}`);
      cur = cur.cause;
    } else {
      parts.push(String(cur));
      break;
    }
  }
  return parts.join(' <- caused by: ');
}
