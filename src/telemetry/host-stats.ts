import { hostname } from 'node:os';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { Clock } from '../time/index.ts';

export interface HostSection {
  uptime_seconds: number;
  server_id: string;
  is_leader: boolean;
  /** The current leader's server id as this node last saw it (null when unknown). */
  leader_id: string | null;
  hostname: string;
  pid: number;
  node_version: string;
  memory: {
    rss_bytes: number;
    heap_total_bytes: number;
    heap_used_bytes: number;
    external_bytes: number;
    array_buffers_bytes: number;
  };
  cpu: { user_seconds: number; system_seconds: number; percent: number };
  event_loop: { delay_p50_ms: number; delay_p99_ms: number; delay_max_ms: number; utilization: number };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
/** Length of the window for "current" CPU percent and event-loop utilisation. */
const WINDOW_MS = 10_000;
/** Resolution of the event-loop delay histogram, ms; subtracted from what it reads. */
const DELAY_RESOLUTION_MS = 10;

/**
 * Process and host figures for the `host` section. CPU percent and event-loop utilisation are over
 * the last ~10 s window (a timer samples them), so they say what the node is doing now; delay
 * percentiles cover the same window.
 */
export class HostStats {
  readonly #clock: Clock;
  readonly #serverId: string;
  readonly #isLeader: () => boolean;
  readonly #leaderId: () => string | undefined;
  readonly #startedAt: number;
  readonly #delay: ReturnType<typeof monitorEventLoopDelay> = monitorEventLoopDelay({
    resolution: DELAY_RESOLUTION_MS,
  });
  #timer: NodeJS.Timeout | undefined;
  #lastElu = performance.eventLoopUtilization();
  #lastCpu = process.cpuUsage();
  #lastAt: number;
  #window = { cpuPercent: 0, elu: 0, p50: 0, p99: 0, max: 0 };
  #sampled = false;

  readonly #windowMs: number;

  constructor(
    clock: Clock,
    serverId: string,
    isLeader: () => boolean,
    leaderId?: () => string | undefined,
    /** How often the window is sampled (tests shorten it). */
    windowMs = WINDOW_MS,
  ) {
    this.#windowMs = windowMs;
    this.#clock = clock;
    this.#serverId = serverId;
    this.#isLeader = isLeader;
    this.#leaderId = leaderId ?? (() => (isLeader() ? serverId : undefined));
    this.#startedAt = clock.monotonic();
    this.#lastAt = clock.monotonic();
  }

  start(): void {
    this.#delay.enable();
    this.#timer = setInterval(() => this.#sample(), this.#windowMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#delay.disable();
  }

  /**
   * The histogram records the interval between its own timer's runs, so an idle loop reads about
   * the resolution (10 ms); what is shown is the lag beyond it, in ms.
   */
  #lag(ns: number): number {
    return this.#delay.count ? round3(Math.max(0, ns / 1e6 - DELAY_RESOLUTION_MS)) : 0;
  }

  #sample(): void {
    this.#sampled = true;
    const now = this.#clock.monotonic();
    const elapsedMs = Math.max(now - this.#lastAt, 1);
    const cpu = process.cpuUsage(this.#lastCpu);
    const elu = performance.eventLoopUtilization(this.#lastElu);
    this.#window = {
      cpuPercent: round3(((cpu.user + cpu.system) / 1000 / elapsedMs) * 100),
      elu: round3(elu.utilization),
      p50: this.#lag(this.#delay.percentile(50)),
      p99: this.#lag(this.#delay.percentile(99)),
      max: this.#lag(this.#delay.max),
    };
    this.#delay.reset();
    this.#lastAt = now;
    this.#lastCpu = process.cpuUsage();
    this.#lastElu = performance.eventLoopUtilization();
  }

  snapshot(): HostSection {
    // Before the first window closes, report what has been seen so far rather than zeros.
    if (!this.#sampled && this.#clock.monotonic() - this.#lastAt >= 1000) this.#sample();
    const m = process.memoryUsage();
    const cpu = process.cpuUsage();
    return {
      uptime_seconds: round3((this.#clock.monotonic() - this.#startedAt) / 1000),
      server_id: this.#serverId,
      is_leader: this.#isLeader(),
      leader_id: this.#leaderId() ?? null,
      hostname: hostname(),
      pid: process.pid,
      node_version: process.version,
      memory: {
        rss_bytes: m.rss,
        heap_total_bytes: m.heapTotal,
        heap_used_bytes: m.heapUsed,
        external_bytes: m.external,
        array_buffers_bytes: m.arrayBuffers,
      },
      cpu: {
        user_seconds: round3(cpu.user / 1e6),
        system_seconds: round3(cpu.system / 1e6),
        percent: this.#window.cpuPercent,
      },
      event_loop: {
        delay_p50_ms: this.#window.p50,
        delay_p99_ms: this.#window.p99,
        delay_max_ms: this.#window.max,
        utilization: this.#window.elu,
      },
    };
  }
}
