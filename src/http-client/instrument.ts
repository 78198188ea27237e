import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { type Agent, Dispatcher } from 'undici';
import { OK, type Recorder, SERVER_ERROR } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';

/**
 * Counts every request the base client sends — each attempt of a retried call is one request
 * (seed, http section rule 1) — from undici's own diagnostics channels
 * (https://undici.nodejs.org/#/docs/api/DiagnosticsChannel), so no handler is wrapped: wrapping one
 * makes undici convert between its two handler APIs on every response, which cost ~10 µs a request
 * here (bench/http-client/overhead.bench.ts).
 *
 * Those channels are process-wide; a request is ours when it is created while one of our
 * dispatchers is dispatching (dispatch is synchronous up to the request's creation).
 *
 * An attempt is an error when it fails at the network level, times out or is aborted, or is
 * answered with a status ≥ 500; its duration runs from creation to the end of the response body.
 */
interface Pending {
  tracker: RequestTracker;
  start: number;
  status: number;
}

let dispatching: RequestTracker | undefined;
const pending = new WeakMap<object, Pending>();
let subscribers = 0;

const onCreate = (m: unknown) => {
  if (dispatching === undefined) return;
  const { request } = m as { request: object };
  pending.set(request, { tracker: dispatching, start: dispatching.clock.monotonic(), status: 0 });
};
const onHeaders = (m: unknown) => {
  const { request, response } = m as { request: object; response: { statusCode: number } };
  const p = pending.get(request);
  if (p !== undefined) p.status = response.statusCode;
};
const finish = (request: object, error: boolean) => {
  const p = pending.get(request);
  if (p === undefined) return;
  pending.delete(request);
  p.tracker.recorder.record(
    p.tracker.clock.monotonic() - p.start,
    error || p.status >= 500 ? SERVER_ERROR : OK,
  );
};
const onTrailers = (m: unknown) => finish((m as { request: object }).request, false);
const onError = (m: unknown) => finish((m as { request: object }).request, true);

const CHANNELS: [string, (m: unknown) => void][] = [
  ['undici:request:create', onCreate],
  ['undici:request:headers', onHeaders],
  ['undici:request:trailers', onTrailers],
  ['undici:request:error', onError],
];

export class RequestTracker {
  readonly recorder: Recorder;
  readonly clock: Clock;
  #open = true;

  constructor(recorder: Recorder, clock: Clock) {
    this.recorder = recorder;
    this.clock = clock;
    if (subscribers++ === 0) for (const [name, fn] of CHANNELS) subscribe(name, fn);
  }

  /** Runs a synchronous dispatch; requests it creates are counted by this tracker. */
  track<T>(fn: () => T): T {
    const previous = dispatching;
    dispatching = this;
    try {
      return fn();
    } finally {
      dispatching = previous;
    }
  }

  close(): void {
    if (!this.#open) return;
    this.#open = false;
    if (--subscribers === 0) for (const [name, fn] of CHANNELS) unsubscribe(name, fn);
  }
}

/** The base dispatcher: the Agent itself, with its dispatches attributed to a tracker. */
export class TrackedDispatcher extends Dispatcher {
  readonly #agent: Agent;
  readonly #tracker: RequestTracker;

  constructor(agent: Agent, tracker: RequestTracker) {
    super();
    this.#agent = agent;
    this.#tracker = tracker;
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return this.#tracker.track(() => this.#agent.dispatch(opts, handler));
  }

  override async close(): Promise<void> {
    this.#tracker.close();
    await this.#agent.close();
  }

  override async destroy(): Promise<void> {
    this.#tracker.close();
    await this.#agent.destroy();
  }
}
