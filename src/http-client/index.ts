export type { FailedCall } from './capture.ts';
export { HttpCallError, HttpClient, type HttpClientOptions, parseRetryAfter } from './http-client.ts';
