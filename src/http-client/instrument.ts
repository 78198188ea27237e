import type { Dispatcher } from 'undici';
import type { Recorder } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';

type Handler = Dispatcher.DispatchHandler;

/**
 * Counts every request that passes the base dispatcher — so each attempt a retry makes is one
 * request here (seed, http section rule 1). An attempt is an error when it fails at the network
 * level, times out or is aborted, or is answered with a status ≥ 500; its duration runs from
 * dispatch to the end of the response body.
 */
export function instrumentInterceptor(
  recorder: Recorder,
  clock: Clock,
): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (opts, handler) =>
    dispatch(opts, new InstrumentedHandler(handler, recorder, clock.monotonic(), clock));
}

class InstrumentedHandler implements Handler {
  readonly #inner: Handler;
  readonly #recorder: Recorder;
  readonly #start: number;
  readonly #clock: Clock;
  #status = 0;
  #done = false;

  constructor(inner: Handler, recorder: Recorder, start: number, clock: Clock) {
    this.#inner = inner;
    this.#recorder = recorder;
    this.#start = start;
    this.#clock = clock;
  }

  #finish(error: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.#recorder.record(this.#clock.monotonic() - this.#start, error || this.#status >= 500);
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.#inner.onRequestStart?.(controller, context);
  }

  onRequestUpgrade(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[]>,
    socket: import('node:stream').Duplex,
  ): void {
    this.#inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    this.#status = statusCode;
    this.#inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(
    controller: Dispatcher.DispatchController,
    trailers: Record<string, string | string[] | undefined>,
  ): void {
    this.#finish(false);
    this.#inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, err: Error): void {
    this.#finish(true);
    this.#inner.onResponseError?.(controller, err);
  }
}
