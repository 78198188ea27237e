/** At most `max` bytes of a payload, marked when cut. */
export function truncate(body: string | undefined, max: number): string | undefined {
  if (body === undefined || body === '') return undefined;
  const bytes = Buffer.byteLength(body);
  if (bytes <= max) return body;
  return `${Buffer.from(body).subarray(0, max).toString('utf8')}…[truncated, ${bytes} bytes]`;
}

/** One captured failed call, as the ACP returns it. */
export interface FailedCall {
  at: string;
  client: string;
  task: string | null;
  run_id: string | null;
  request_id: string | null;
  method: string;
  url: string;
  request_headers: Record<string, string>;
  request_body: string | null;
  attempt: number;
  status: number | null;
  error: string;
  duration_ms: number;
}

/** The last N failed calls of each client, oldest dropped first; memory is bounded by N × clients. */
export class RecentFailures {
  readonly #max: number;
  readonly #byClient = new Map<string, { seq: number; call: FailedCall }[]>();
  #seq = 0;

  constructor(maxPerClient: number) {
    this.#max = maxPerClient;
  }

  add(call: FailedCall): void {
    if (this.#max === 0) return;
    let ring = this.#byClient.get(call.client);
    if (ring === undefined) {
      ring = [];
      this.#byClient.set(call.client, ring);
    }
    ring.push({ seq: ++this.#seq, call });
    if (ring.length > this.#max) ring.shift();
  }

  /** Newest first, optionally only one client's or one task's. */
  list(filter: { client?: string | undefined; task?: string | undefined; limit: number }): FailedCall[] {
    const pools =
      filter.client === undefined ? [...this.#byClient.values()] : [this.#byClient.get(filter.client) ?? []];
    return pools
      .flat()
      .filter((e) => filter.task === undefined || e.call.task === filter.task)
      .sort((a, b) => b.seq - a.seq)
      .slice(0, filter.limit)
      .map((e) => e.call);
  }
}
