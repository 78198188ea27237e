import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Config } from '../config/index.ts';
import type { Clock } from '../time/index.ts';
import { CONTENT_TYPES, type ExpositionFormat, ExpositionWriter } from './exposition.ts';
import { type HostSection, HostStats } from './host-stats.ts';
import { escapeLabelValue, RecentWindow, Recorder, type RecorderEntry, RecorderGroup } from './recorder.ts';
import { EMPTY_SECTIONS, type SectionName, type Sections } from './sections.ts';

/**
 * prom-client's gauges named like counters (`promtool check metrics`: "non-counter metrics should
 * not have _total suffix"; prom-client issue #283). Each is only the sum of its sibling without the
 * suffix, which is labelled by `type` — `sum(nodejs_active_handles)` gives it — so leaving them out
 * loses nothing and keeps the exposition lint-clean.
 */
const GAUGES_NAMED_LIKE_COUNTERS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** The routes' `recent` window (docs/telemetry.md#recent-windows): five minutes in 30-second slots. */
const ROUTE_WINDOW = { slotMs: 30_000, slots: 10 };
/** The tasks' window for `p95_last_hour`: an hour in 6-minute slots. */
const TASK_WINDOW = { slotMs: 360_000, slots: 10 };
/** How often the windows look at the clock; a call lands at most this late in its slot. */
const WINDOW_SYNC_MS = 1000;

/** Route key shared by every request that matched no route, so scanners cannot grow the map. */
export const UNMATCHED_ROUTE = '__unmatched__';

export interface TelemetryOptions {
  clock: Clock;
  serverId: string;
  version: string | undefined;
  commit: string;
  /** The seed's `svc`: metric family prefix, without the trailing underscore. */
  prefix: string;
  controllerBucketsMs: readonly number[];
  httpBucketsMs: readonly number[];
  taskBucketsMs: readonly number[];
  isLeader: () => boolean;
  /** The current leader's server id as last seen. */
  leaderId?: () => string | undefined;
  /** Adds Node's process metrics (prom-client's default collectors) to the exposition. */
  processMetrics?: boolean;
}

/** Outgoing HTTP statistics, measured at the base client so every retry attempt counts. */
export interface HttpSection {
  total_requests: number;
  errors: number;
  duration_ms_sum: number;
  buckets: Record<string, number>;
  retries: number;
}

/** The system metrics object (docs/telemetry.md#system-metrics): built-in sections and the ones capabilities provide (sections.ts). */
export interface SystemMetrics extends Sections {
  host: HostSection;
  http: HttpSection;
  controllers: Record<string, RecorderEntry>;
  version?: string;
}

/** Writes one or more metric families into an exposition. */
export type FamilyWriter = (w: ExpositionWriter) => void;

/**
 * The node's telemetry hub: recorders every capability records into, the system metrics object
 * (docs/telemetry.md#system-metrics) and the exposition (docs/telemetry.md#exposition-get-metrics) rendered from the very same counters. Created once in the
 * composition root and passed to whoever records — there is no global registry.
 */
export class Telemetry {
  readonly clock: Clock;
  readonly serverId: string;
  readonly version: string | undefined;
  readonly commit: string;
  readonly prefix: string;
  readonly controllers: RecorderGroup;
  /** Outgoing HTTP: one recorder for all clients (the seed's `http` section) plus retry count. */
  readonly http: { recorder: Recorder; retries: number };
  /** Task run durations keyed by task name (filled by the cron capability). */
  readonly tasks: RecorderGroup;
  readonly host: HostStats;
  readonly #isLeader: () => boolean;
  readonly #leaderId: () => string | undefined;
  readonly #sections: { [K in SectionName]: () => Sections[K] } = { ...EMPTY_SECTIONS };
  readonly #families: FamilyWriter[] = [];
  readonly #process: Record<ExpositionFormat, Registry> | undefined;
  readonly #windows: RecentWindow[];
  #windowTimer: NodeJS.Timeout | undefined;

  /** Telemetry as `observability.metrics` asks, for this node and its election. */
  static fromConfig(
    config: Config,
    deps: {
      clock: Clock;
      serverId: string;
      build: { version: string | undefined; commit: string };
      election: { isLeader(): boolean; leaderId(): string | undefined };
    },
  ): Telemetry {
    const m = config.observability.metrics;
    return new Telemetry({
      clock: deps.clock,
      serverId: deps.serverId,
      version: deps.build.version,
      commit: deps.build.commit,
      prefix: m.prefix,
      controllerBucketsMs: m.controller_buckets_ms,
      httpBucketsMs: m.http_buckets_ms,
      taskBucketsMs: m.task_buckets_ms,
      isLeader: () => deps.election.isLeader(),
      leaderId: () => deps.election.leaderId(),
      processMetrics: m.prometheus_enabled,
    });
  }

  constructor(opts: TelemetryOptions) {
    this.clock = opts.clock;
    this.serverId = opts.serverId;
    this.version = opts.version;
    this.commit = opts.commit;
    this.prefix = opts.prefix;
    this.#isLeader = opts.isLeader;
    this.#leaderId = opts.leaderId ?? (() => (opts.isLeader() ? opts.serverId : undefined));
    const now = () => opts.clock.now();
    const routeWindow = new RecentWindow({ ...ROUTE_WINDOW, now });
    const taskWindow = new RecentWindow({ ...TASK_WINDOW, now });
    this.#windows = [routeWindow, taskWindow];
    this.controllers = new RecorderGroup('route', opts.controllerBucketsMs, routeWindow);
    this.tasks = new RecorderGroup('task', opts.taskBucketsMs, taskWindow);
    this.http = { recorder: new Recorder(Object.freeze([...opts.httpBucketsMs])), retries: 0 };
    this.host = new HostStats(opts.clock, opts.serverId, opts.isLeader, this.#leaderId);
    if (opts.processMetrics !== false) {
      // Two private registries (never prom-client's global one), one per exposition format.
      const text = new Registry();
      const om = new Registry();
      om.setContentType(
        Registry.OPENMETRICS_CONTENT_TYPE as unknown as typeof Registry.PROMETHEUS_CONTENT_TYPE,
      );
      for (const register of [text, om]) {
        collectDefaultMetrics({ register });
        for (const name of GAUGES_NAMED_LIKE_COUNTERS) register.removeSingleMetric(name);
      }
      this.#process = { text, openmetrics: om };
    }
  }

  isLeader(): boolean {
    return this.#isLeader();
  }

  leaderId(): string | undefined {
    return this.#leaderId();
  }

  start(): void {
    this.host.start();
    this.#windowTimer ??= setInterval(() => {
      for (const w of this.#windows) w.sync();
    }, WINDOW_SYNC_MS).unref();
  }

  stop(): void {
    this.host.stop();
    clearInterval(this.#windowTimer);
    this.#windowTimer = undefined;
  }

  /** Replaces the zero-filled default of a section with a live provider of its type. */
  setSection<K extends SectionName>(name: K, provider: () => Sections[K]): void {
    (this.#sections as Record<K, () => Sections[K]>)[name] = provider;
  }

  /** Adds metric families to the exposition (rendered after the built-in ones). */
  addFamilies(writer: FamilyWriter): void {
    this.#families.push(writer);
  }

  httpSection(): HttpSection {
    const r = this.http.recorder;
    return {
      total_requests: r.count,
      errors: r.errors,
      duration_ms_sum: r.sum,
      buckets: r.bucketsObject(),
      retries: this.http.retries,
    };
  }

  systemMetrics(): SystemMetrics {
    const s = this.#sections;
    const out: SystemMetrics = {
      host: this.host.snapshot(),
      cache: s.cache(),
      db: s.db(),
      http: this.httpSection(),
      controllers: this.controllers.snapshot(),
      tasks: s.tasks(),
      streams: s.streams(),
      traffic_flows: s.traffic_flows(),
      clicks: s.clicks(),
      postbacks: s.postbacks(),
    };
    if (this.version !== undefined) out.version = this.version;
    return out;
  }

  /** The exposition text in the given format, and its content type. */
  async exposition(format: ExpositionFormat): Promise<{ body: string; contentType: string }> {
    const w = new ExpositionWriter(format, `${this.prefix}_`);
    this.writeFamilies(w);
    if (this.#process) {
      const text = await this.#process[format].metrics();
      w.raw(format === 'openmetrics' ? text.replace(/# EOF\n?$/, '') : text);
    }
    return { body: w.finish(), contentType: CONTENT_TYPES[format] };
  }

  /** Every family of Sluice's own counters (everything except Node's process metrics). */
  writeFamilies(w: ExpositionWriter): void {
    const controllers = [...this.controllers.entries()].map(([, r]) => r);
    w.counter(
      'controller_requests',
      'Handled calls per route template.',
      controllers.map((r) => [r.labels, r.count] as const),
    );
    w.counter(
      'controller_errors',
      'Calls per route that ended in an API error (client and server errors).',
      controllers.map((r) => [r.labels, r.errors] as const),
    );
    w.counter(
      'controller_client_errors',
      'Calls per route answered with a 4xx API error (the caller was wrong).',
      controllers.map((r) => [r.labels, r.clientErrors] as const),
    );
    w.counter(
      'controller_server_errors',
      'Calls per route answered with a 5xx API error (this node failed).',
      controllers.map((r) => [r.labels, r.serverErrors] as const),
    );
    w.histogram('controller_duration_milliseconds', 'Handler latency per route, milliseconds.', controllers);

    const tasks = [...this.tasks.entries()].map(([, r]) => r);
    w.counter(
      'task_runs',
      'Finished runs per task.',
      tasks.map((r) => [r.labels, r.count] as const),
    );
    w.counter(
      'task_failures',
      'Failed runs per task.',
      tasks.map((r) => [r.labels, r.errors] as const),
    );
    w.histogram('task_duration_milliseconds', 'Task run duration, milliseconds.', tasks);

    const http = this.http.recorder;
    w.counter('http_client_requests', 'Outgoing HTTP requests (each attempt counts).', [['', http.count]]);
    w.counter('http_client_errors', 'Failed outgoing HTTP requests.', [['', http.errors]]);
    w.counter('http_client_retries', 'Outgoing HTTP attempts beyond the first.', [['', this.http.retries]]);
    w.histogram('http_client_duration_milliseconds', 'Outgoing HTTP request duration, milliseconds.', [http]);

    for (const write of this.#families) write(w);

    w.gauge('build_info', 'Build of this node; the value is always 1.', [
      [`version="${escapeLabelValue(this.version ?? '')}",commit="${escapeLabelValue(this.commit)}"`, 1],
    ]);
    w.gauge('is_leader', '1 when this node currently holds leadership.', [['', this.#isLeader() ? 1 : 0]]);
  }
}
