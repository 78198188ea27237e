import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { TEXT_PATTERN } from '../config/index.ts';
import { ApiError, describeCause, ERROR_CODES, type ErrorBody, type ErrorCode } from '../errors/index.ts';

const BY_STATUS: Record<number, ErrorCode> = {
  400: 'validation.invalid_input',
  401: 'auth.unauthorized',
  403: 'auth.forbidden',
  404: 'resource.not_found',
  405: 'request.method_not_allowed',
  409: 'resource.conflict',
  413: 'request.too_large',
  415: 'request.unsupported_media_type',
  429: 'rate.limited',
  503: 'db.unavailable',
};

/** One problem as ajv reports it. */
interface SchemaProblem {
  instancePath?: string;
  schemaPath?: string;
  keyword?: string;
  message?: string;
  params?: {
    additionalProperty?: string;
    missingProperty?: string;
    pattern?: string;
    allowedValue?: unknown;
    limit?: number;
  };
  /** The schema that failed (ajv's `verbose`): its `description` says what a value must be. */
  parentSchema?: { description?: string };
}

/**
 * Schema problems a validation error carries at most (its message, its record, its details): a body
 * of a thousand bad items is told about the first of them.
 */
export const MAX_SCHEMA_PROBLEMS = 20;

/** What one problem says, in words rather than ajv's (a pattern is described, not quoted). */
function messageOf(v: SchemaProblem): string {
  if (v.keyword === 'pattern' && v.params?.pattern === TEXT_PATTERN)
    return 'must not contain control characters (U+0000–U+001F, U+007F–U+009F)';
  if (v.keyword === 'pattern' && v.parentSchema?.description !== undefined)
    return `must be ${v.parentSchema.description}`;
  if (v.keyword === 'minLength' && v.params?.limit === 1) return 'must not be empty';
  return v.message ?? 'invalid';
}

/**
 * Each schema problem as the field it concerns and what is wrong with it: an unknown or missing
 * key is named itself, and a choice (`anyOf` of literals) is one problem listing what is allowed
 * rather than one per branch.
 */
function describeSchemaProblems(problems: SchemaProblem[]): { path: string; message: string }[] {
  const out: { path: string; message: string }[] = [];
  let branches: SchemaProblem[] = [];
  for (const v of problems) {
    const at = v.instancePath ?? '';
    if (v.keyword === 'anyOf') {
      const mine = branches.filter((b) => b.schemaPath?.startsWith(`${v.schemaPath}/`));
      const allowed = mine
        .filter((b) => b.keyword === 'const')
        .map((b) => JSON.stringify(b.params?.allowedValue));
      // Not a list of literals (a string of some length, or a boolean): what each branch wanted.
      const wanted = [...new Set(mine.map(messageOf))];
      out.push({
        path: at || '/',
        message: allowed.length
          ? `must be one of ${allowed.join(', ')}`
          : wanted.length
            ? wanted.join(', or ')
            : 'is not allowed',
      });
      branches = [];
    } else if (v.schemaPath?.includes('/anyOf/')) {
      // A branch of a choice: reported with the choice that follows it.
      branches.push(v);
    } else if (v.keyword === 'additionalProperties' && v.params?.additionalProperty !== undefined) {
      out.push({ path: `${at}/${v.params.additionalProperty}`, message: 'is not a known field' });
    } else if (v.keyword === 'required' && v.params?.missingProperty !== undefined) {
      out.push({ path: `${at}/${v.params.missingProperty}`, message: 'is required' });
    } else {
      out.push({ path: at || '/', message: messageOf(v) });
    }
  }
  // One problem a field (a value failing its pattern and its length is one thing to fix).
  const seen = new Set<string>();
  return out.filter((p) => !seen.has(p.path) && seen.add(p.path)).slice(0, MAX_SCHEMA_PROBLEMS);
}

/** Maps whatever was thrown (ours, fastify's, a bug) to a contract error. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<FastifyError> & { validation?: SchemaProblem[] };
  if (Array.isArray(e.validation)) {
    const details = describeSchemaProblems(e.validation);
    return new ApiError(
      'validation.invalid_input',
      `The request body does not match the schema: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}.`,
      { details, cause: err },
    );
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('request.too_large', undefined, { cause: err });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new ApiError('request.unsupported_media_type', undefined, { cause: err });
  }
  if (err instanceof SyntaxError || e.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new ApiError('validation.invalid_input', 'The request body is not valid JSON.', { cause: err });
  }
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  if (status >= 400 && status < 500) {
    return new ApiError(BY_STATUS[status] ?? 'validation.invalid_input', undefined, { cause: err });
  }
  return new ApiError('internal.error', undefined, { cause: err });
}

/**
 * The contract body of an error (docs/errors.md) and the fields of its one `api error` record (the request's
 * ids come from its logger). Shared by the routed error path and the answer to requests the HTTP
 * parser refuses, so the two cannot drift apart.
 */
export function describeApiError(
  err: ApiError,
  requestId: string,
): { body: ErrorBody; record: Record<string, unknown> } {
  const body: ErrorBody = {
    error: {
      code: err.code,
      // A 5xx never shows internals: the registry's generic message only.
      message: err.status >= 500 ? ERROR_CODES[err.code].message : err.message,
      request_id: requestId,
    },
  };
  if (err.details !== undefined && err.status < 500) body.error.details = err.details;
  const record: Record<string, unknown> = {
    code: err.code,
    http_status: err.status,
    error: describeCause(err.cause ?? err),
  };
  if (err.details !== undefined) record.details = err.details;
  return { body, record };
}

/** An error's own headers (`Allow`, `X-Click-Id`, a rate limit's `Retry-After`), after the tracing ones. */
export function errorHeaders(err: ApiError): Readonly<Record<string, string>> | undefined {
  const wait = (err.details as { retry_after_seconds?: unknown } | undefined)?.retry_after_seconds;
  if (err.code !== 'rate.limited' || typeof wait !== 'number') return err.headers;
  return { ...err.headers, 'retry-after': String(wait) };
}

/** Sets the headers every response carries (docs/telemetry.md), from the request's own context. */
export function setTracingHeaders(request: FastifyRequest, reply: FastifyReply, serverId: string): void {
  reply.header('x-request-id', request.id);
  reply.header('x-server-id', serverId);
  if (request.headerCountry !== undefined) reply.header('x-client-country-code', request.headerCountry);
}

/**
 * Sends the contract error body and writes the request's one `api error` record. Every 4xx/5xx
 * Sluice answers goes through here, which is what makes "one log record per API error" hold.
 *
 * The answer starts from a clean reply: whatever the failed handler left on it (a redirect status
 * and its reason phrase, a `Location`, a header value Node refuses to send) would otherwise ride
 * along on the error, or make writing the error's own head throw and drop fastify into its
 * fallback answer, which carries none of the contract. Only the tracing headers, the error's own
 * headers (`Allow`, `Retry-After`) and `Connection` are sent — the last is fastify's decision to
 * close a connection whose body it could not read, or while the server drains, and must stand.
 */
export function sendApiError(
  request: FastifyRequest,
  reply: FastifyReply,
  thrown: unknown,
  serverId: string,
): FastifyReply {
  const err = toApiError(thrown);
  const { body, record } = describeApiError(err, request.id);
  request.log.error(record, 'api error');
  for (const name of Object.keys(reply.getHeaders())) if (name !== 'connection') reply.removeHeader(name);
  // Node keeps the reason phrase of a head it failed to write ("500 Found"): name it afresh.
  reply.raw.statusMessage = STATUS_CODES[err.status] ?? '';
  setTracingHeaders(request, reply, serverId);
  const extra = errorHeaders(err);
  if (extra !== undefined) reply.headers(extra);
  return reply.code(err.status).type('application/json; charset=utf-8').send(JSON.stringify(body));
}
