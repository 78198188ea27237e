/**
 * The one registry of API error codes (docs/errors.md#codes). A code is never renamed or reused
 * once shipped; `docs/errors.md` documents each one and `test/errors/codes.test.ts` keeps them in
 * step.
 */
export const ERROR_CODES = {
  'validation.invalid_input': { status: 400, message: 'The request is invalid.' },
  'auth.unauthorized': { status: 401, message: 'Authentication is required.' },
  'auth.forbidden': { status: 403, message: 'Your role does not allow this.' },
  'resource.not_found': { status: 404, message: 'Not found.' },
  'request.method_not_allowed': { status: 405, message: 'Method not allowed on this path.' },
  'resource.conflict': { status: 409, message: 'The resource changed or already exists.' },
  'task.not_leader': {
    status: 409,
    message: 'This task runs only on the leader; this node is not the leader.',
  },
  'task.already_running': { status: 409, message: 'The task is already running.' },
  'request.too_large': { status: 413, message: 'The request body is too large.' },
  'request.unsupported_media_type': { status: 415, message: 'The request body must be application/json.' },
  'request.expectation_failed': { status: 417, message: 'The Expect header cannot be met.' },
  'request.headers_too_large': { status: 431, message: 'The request headers are too large.' },
  'rate.limited': { status: 429, message: 'Too many requests; slow down.' },
  'internal.error': { status: 500, message: 'Internal error.' },
  'db.unavailable': { status: 503, message: 'The database is unavailable; retry shortly.' },
  'node.stopping': {
    status: 503,
    message:
      'This node is stopping; send the request again (to another node, or to this one once it is back).',
  },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code);
}
