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
import { Authenticator, AuthLimiter, OperatorDirectory } from './auth/index.ts';
import { ClickDescriber, ClickLog, UniquenessExchange, visitorSecret } from './clicks/index.ts';
import { electionFromConfig, type LeaderElection } from './cluster/index.ts';
import { type Config, type LoadOptions, loadConfig, Redactor, resolveBuildInfo } from './config/index.ts';
import { registerConsole } from './console/index.ts';
import { PostbackKeys, postbackDialect, registerPostbackRoute } from './conversions/index.ts';
import { Scheduler } from './cron/index.ts';
import {
  createServer,
  type GeoCountry,
  loadGeoCountry,
  registerHealth,
  registerMetricsRoute,
} from './http/index.ts';
import { HttpClient } from './http-client/index.ts';
import {
  generateServerId,
  listen,
  NodeStop,
  type StopOutcome,
  showFirstSecrets,
  type Unwritten,
  unwritten,
} from './node/index.ts';
import { RoutingLedger, RoutingService, registerGoRoute, simulate } from './routing/index.ts';
import { migrateWhenReachable, openStorage, type Storage } from './storage/index.ts';
import { clickWrites, scheduleTasks } from './tasks/index.ts';
import { createLogger, type Logger, Telemetry } from './telemetry/index.ts';
import { type Clock, systemClock } from './time/index.ts';

export { generateServerId, type StopOutcome, type Unwritten };

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
   * release leadership, close storage (src/node/stop.ts). Says whether everything answered was written.
   */
  stop(): Promise<StopOutcome>;
  /** What is not written yet, for the last record of an exit that does not wait for the stop. */
  unwritten(): Unwritten;
}

/**
 * The composition root — the only place that knows every part, and wires them without deciding:
 * config → logger → storage → cluster → telemetry → http client → routing → cron (+ tasks) →
 * http (+ ACP) → listen. Each part maps its own configuration (`fromConfig`); how the node stops
 * is src/node/stop.ts.
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
  const node = { server_id: serverId, started_at: new Date(clock.now()).toISOString(), ...build };
  const { election, heartbeat } = electionFromConfig(config, { store: storage.cluster, node, clock, logger });
  const stop = new NodeStop({ clock, logger, graceMs: config.app.server.shutdown_timeout_ms });
  stop.defer(() => logger.flush());
  stop.defer(() => storage.close());
  try {
    const waitMs = config.storage.postgres.start_wait_ms;
    await migrateWhenReachable(storage, { clock, logger, waitMs, signal: opts.startAborted });
    stop.defer(() => election.stop());
    await election.start();
    const telemetry = Telemetry.fromConfig(config, { clock, serverId, build, election });
    stop.defer(() => telemetry.stop());
    // One rule for every view of a secret: captures, task errors, the configuration.
    const redactor = Redactor.of(config);
    const httpClient = HttpClient.fromConfig(config, { telemetry, logger, clock, redactor });
    stop.defer(() => httpClient.close());
    const ledger = RoutingLedger.fromConfig(config, { storage, logger, clock });
    const routing = RoutingService.fromConfig(config, { storage, logger, ledger });
    const scheduler = new Scheduler({
      clock,
      logger,
      telemetry,
      isLeader: () => election.isLeader(),
      epoch: () => election.epoch(),
      fence: () => election.fence(),
      journal: {
        start: (run, fence) => storage.cluster.startRun(run, fence),
        finish: (id, err, fence) => storage.cluster.finishRun(id, err, fence),
      },
      serverId,
      redact: (text) => redactor.text(text),
    });
    // Losing leadership aborts leader-scoped runs at once; their writes are fenced anyway.
    election.onChange((isLeader) => {
      if (!isLeader) scheduler.abortLeaderRuns();
    });
    const secret = await visitorSecret(config.clicks.visitor_key_secret, storage);
    const clickDescriber = ClickDescriber.fromConfig(config, { clock, visitorSecret: secret });
    const uniqueness = clickDescriber.uniqueness;
    const clickLog = ClickLog.fromConfig(config, {
      store: storage.clicks,
      logger,
      serverId,
      clock,
      telemetry,
      uniqueness,
      // The counters are written with the clicks that made them, batch by batch.
      counts: ledger.counters,
    });
    scheduleTasks(scheduler, config, { routing, ledger, storage, httpClient, clock, clickLog });
    telemetry.setSection('db', () => storage.stats());
    telemetry.setSection('cache', () => routing.cache.section());
    telemetry.setSection('streams', () => ledger.streamsSection(routing.totals().streams));
    const flows = () => ledger.flowsSection(routing.totals().traffic_flows, routing.withoutDefaultStream());
    telemetry.setSection('traffic_flows', flows);
    const exchangeDeps = { window: uniqueness, store: storage.sightings, serverId, clock, logger };
    const uniquenessExchange = UniquenessExchange.fromConfig(config, exchangeDeps);
    // Before the first postback: a restarted node knows the stored keys at once.
    const postbackKeys = PostbackKeys.fromConfig(config, { store: storage, clock, logger });
    await postbackKeys.start();
    telemetry.setSection('postbacks', () => postbackKeys.section());
    // Before the first click: the windows other nodes (or this node's last run) opened are loaded.
    await uniquenessExchange.start();
    stop.sightings(uniquenessExchange);
    telemetry.start();
    routing.start();
    stop.defer(() => routing.stop());
    ledger.start();
    stop.defer(() => ledger.stop());
    clickLog.start();
    stop.clickLog(clickLog, ledger.counters);
    const app = createServer({ config, logger, telemetry, serverId, geo });
    stop.server(app, scheduler);
    // Who changed what over the ACP: a record and a row per successful write; the leader keeps a week.
    const isLeader = () => election.isLeader();
    const audit = new AuditTrail({ store: storage.audit, logger, clock, serverId, isLeader });
    audit.start();
    stop.defer(() => audit.stop());
    const parts = { config, mode, clock, serverId, build, geo, storage, election, telemetry, redactor };
    const more = { httpClient, routing, ledger, scheduler, clickDescriber, clickLog, postbackKeys, audit };
    const acp = registerRoutes(app, { ...parts, ...more, random: opts.random });

    const { url, advertised } = await listen(app, config);
    heartbeat.advertise(advertised);
    // Listed with its address now, not at the next renewal.
    await heartbeat.beat(election.isLeader());
    const print = opts.print ?? ((line: string) => process.stderr.write(`${line}\n`));
    const configuredOperators = config.acp.operators.length;
    await showFirstSecrets({ mode, operators: storage.operators, configuredOperators, postbackKeys, print });
    scheduler.start();
    // Whom the node believes about a client (docs/deployment.md#behind-a-reverse-proxy): a proxy
    // among these that passes on a client's own country header lets the client pick its country.
    const { trusted_proxies, country_header } = config.app.server;
    logger.info(
      { trusted_proxies, country_header },
      'client address (X-Forwarded-For) and country header believed from these trusted proxies only',
    );
    const started = { url, mode, commit: build.commit, version: build.version, files: loaded.files };
    logger.info(started, 'sluice started');
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
      unwritten: () => unwritten(clickLog, ledger.counters),
      stop: () => stop.stop(),
    };
  } catch (err) {
    await stop.undo(err);
    throw err;
  }
}

/** What the routes are given: the node's parts, made once in {@link startNode}. */
interface RouteParts {
  config: Config;
  mode: string;
  clock: Clock;
  serverId: string;
  build: { commit: string; version: string | undefined };
  geo: GeoCountry | undefined;
  storage: Storage;
  election: LeaderElection;
  telemetry: Telemetry;
  redactor: Redactor;
  httpClient: HttpClient;
  routing: RoutingService;
  ledger: RoutingLedger;
  scheduler: Scheduler;
  clickDescriber: ClickDescriber;
  clickLog: ClickLog;
  postbackKeys: PostbackKeys;
  audit: AuditTrail;
  random: (() => number) | undefined;
}

/** Every route of the node: health, metrics, the ACP and its console, `/go`, `/postback`. */
function registerRoutes(app: FastifyInstance, p: RouteParts): AcpRouter {
  const { config, clock, storage, telemetry, routing, clickLog, httpClient, scheduler, election } = p;
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
  const authenticator = new Authenticator(config.acp.operators, storage.operators, clock);
  const acp = new AcpRouter(app, authenticator, { limiter: authLimiter, audit: p.audit });
  registerSystemRoutes(acp, { config, mode: p.mode, telemetry, redactor: p.redactor });
  const commit = p.build.commit;
  const fallbackUrl = config.routing.fallback_url;
  const simulator = {
    load: async (slug: string) => routing.cache.peek(slug) ?? (await routing.cache.load(slug)),
    describer: p.clickDescriber,
    clock,
    geo: p.geo,
    fallbackUrl,
  };
  registerRoutingRoutes(acp, { routing, telemetry, commit, simulate: (input) => simulate(simulator, input) });
  registerClickRoutes(acp, {
    clicks: storage.clicks,
    conversions: storage.conversions,
    pendingClick: (id) => clickLog.find(id),
    telemetry,
    commit,
  });
  registerReportRoutes(acp, {
    storage,
    clock,
    clickRetentionDays: config.clicks.retention_days,
    bounds: { timeoutMs: config.reports.query_timeout_ms, maxRows: config.reports.max_rows },
  });
  registerHttpClientRoutes(acp, httpClient);
  registerCronRoutes(acp, scheduler);
  const serverId = p.serverId;
  registerClusterRoutes(acp, { storage, election, serverId, cluster: config.cluster, telemetry, httpClient });
  const forget = (name: string) => authenticator.forget(name);
  registerOperatorRoutes(acp, new OperatorDirectory(config.acp.operators, storage.operators, forget));
  registerAuditRoutes(acp, storage.audit);
  registerPostbackRoutes(acp, p.postbackKeys);
  registerConsoleRoutes(acp, {
    telemetry,
    scheduler,
    httpClient,
    election,
    clock,
    commit,
    version: p.build.version,
    taskP95Ms: config.acp.task_p95_ms,
    clientErrorRate: config.acp.client_error_rate,
  });
  registerConsole(app);
  const goClicks = { describer: p.clickDescriber, log: clickLog, fallbackUrl };
  registerGoRoute(app, { cache: routing.cache, ledger: p.ledger }, goClicks, clock, p.random);
  registerPostbackRoute(app, {
    conversions: storage.conversions,
    pendingClick: (clickId) => clickLog.find(clickId),
    keys: p.postbackKeys,
    dialect: postbackDialect(config.postback),
    // Its own count: a network still sending an old key must not lock operators out of the ACP.
    limiter: new AuthLimiter(authLimits),
    recentClickWaitMs: clickWrites(config.cron.tasks, config.clicks.flush_interval_ms).waitMs,
    clock,
  });
  return acp;
}
