export { type FailedCall, RecentFailures, truncate } from './capture.ts';
export {
  type CallOptions,
  type CallResult,
  HttpCallError,
  HttpClient,
  type HttpClientOptions,
  parseRetryAfter,
} from './http-client.ts';
export { RequestTracker, TrackedDispatcher } from './instrument.ts';
