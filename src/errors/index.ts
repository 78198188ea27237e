export { ApiError, describeCause, type ErrorBody, hasCode } from './api-error.ts';
export { ERROR_CODES, type ErrorCode, isErrorCode } from './codes.ts';
