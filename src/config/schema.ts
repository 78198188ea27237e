import { type Static, type StringOptions, Type } from '@sinclair/typebox';

/**
 * The one place every configuration key and its default lives. `docs/configuration.md` lists the
 * same keys; `test/config/docs.test.ts` fails when the two drift apart.
 *
 * A schema node marked `secret: true` is redacted wherever configuration is shown
 * (`POST /acp/system/config`) and never logged; one marked `secret: 'url'` is a URL shown without
 * its credentials and secret query parameters. The rule is `Redactor` (redact.ts).
 */

const Milliseconds = (def: number, min = 1, max = 86_400_000) =>
  Type.Integer({ minimum: min, maximum: max, default: def, description: 'milliseconds' });

const Buckets = (def: number[]) =>
  Type.Array(Type.Number({ exclusiveMinimum: 0 }), {
    minItems: 1,
    maxItems: 64,
    default: def,
    description: 'strictly increasing upper bounds in milliseconds',
  });

const Sha256Hex = (opts: { secret?: boolean } = {}) =>
  Type.String({ pattern: '^[0-9a-fA-F]{64}$', description: 'hex SHA-256', ...opts });

/** The task p95 service level (ms) of operator procedure 3, when neither the console nor doctor names one. */
export const DEFAULT_TASK_P95_MS = 5000;
/** Procedure 5's client-error rate (share of a route's recent calls answered 4xx) that is a finding. */
export const DEFAULT_CLIENT_ERROR_RATE = 0.5;

/**
 * Text without control characters (Unicode Cc: U+0000–U+001F, U+007F–U+009F). PostgreSQL TEXT
 * cannot hold U+0000 where SQLite can, and no name, URL or filter needs a control character: every
 * string the ACP takes, and every configured string that is stored, is held to it, so such input
 * is a 400 naming the field on both backends instead of a 500 on one.
 */
export const TEXT_PATTERN = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';
export const Text = (opts: StringOptions = {}) => Type.String({ ...opts, pattern: TEXT_PATTERN });

/** Node ids travel in a response header, so they are held to the same alphabet as request ids. */
export const NODE_ID_PATTERN = '^[A-Za-z0-9._:-]{1,128}$';

/**
 * A task's name (`cron.tasks.<name>`): it stands in metric labels, log lines, the run journal and
 * `/acp/cron-tasks/run`. The loader holds names to it; the record's key pattern alone does not (a
 * key that does not match is left out of validation rather than refused).
 */
export const TASK_NAME_PATTERN = '^[A-Za-z0-9._-]{1,64}$';

export const ROLES = ['viewer', 'operator', 'admin'] as const;
/** The parameters of a postback (docs/clicks.md#postbacks) that `postback.aliases` may give other names. */
export const POSTBACK_PARAMS = ['click_id', 'status', 'payout', 'currency', 'txid', 'key'] as const;
/** The conversion statuses (docs/clicks.md#postbacks), which `postback.statuses` maps a network's values to. */
export const POSTBACK_STATUSES = ['lead', 'sale', 'rejected'] as const;
/** A parameter name or status value a network sends. */
const POSTBACK_NAME = '^[A-Za-z0-9_.-]{1,64}$';
/** An operator's name, configured (`acp.operators`) or stored (the CLI, the ACP): one alphabet. */
export const OPERATOR_NAME_PATTERN = '^[A-Za-z0-9._@-]{1,64}$';
export const TASK_KINDS = [
  'stats.flush',
  'cache.reload',
  'targets.check',
  'http.probe',
  'clicks.retention',
  'reports.retention',
  'clicks.flush',
] as const;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const strict = { additionalProperties: false, default: {} } as const;

export const CronTaskSchema = Type.Object(
  {
    kind: Type.Union(
      TASK_KINDS.map((k) => Type.Literal(k)),
      { description: TASK_KINDS.join(' | ') },
    ),
    schedule: Type.String({ minLength: 1, description: 'cron expression, 5 or 6 fields (seconds first)' }),
    execution_scope: Type.Optional(Type.Union([Type.Literal('leader'), Type.Literal('all')])),
    enabled: Type.Boolean({ default: true }),
    timeout_ms: Milliseconds(60_000),
    url: Type.Optional(Type.String({ minLength: 1, secret: 'url' })),
    method: Type.Optional(Type.String({ pattern: '^[A-Z]{3,10}$' })),
    expect_status: Type.Optional(Type.Integer({ minimum: 100, maximum: 599 })),
    retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
    headers: Type.Optional(Type.Record(Type.String(), Type.String(), { secret: true })),
  },
  { additionalProperties: false },
);

export const ConfigSchema = Type.Object(
  {
    app: Type.Object(
      {
        name: Type.String({ minLength: 1, default: 'sluice' }),
        // Both are stored in the node registry.
        version: Type.Optional(Text({ minLength: 1 })),
        commit: Type.Optional(Text({ minLength: 1 })),
        server: Type.Object(
          {
            id: Type.Optional(Type.String({ pattern: NODE_ID_PATTERN })),
            host: Type.String({ minLength: 1, default: '127.0.0.1' }),
            port: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
            trusted_proxies: Type.Array(Type.String({ minLength: 1 }), {
              default: ['127.0.0.1/32', '::1/128'],
              description: 'CIDR list',
            }),
            country_header: Type.String({ pattern: '^[A-Za-z0-9-]{1,64}$', default: 'cf-ipcountry' }),
            body_limit_bytes: Type.Integer({ minimum: 1024, maximum: 104_857_600, default: 1_048_576 }),
            shutdown_timeout_ms: Milliseconds(10_000, 0, 600_000),
          },
          strict,
        ),
      },
      strict,
    ),
    storage: Type.Object(
      {
        driver: Type.Union([Type.Literal('sqlite'), Type.Literal('postgres')], { default: 'sqlite' }),
        sqlite: Type.Object(
          {
            path: Type.String({ minLength: 1, default: './data/sluice.db' }),
            // The node's connection keeps this much of the file's pages in memory (SQLite's own
            // default is 2 MB): the click log's indexes take each batch at many places at once.
            cache_mb: Type.Integer({ minimum: 1, maximum: 65_536, default: 64 }),
          },
          strict,
        ),
        postgres: Type.Object(
          {
            url: Type.Optional(Type.String({ pattern: '^postgres(ql)?://', secret: true })),
            pool_max: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
            schema: Type.String({ pattern: '^[a-z_][a-z0-9_]{0,62}$', default: 'public' }),
            query_timeout_ms: Milliseconds(30_000, 100),
            // A node started with its database (compose, a reboot) may find it not yet listening.
            start_wait_ms: Milliseconds(30_000, 0),
          },
          strict,
        ),
      },
      strict,
    ),
    cluster: Type.Object(
      {
        leader_election: Type.Union([Type.Literal('local'), Type.Literal('postgres')], { default: 'local' }),
        lease_ttl_ms: Milliseconds(10_000, 100),
        renew_interval_ms: Milliseconds(3_000, 10),
        forget_after_ms: Milliseconds(86_400_000, 1000, 30 * 86_400_000),
        // Where the other nodes (and the doctor) reach this node's ACP; absent: its listen address
        // (the host name instead of 0.0.0.0 / ::). Set it when a proxy or NAT sits in between.
        advertise_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://' })),
      },
      strict,
    ),
    cache: Type.Object(
      {
        max_entries: Type.Integer({ minimum: 1, maximum: 10_000_000, default: 10_000 }),
        ttl_ms: Milliseconds(60_000),
      },
      strict,
    ),
    postback: Type.Object(
      {
        // Every postback must carry a key (docs/clicks.md#postback-keys): key_sha256's when set,
        // else one the first start makes and keeps (its hash) in the database. false: none needed.
        require_key: Type.Boolean({ default: true }),
        // After POST /acp/postback/rotate-key, the key it replaced is still accepted this long.
        key_grace_hours: Type.Integer({ minimum: 0, maximum: 720, default: 24 }),
        // Affiliate networks send the key in the query string: only its hash is configured.
        key_sha256: Type.Optional(Sha256Hex({ secret: true })),
        // The key being replaced, accepted beside key_sha256 until every network has the new one:
        // a network still on the old key would otherwise fail (and be locked out) after the restart.
        previous_key_sha256: Type.Optional(Sha256Hex({ secret: true })),
        // Networks name things their own way (Keitaro's `subid`, a `status=approved`): other
        // parameter names read as Sluice's own (docs/clicks.md#a-networks-own-words), and other status values read as lead, sale or rejected.
        // None by default: Sluice's own names and values only.
        aliases: Type.Record(
          Type.String({ pattern: POSTBACK_NAME }),
          Type.Union(POSTBACK_PARAMS.map((p) => Type.Literal(p))),
          { default: {} },
        ),
        statuses: Type.Record(
          Type.String({ pattern: POSTBACK_NAME }),
          Type.Union(POSTBACK_STATUSES.map((s) => Type.Literal(s))),
          { default: {} },
        ),
      },
      strict,
    ),
    reports: Type.Object(
      {
        // The hourly rollups reports read (docs/reports.md) are kept this long: longer than raw clicks
        // (clicks.retention_days), so a year's report by day and country still answers.
        retention_days: Type.Integer({ minimum: 1, maximum: 3650, default: 400 }),
        // The database's time for one report (docs/reports.md#bounds): past it the report is
        // refused; below storage.postgres.query_timeout_ms, so the server stops the work itself.
        query_timeout_ms: Milliseconds(20_000, 100, 600_000),
        // Rows one report answers at most, whatever its limit (the rest cut, `truncated: true`):
        // the node holds them while it answers (docs/reports.md#bounds).
        max_rows: Type.Integer({ minimum: 1000, maximum: 100_000, default: 10_000 }),
      },
      strict,
    ),
    clicks: Type.Object(
      {
        flush_interval_ms: Milliseconds(1000, 10, 60_000),
        retention_days: Type.Integer({ minimum: 1, maximum: 3650, default: 30 }),
        // About 290 bytes of heap a click (docs/clicks.md): 200,000 clicks are ~60 MB at most.
        buffer_max: Type.Integer({ minimum: 1000, maximum: 10_000_000, default: 200_000 }),
        // The visitor key's secret (docs/clicks.md#visitor-key, src/clicks/visitor-secret.ts), the same on every node;
        // absent: one made once and kept in the database.
        visitor_key_secret: Type.Optional(Type.String({ minLength: 16, maxLength: 1024, secret: true })),
      },
      strict,
    ),
    routing: Type.Object(
      {
        // What makes a click unique (docs/clicks.md#uniqueness); the structure behind it is src/clicks/uniqueness.ts.
        uniqueness_ttl_hours: Type.Integer({ minimum: 1, maximum: 720, default: 24 }),
        // ~60–80 bytes a (flow, visitor) pair held (docs/clicks.md): 1,000,000 ≈ 60–80 MB when full.
        uniqueness_max_entries: Type.Integer({ minimum: 1000, maximum: 100_000_000, default: 1_000_000 }),
        user_agent_cache_max: Type.Integer({ minimum: 100, maximum: 1_000_000, default: 10_000 }),
        // Country without a proxy (docs/routing.md#country): the database an npm package ships, or none. The trusted
        // proxy's header (app.server.country_header) always wins.
        geoip: Type.Union([Type.Literal('builtin'), Type.Literal('off')], { default: 'builtin' }),
        // Another MaxMind-format country database to use instead of the built-in one (optional).
        geoip_path: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
        // Where a visitor goes when no stream takes the click or the slug is unknown (docs/routing.md#fallback-url): a 302
        // there instead of a 404. Absolute http(s) URL; absent: 404 as before.
        fallback_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://' })),
      },
      strict,
    ),
    http_client: Type.Object(
      {
        timeout_ms: Milliseconds(10_000, 1, 600_000),
        total_timeout_ms: Milliseconds(30_000, 1, 3_600_000),
        retries: Type.Integer({ minimum: 0, maximum: 10, default: 0 }),
        backoff_ms: Milliseconds(100, 1, 60_000),
        max_backoff_ms: Milliseconds(5_000, 1, 600_000),
        capture_body_bytes: Type.Integer({ minimum: 0, maximum: 1_048_576, default: 2048 }),
        redact_headers: Type.Array(Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$" }), {
          default: [],
        }),
        // Beside these, a name containing token, secret, password, passwd, api_key, api-key,
        // apikey or signature is always secret (ALWAYS_SECRET_PARAM, redact.ts).
        secret_query_params: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
          default: [
            'token',
            'access_token',
            'key',
            'api_key',
            'apikey',
            'auth',
            'password',
            'secret',
            'signature',
            'sig',
            'pwd',
            'pass',
            'access_key',
            'private_key',
            'authorization',
            'jwt',
            'hmac',
          ],
        }),
        recent_failures: Type.Integer({ minimum: 0, maximum: 10_000, default: 50 }),
        propagate_request_id: Type.Boolean({ default: true }),
      },
      strict,
    ),
    acp: Type.Object(
      {
        operators: Type.Array(
          Type.Object(
            {
              name: Type.String({ pattern: OPERATOR_NAME_PATTERN }),
              role: Type.Union(ROLES.map((r) => Type.Literal(r))),
              token_sha256: Sha256Hex({ secret: true }),
            },
            { additionalProperties: false },
          ),
          { default: [] },
        ),
        task_p95_ms: Type.Integer({
          minimum: 1,
          maximum: 86_400_000,
          default: DEFAULT_TASK_P95_MS,
          description: 'agreed task p95 level (ms) the console checks procedure 3 against',
        }),
        client_error_rate: Type.Number({
          minimum: 0,
          maximum: 1,
          default: DEFAULT_CLIENT_ERROR_RATE,
          description: "share of a route's recent calls answered 4xx above which procedure 5 reports it",
        }),
        auth_rate_limit: Type.Object(
          {
            max_failures: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 20 }),
            window_ms: Milliseconds(60_000),
          },
          strict,
        ),
      },
      strict,
    ),
    observability: Type.Object(
      {
        metrics: Type.Object(
          {
            prometheus_enabled: Type.Boolean({ default: false }),
            prefix: Type.String({ pattern: '^[a-zA-Z_][a-zA-Z0-9_]{0,63}$', default: 'sluice' }),
            http_buckets_ms: Buckets([5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]),
            controller_buckets_ms: Buckets([
              0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
            ]),
            task_buckets_ms: Buckets([10, 50, 100, 500, 1000, 5000, 10000, 30000, 60000, 300000]),
            auth_token_sha256: Type.Optional(Sha256Hex({ secret: true })),
          },
          strict,
        ),
        logging: Type.Object(
          {
            level: Type.Union(
              LOG_LEVELS.map((l) => Type.Literal(l)),
              { default: 'info' },
            ),
          },
          strict,
        ),
      },
      strict,
    ),
    cron: Type.Object(
      {
        tasks: Type.Record(Type.String({ pattern: TASK_NAME_PATTERN }), CronTaskSchema, {
          default: {},
        }),
      },
      strict,
    ),
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;

/**
 * Tasks every node has unless its configuration changes them (they merge under `cron.tasks` like
 * any file, so `cron.tasks.stats_flush.enabled: false` turns one off). Counters are written with
 * their clicks by the click log; `stats_flush` reads the daily cap counts back, and turned off
 * leaves that to the routing ledger's own one-second timer (src/config/task-or-timer.ts).
 */
export const DEFAULT_TASKS = {
  stats_flush: { kind: 'stats.flush', schedule: '* * * * * *', timeout_ms: 30_000 },
  cache_reload: { kind: 'cache.reload', schedule: '*/30 * * * * *', timeout_ms: 30_000 },
  targets_check: { kind: 'targets.check', schedule: '0 */5 * * * *', timeout_ms: 120_000 },
  // Hourly, at a minute few other tasks pick; a run deletes in 2,000-row chunks and stops at its
  // timeout, the next run carrying on (a first run after months of clicks may need several).
  clicks_retention: { kind: 'clicks.retention', schedule: '0 17 * * * *', timeout_ms: 600_000 },
  // Daily: the hourly rollups age by the hour, a day late costs nothing.
  reports_retention: { kind: 'reports.retention', schedule: '0 23 3 * * *', timeout_ms: 600_000 },
} as const satisfies Record<string, Partial<Static<typeof CronTaskSchema>>>;
/**
 * What an `http.probe` task that does not say calls with (docs/cron.md#tasks). Filled in by the loader, so the
 * configuration view shows them as it shows `enabled` and `timeout_ms`; other kinds take none.
 */
export const PROBE_DEFAULTS = {
  method: 'GET',
  expect_status: 200,
  retries: 0,
  headers: {},
} as const satisfies Partial<Static<typeof CronTaskSchema>>;
export type Role = (typeof ROLES)[number];
export type CronTaskConfig = Static<typeof CronTaskSchema>;
/**
 * The `execution_scope` of a task that does not say, by kind (docs/cron.md#tasks); `http.probe` has none: its
 * configuration must say. Filled in by the loader, so the configuration view shows it.
 */
export const KIND_SCOPES: Record<CronTaskConfig['kind'], CronTaskConfig['execution_scope']> = {
  'stats.flush': 'all',
  'cache.reload': 'all',
  'targets.check': 'leader',
  'http.probe': undefined,
  'clicks.retention': 'leader',
  'reports.retention': 'leader',
  'clicks.flush': 'all',
};
