import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import {
  AcpRouter,
  registerAuditRoutes,
  registerClickRoutes,
  registerClusterRoutes,
  registerConsoleRoutes,
  registerCronRoutes,
  registerHttpClientRoutes,
  registerOperatorRoutes,
  registerPostbackRoutes,
  registerReportRoutes,
  registerRoutingRoutes,
  registerSystemRoutes,
} from './acp/index.ts';
import { AuditTrail } from './audit/index.ts';
import { Authenticator, AuthLimiter, bootstrapAdmin, OperatorDirectory } from './auth/index.ts';
import { ClickDescriber, ClickLog, UniquenessExchange, visitorSecret } from './clicks/index.ts';
import { type LeaderElection, LocalElection, NodeHeartbeat, PostgresElection } from './cluster/index.ts';
import {
  type Config,
  ConfigError,
  type LoadOptions,
  loadConfig,
  Redactor,
  resolveBuildInfo,
} from './config/index.ts';
import { registerConsole } from './console/index.ts';
import { PostbackKeys, postbackDialect, registerPostbackRoute } from './conversions/index.ts';
import { Schedule, Scheduler } from './cron/index.ts';
import { describeCause } from './errors/index.ts';
import {
  createServer,
  drainServer,
  loadGeoCountry,
  registerHealth,
  registerMetricsRoute,
} from './http/index.ts';
import { HttpClient } from './http-client/index.ts';
import { type Counts, RoutingLedger, RoutingService, registerGoRoute, simulate } from './routing/index.ts';
import { migrateWhenReachable, openStorage, StartAbandoned, type Storage } from './storage/index.ts';
import { clickWrites, taskRunner } from './tasks/index.ts';
import { createLogger, type Logger, Telemetry } from './telemetry/index.ts';
import { type Clock, systemClock } from './time/index.ts';

export interface StartOptions extends LoadOptions {
  /** Where log lines go (tests capture them); stdout when absent. */
  logDestination?: DestinationStream;
  clock?: Clock;
  /** Prints the one-time bootstrap token and postback key; stderr when absent. Never the logger. */
  print?: (line: string) => void;
  /** The routing decision's random source (weighted rotation); tests seed it. */
  random?: () => number;
  /** A stop asked for while the node starts: a wait for an unreachable database gives up. */
  startAborted?: AbortSignal;
}

/**
 * What a node holds that the database does not have yet: what a forced exit now loses. Clicks
 * buffered or in batches not yet acknowledged (a batch under way may yet have committed), and the
 * counts not yet persisted, summed over flows.
 */
export interface Unwritten {
  clicks_buffered: number;
  clicks_unacked: number;
  counts_unpersisted: Counts;
}

/**
 * How a graceful stop ended: `complete` when every answered click and every count was written;
 * else what it could not write by its deadline (the database refused them) and so lost.
 */
export interface StopOutcome {
  complete: boolean;
  clicks_lost: number;
  counts_lost: Counts;
}

/** A running node, as the CLI and the tests see it. */
export interface SluiceNode {
  url: string;
  app: FastifyInstance;
  config: Config;
  mode: string;
  serverId: string;
  telemetry: Telemetry;
  storage: Storage;
  election: LeaderElection;
  routing: RoutingService;
  /** What /go counted (counters, daily caps, unknown slugs) and their flush. */
  ledger: RoutingLedger;
  /** Describes each /go click (ids, user agents, uniqueness); the uniqueness exchange reads it. */
  clickDescriber: ClickDescriber;
  clickLog: ClickLog;
  /** Uniqueness shared through PostgreSQL; undefined on SQLite (a single node has no one to tell). */
  uniquenessExchange: UniquenessExchange;
  httpClient: HttpClient;
  scheduler: Scheduler;
  logger: Logger;
  acp: AcpRouter;
  /**
   * Graceful stop: stop accepting, finish in-flight requests, write what was counted and logged,
   * release leadership, close storage. Says whether everything answered was written.
   */
  stop(): Promise<StopOutcome>;
  /** What is not written yet, for the last record of an exit that does not wait for the stop. */
  unwritten(): Unwritten;
}

/** How long leader-task runs stay in the run journal. */
const JOURNAL_KEEP_MS = 7 * 86_400_000;
/**
 * A graceful stop ends within `app.server.shutdown_timeout_ms` + this (the CLI's hard-exit timer is
 * armed for as long; README.md, "Stopping"). The click log retries its last writes (the clicks and
 * their counts), while the database refuses, for what is left of it.
 */
const STOP_SLACK_MS = 1000;
/** Kept, of a stop's budget, for what follows the click log: the last sightings, leadership, storage, exit. */
const AFTER_CLICK_LOG_MS = 300;
/** Kept, of a stop's budget, for what follows the last sightings: leadership, storage, the log, exit. */
const AFTER_SIGHTINGS_MS = 200;
/** A failed start undoes what it made with no stop deadline: the click log's retries are this long. */
const UNDO_RETRY_MS = 1000;

/** A stable-looking id for this process when `app.server.id` is unset: host name plus 8 hex. */
export function generateServerId(): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 100) || 'node';
  return `${host}-${randomBytes(4).toString('hex')}`;
}

/** Why the configured address cannot be listened on, as a configuration error naming the keys. */
function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const why: Record<string, string> = {
    EADDRINUSE: `app.server.port: ${where} is already in use; stop what holds it, or choose another port: app.server.port in the configuration, or APP__APP__SERVER__PORT=<port> in the environment`,
    EACCES: `app.server.port: ${where} needs privileges this process lacks; choose a port above 1023`,
    EADDRNOTAVAIL: `app.server.host: ${host} is not an address of this machine`,
  };
  const message = err.code === undefined ? undefined : why[err.code];
  return message === undefined ? err : new ConfigError(`config: ${message} (${err.code})`, { cause: err });
}

/**
 * The composition root — the only place that knows every part:
 * config → logger → storage → cluster → telemetry → http client → routing → cron (+ tasks) → http (+ ACP) → listen.
 */
export async function startNode(opts: StartOptions = {}): Promise<SluiceNode> {
  const loaded = loadConfig(opts);
  const { config, mode } = loaded;
  const cwd = opts.cwd ?? process.cwd();
  const clock = opts.clock ?? systemClock;
  const serverId = config.app.server.id ?? generateServerId();
  const build = resolveBuildInfo(config, cwd);
  const logger = createLogger({
    level: config.observability.logging.level,
    name: config.app.name,
    serverId,
    ...(opts.logDestination ? { destination: opts.logDestination } : {}),
  });

  // A country database that cannot be read is a configuration error: said before anything starts.
  const geo = loadGeoCountry(config.routing);
  const storage = openStorage(config, clock, cwd, logger, { node: true });
  const startedAt = new Date(clock.now()).toISOString();
  const heartbeat = new NodeHeartbeat({
    store: storage.cluster,
    node: { server_id: serverId, started_at: startedAt, version: build.version, commit: build.commit },
    logger,
    forgetAfterMs: config.cluster.forget_after_ms,
  });
  const election: LeaderElection =
    config.cluster.leader_election === 'postgres'
      ? new PostgresElection({
          store: storage.cluster,
          serverId,
          clock,
          logger,
          leaseTtlMs: config.cluster.lease_ttl_ms,
          renewIntervalMs: config.cluster.renew_interval_ms,
          heartbeat,
        })
      : new LocalElection(serverId, { heartbeat, renewIntervalMs: config.cluster.renew_interval_ms });
  // One lifecycle for a failed start and for a stop: each part, once made, registers how it is
  // undone; both unwind the same stack in reverse order, and a part that fails to stop does not
  // keep the ones below it (counters, leadership, storage) from stopping.
  const lifecycle = new AsyncDisposableStack();
  /** What the stop's last writes could not write, and so lost. */
  const lost: StopOutcome = {
    complete: true,
    clicks_lost: 0,
    counts_lost: { clicks: 0, no_match: 0, bots: 0, uniques: 0 },
  };
  /** When a stop must be over (monotonic ms), set when it begins; a failed start has none. */
  let stopDeadline: number | undefined;
  /** What is left of the stop's budget for a part, keeping `reserve` ms for the parts after it. */
  const leftOfStop = (reserve: number) =>
    stopDeadline === undefined ? UNDO_RETRY_MS : Math.max(0, stopDeadline - clock.monotonic() - reserve);
  lifecycle.defer(() => logger.flush());
  lifecycle.defer(() => storage.close());
  try {
    await migrateWhenReachable(storage, {
      clock,
      logger,
      waitMs: config.storage.postgres.start_wait_ms,
      signal: opts.startAborted,
    });
    lifecycle.defer(() => election.stop());
    await election.start();
    const telemetry = new Telemetry({
      clock,
      serverId,
      version: build.version,
      commit: build.commit,
      prefix: config.observability.metrics.prefix,
      controllerBucketsMs: config.observability.metrics.controller_buckets_ms,
      httpBucketsMs: config.observability.metrics.http_buckets_ms,
      taskBucketsMs: config.observability.metrics.task_buckets_ms,
      isLeader: () => election.isLeader(),
      leaderId: () => election.leaderId(),
      processMetrics: config.observability.metrics.prometheus_enabled,
    });
    lifecycle.defer(() => telemetry.stop());
    const hc = config.http_client;
    // One rule for every view of a secret: captures, task errors, the configuration.
    const redactor = Redactor.of(config);
    const httpClient = new HttpClient({
      telemetry,
      logger,
      clock,
      timeoutMs: hc.timeout_ms,
      totalTimeoutMs: hc.total_timeout_ms,
      retries: hc.retries,
      backoffMs: hc.backoff_ms,
      maxBackoffMs: hc.max_backoff_ms,
      captureBodyBytes: hc.capture_body_bytes,
      redactor,
      recentFailures: hc.recent_failures,
      propagateRequestId: hc.propagate_request_id,
    });
    lifecycle.defer(() => httpClient.close());
    const ledger = RoutingLedger.fromConfig(config, { storage, logger, clock });
    const routing = new RoutingService({
      storage,
      logger,
      ledger,
      cacheMaxEntries: config.cache.max_entries,
      cacheTtlMs: config.cache.ttl_ms,
    });
    let journaled = 0;
    const scheduler = new Scheduler({
      clock,
      logger,
      telemetry,
      isLeader: () => election.isLeader(),
      epoch: () => election.epoch(),
      fence: () => election.fence(),
      journal: {
        start: (run, fence) => storage.cluster.startRun(run, fence),
        finish: async (id, err, fence) => {
          const ok = await storage.cluster.finishRun(id, err, fence);
          // The journal keeps a week of runs; the leader trims it every 100 runs.
          if (++journaled % 100 === 0) await storage.cluster.prune(JOURNAL_KEEP_MS).catch(() => {});
          return ok;
        },
      },
      serverId,
      redact: (text) => redactor.text(text),
    });
    // Losing leadership aborts leader-scoped runs at once; their writes are fenced anyway.
    election.onChange((isLeader) => {
      if (!isLeader) scheduler.abortLeaderRuns();
    });
    // First sightings are written to the database: nodes that share PostgreSQL agree on uniques
    // through them, and a node (SQLite's single one too) that restarts still knows who clicked
    // (docs/clicks.md#uniqueness).
    const clickDescriber = new ClickDescriber({
      clock,
      userAgentCacheMax: config.routing.user_agent_cache_max,
      visitorSecret: await visitorSecret(config.clicks.visitor_key_secret, storage),
      uniquenessTtlHours: config.routing.uniqueness_ttl_hours,
      uniquenessMaxEntries: config.routing.uniqueness_max_entries,
      shareUniqueness: true,
    });
    // With a clicks.flush task the scheduler writes the click log; without one, its own timer.
    const writes = clickWrites(config.cron.tasks, config.clicks.flush_interval_ms);
    const clickLog = new ClickLog({
      store: storage.clicks,
      logger,
      serverId,
      // The counters are written with the clicks that made them, batch by batch.
      counts: ledger.counters,
      bufferMax: config.clicks.buffer_max,
      flushIntervalMs: writes.timerMs,
      clock,
      telemetry,
      uniqueness: clickDescriber.uniqueness,
    });
    for (const [name, task] of Object.entries(config.cron.tasks)) {
      scheduler.add({
        name,
        kind: task.kind,
        schedule: new Schedule(task.schedule),
        // The loader gave every task its kind's scope; a probe must have said its own.
        scope: task.execution_scope!,
        enabled: task.enabled,
        timeoutMs: task.timeout_ms,
        run: taskRunner(name, task, {
          routing,
          ledger,
          storage,
          httpClient,
          clock,
          clickRetentionDays: config.clicks.retention_days,
          reportRetentionDays: config.reports.retention_days,
          clickLog,
        }),
      });
    }
    telemetry.setSection('db', () => storage.stats());
    telemetry.setSection('cache', () => routing.cache.section());
    telemetry.setSection('streams', () => ledger.streamsSection(routing.totals().streams));
    telemetry.setSection('traffic_flows', () =>
      ledger.flowsSection(routing.totals().traffic_flows, routing.withoutDefaultStream()),
    );
    const uniquenessExchange = new UniquenessExchange({
      window: clickDescriber.uniqueness,
      store: storage.sightings,
      serverId,
      clock,
      logger,
      flushIntervalMs: config.clicks.flush_interval_ms,
      ttlHours: config.routing.uniqueness_ttl_hours,
      maxEntries: config.routing.uniqueness_max_entries,
    });
    // Before the first postback: a restarted node knows the stored keys at once.
    const postbackKeys = new PostbackKeys({
      requireKey: config.postback.require_key,
      configuredSha256: config.postback.key_sha256,
      previousConfiguredSha256: config.postback.previous_key_sha256,
      graceHours: config.postback.key_grace_hours,
      store: storage,
      clock,
      logger,
    });
    await postbackKeys.start();
    telemetry.setSection('postbacks', () => postbackKeys.section());
    // Before the first click: the windows other nodes (or this node's last run) opened are loaded.
    await uniquenessExchange.start();
    // The stop's database writes, one after another in the order of what they keep: the click log
    // (the answered clicks and their counts), then the last sightings (the stack unwinds the last
    // deferred first). Sightings not sent cost at most a visitor counted unique once more.
    lifecycle.defer(() => uniquenessExchange.stop(leftOfStop(AFTER_SIGHTINGS_MS)));
    telemetry.start();
    routing.start();
    lifecycle.defer(() => routing.stop());
    ledger.start();
    lifecycle.defer(() => ledger.stop());
    clickLog.start();
    // After the server drained: every click answered, and what it counted, is in the buffer by
    // then, whatever became of the server's close. A database that refuses is retried for what is
    // left of the stop's budget (a short outage costs no click).
    lifecycle.defer(async () => {
      const { lost: clicks } = await clickLog.stop(leftOfStop(AFTER_CLICK_LOG_MS));
      const counts = ledger.counters.unpersisted();
      if (clicks === 0 && !ledger.counters.pending) return;
      lost.complete = false;
      lost.clicks_lost = clicks;
      lost.counts_lost = counts;
    });

    const app = createServer({ config, logger, telemetry, serverId, geo });
    const graceMs = config.app.server.shutdown_timeout_ms;
    // The server drains while running tasks get the same grace period.
    lifecycle.defer(async () => {
      const [drained, tasks] = await Promise.allSettled([drainServer(app, graceMs), scheduler.stop(graceMs)]);
      if (drained.status === 'fulfilled' && drained.value.stalled + drained.value.cut > 0)
        logger.warn({ ...drained.value, timeout_ms: graceMs }, 'connections closed at the stop deadline');
      for (const r of [drained, tasks]) if (r.status === 'rejected') throw r.reason;
    });
    registerHealth(app, () => storage.ping());
    const authLimits = {
      maxFailures: config.acp.auth_rate_limit.max_failures,
      windowMs: config.acp.auth_rate_limit.window_ms,
      clock,
    };
    const authLimiter = new AuthLimiter(authLimits);
    if (config.observability.metrics.prometheus_enabled) {
      registerMetricsRoute(app, telemetry, {
        tokenSha256: config.observability.metrics.auth_token_sha256,
        limiter: authLimiter,
      });
    }
    // Who changed what over the ACP: a record and a row per successful write; the leader keeps a week.
    const audit = new AuditTrail({
      store: storage.audit,
      logger,
      clock,
      serverId,
      isLeader: () => election.isLeader(),
    });
    audit.start();
    lifecycle.defer(() => audit.stop());
    const authenticator = new Authenticator(config.acp.operators, storage.operators, clock);
    const acp = new AcpRouter(app, authenticator, {
      limiter: authLimiter,
      audit,
    });
    registerSystemRoutes(acp, { config, mode, telemetry, redactor });
    const simulator = {
      load: async (slug: string) => routing.cache.peek(slug) ?? (await routing.cache.load(slug)),
      describer: clickDescriber,
      clock,
      geo,
      fallbackUrl: config.routing.fallback_url,
    };
    registerRoutingRoutes(acp, {
      routing,
      telemetry,
      commit: build.commit,
      simulate: (input) => simulate(simulator, input),
    });
    registerClickRoutes(acp, {
      clicks: storage.clicks,
      conversions: storage.conversions,
      pendingClick: (id) => clickLog.find(id),
      telemetry,
      commit: build.commit,
    });
    registerReportRoutes(acp, {
      storage,
      clock,
      clickRetentionDays: config.clicks.retention_days,
      bounds: { timeoutMs: config.reports.query_timeout_ms, maxRows: config.reports.max_rows },
    });
    registerHttpClientRoutes(acp, httpClient);
    registerCronRoutes(acp, scheduler);
    registerClusterRoutes(acp, {
      storage,
      election,
      serverId,
      cluster: config.cluster,
      telemetry,
      httpClient,
    });
    registerOperatorRoutes(
      acp,
      new OperatorDirectory(config.acp.operators, storage.operators, (name) => authenticator.forget(name)),
    );
    registerAuditRoutes(acp, storage.audit);
    registerPostbackRoutes(acp, postbackKeys);
    registerConsoleRoutes(acp, {
      telemetry,
      scheduler,
      httpClient,
      election,
      clock,
      commit: build.commit,
      version: build.version,
      taskP95Ms: config.acp.task_p95_ms,
      clientErrorRate: config.acp.client_error_rate,
    });
    registerConsole(app);
    registerGoRoute(
      app,
      { cache: routing.cache, ledger },
      { describer: clickDescriber, log: clickLog, fallbackUrl: config.routing.fallback_url },
      clock,
      opts.random,
    );
    registerPostbackRoute(app, {
      conversions: storage.conversions,
      pendingClick: (clickId) => clickLog.find(clickId),
      keys: postbackKeys,
      dialect: postbackDialect(config.postback),
      // Its own count: a network still sending an old key must not lock operators out of the ACP.
      limiter: new AuthLimiter(authLimits),
      recentClickWaitMs: writes.waitMs,
      clock,
    });

    const { host: listenHost, port: listenPort } = config.app.server;
    await app.listen({ host: listenHost, port: listenPort }).catch((err: NodeJS.ErrnoException) => {
      throw listenError(err, listenHost, listenPort);
    });
    const addr = app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : config.app.server.port;
    const host = config.app.server.host.includes(':')
      ? `[${config.app.server.host}]`
      : config.app.server.host;
    const url = `http://${host}:${port}`;
    const wildcard = listenHost === '0.0.0.0' || listenHost === '::';
    heartbeat.advertise(config.cluster.advertise_url ?? (wildcard ? `http://${hostname()}:${port}` : url));
    // Listed with its address now, not at the next renewal.
    await heartbeat.beat(election.isLeader());
    // After listening: a start that fails (a busy port) must not spend the one showing of a secret.
    // On stderr: stdout is the JSON log stream, and a secret never goes into a log (docs/telemetry.md#logs).
    const print = opts.print ?? ((line: string) => process.stderr.write(`${line}\n`));
    if (mode === 'development') {
      const token = await bootstrapAdmin(storage.operators, config.acp.operators.length);
      if (token !== undefined) {
        print(
          `Created ACP operator "admin" (role admin). Its token, shown only this once:\n\n    ${token}\n`,
        );
      }
    }
    const postbackKey = await postbackKeys.ensure();
    if (postbackKey !== undefined) {
      print(
        `Created the postback key. Networks send it as &key=... on /postback; shown only this once (POST /acp/postback/rotate-key makes another):\n\n    ${postbackKey}\n`,
      );
    }

    scheduler.start();
    // Whom the node believes about a client (docs/deployment.md#behind-a-reverse-proxy): a proxy
    // among these that passes on a client's own country header lets the client pick its country.
    logger.info(
      {
        trusted_proxies: config.app.server.trusted_proxies,
        country_header: config.app.server.country_header,
      },
      'client address (X-Forwarded-For) and country header believed from these trusted proxies only',
    );
    logger.info(
      { url, mode, commit: build.commit, version: build.version, files: loaded.files },
      'sluice started',
    );

    let stopping: Promise<StopOutcome> | undefined;
    return {
      url,
      app,
      config,
      mode,
      serverId,
      telemetry,
      storage,
      election,
      routing,
      ledger,
      clickDescriber,
      clickLog,
      uniquenessExchange,
      httpClient,
      scheduler,
      logger,
      acp,
      unwritten: () => {
        const clicks = clickLog.stats();
        return {
          clicks_buffered: clicks.buffered,
          clicks_unacked: clicks.unacked,
          counts_unpersisted: ledger.counters.unpersisted(),
        };
      },
      stop: () => {
        stopping ??= (async () => {
          stopDeadline = clock.monotonic() + config.app.server.shutdown_timeout_ms + STOP_SLACK_MS;
          logger.info('sluice stopping');
          await lifecycle.disposeAsync();
          // A stop that lost answered clicks or counts is a failed one (exit 1): its last record says what.
          if (!lost.complete)
            logger.error(
              { clicks_lost: lost.clicks_lost, counts_lost: lost.counts_lost },
              'sluice stopped without writing every answered click and count: the database refused them until the stop timed out; they are lost',
            );
          else logger.info('sluice stopped');
          logger.flush();
          return lost;
        })();
        return stopping;
      },
    };
  } catch (err) {
    if (err instanceof StartAbandoned)
      logger.info({ reason: err.message }, 'sluice start abandoned: stopped');
    else logger.error({ err: describeCause(err) }, 'sluice could not start');
    await lifecycle.disposeAsync().catch((stopErr: unknown) => {
      logger.error({ err: stopErr }, 'error while undoing a failed start');
    });
    throw err;
  }
}
