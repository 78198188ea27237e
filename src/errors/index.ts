export { ApiError, type ApiErrorOptions, describeCause, type ErrorBody } from './api-error.ts';
export { ERROR_CODES, type ErrorCode, isErrorCode } from './codes.ts';
