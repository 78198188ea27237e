/**
 * Versioned schema migrations, applied in order inside one transaction and recorded in
 * `schema_migrations`. A shipped migration is never edited: add a new version instead.
 * Each carries the SQL of both backends; the differences are types (TIMESTAMPTZ, BIGINT).
 */
export interface Migration {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'operators',
    sqlite: `
      CREATE TABLE operators (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
        token_sha256 TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
      CREATE UNIQUE INDEX operators_active_name ON operators (name) WHERE revoked_at IS NULL;
      CREATE UNIQUE INDEX operators_token ON operators (token_sha256);
    `,
    postgres: `
      CREATE TABLE operators (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
        token_sha256 TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        revoked_at TIMESTAMPTZ
      );
      CREATE UNIQUE INDEX operators_active_name ON operators (name) WHERE revoked_at IS NULL;
      CREATE UNIQUE INDEX operators_token ON operators (token_sha256);
    `,
  },
  {
    version: 2,
    name: 'traffic flows and streams',
    sqlite: `
      CREATE TABLE traffic_flows (
        id TEXT PRIMARY KEY,
        slug TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'paused')),
        rotation TEXT NOT NULL CHECK (rotation IN ('position', 'weight')),
        clicks INTEGER NOT NULL DEFAULT 0,
        no_match INTEGER NOT NULL DEFAULT 0,
        last_click_at TEXT,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE streams (
        id TEXT PRIMARY KEY,
        flow_id TEXT NOT NULL REFERENCES traffic_flows (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('forced', 'regular', 'default')),
        position INTEGER NOT NULL,
        weight INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'paused')),
        filters TEXT NOT NULL,
        target_url TEXT NOT NULL,
        redirect_code INTEGER NOT NULL,
        hits INTEGER NOT NULL DEFAULT 0,
        last_hit_at TEXT,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX streams_flow ON streams (flow_id, position);
    `,
    postgres: `
      CREATE TABLE traffic_flows (
        id TEXT PRIMARY KEY,
        slug TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'paused')),
        rotation TEXT NOT NULL CHECK (rotation IN ('position', 'weight')),
        clicks BIGINT NOT NULL DEFAULT 0,
        no_match BIGINT NOT NULL DEFAULT 0,
        last_click_at TIMESTAMPTZ,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL
      );
      CREATE TABLE streams (
        id TEXT PRIMARY KEY,
        flow_id TEXT NOT NULL REFERENCES traffic_flows (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('forced', 'regular', 'default')),
        position INTEGER NOT NULL,
        weight INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'paused')),
        filters TEXT NOT NULL,
        target_url TEXT NOT NULL,
        redirect_code INTEGER NOT NULL,
        hits BIGINT NOT NULL DEFAULT 0,
        last_hit_at TIMESTAMPTZ,
        version INTEGER NOT NULL DEFAULT 1,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL
      );
      CREATE INDEX streams_flow ON streams (flow_id, position);
    `,
  },
  {
    version: 3,
    name: 'stream target checks',
    sqlite: `
      ALTER TABLE streams ADD COLUMN target_status TEXT;
      ALTER TABLE streams ADD COLUMN target_checked_at TEXT;
      ALTER TABLE streams ADD COLUMN target_error TEXT;
    `,
    postgres: `
      ALTER TABLE streams ADD COLUMN target_status TEXT;
      ALTER TABLE streams ADD COLUMN target_checked_at TIMESTAMPTZ;
      ALTER TABLE streams ADD COLUMN target_error TEXT;
    `,
  },
  {
    version: 4,
    name: 'leader lease, node registry, task run journal',
    sqlite: `
      CREATE TABLE leader_lease (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE TABLE nodes (
        server_id TEXT PRIMARY KEY,
        started_at TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        version TEXT,
        commit_id TEXT NOT NULL,
        is_leader INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE task_runs (
        run_id TEXT PRIMARY KEY,
        task TEXT NOT NULL,
        server_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        error TEXT
      );
      CREATE INDEX task_runs_task ON task_runs (task, started_at);
    `,
    postgres: `
      CREATE TABLE leader_lease (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
      );
      CREATE TABLE nodes (
        server_id TEXT PRIMARY KEY,
        started_at TIMESTAMPTZ NOT NULL,
        last_seen TIMESTAMPTZ NOT NULL,
        version TEXT,
        commit_id TEXT NOT NULL,
        is_leader BOOLEAN NOT NULL DEFAULT FALSE
      );
      CREATE TABLE task_runs (
        run_id TEXT PRIMARY KEY,
        task TEXT NOT NULL,
        server_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        started_at TIMESTAMPTZ NOT NULL,
        finished_at TIMESTAMPTZ,
        error TEXT
      );
      CREATE INDEX task_runs_task ON task_runs (task, started_at);
    `,
  },
  {
    version: 5,
    name: 'click log, conversions, applied batch guard',
    // Ids are compared bytewise on both backends (COLLATE "C" on PostgreSQL, SQLite's BINARY), so
    // keyset pages break ties in one order whatever the database's default collation is.
    sqlite: `
      CREATE TABLE clicks (
        click_id TEXT PRIMARY KEY,
        flow_id TEXT NOT NULL,
        stream_id TEXT,
        created_at TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('redirect', 'no_match', 'bot')),
        country TEXT,
        device_type TEXT NOT NULL CHECK (device_type IN ('desktop', 'mobile', 'tablet', 'other')),
        os TEXT NOT NULL,
        browser TEXT NOT NULL,
        language TEXT,
        referrer_host TEXT,
        sub1 TEXT,
        sub2 TEXT,
        sub3 TEXT,
        sub4 TEXT,
        sub5 TEXT,
        sub6 TEXT,
        sub7 TEXT,
        sub8 TEXT,
        sub9 TEXT,
        sub10 TEXT,
        is_unique INTEGER NOT NULL,
        is_bot INTEGER NOT NULL,
        cost_micros INTEGER NOT NULL,
        ip_prefix TEXT,
        server_id TEXT
      );
      CREATE INDEX clicks_created ON clicks (created_at, click_id);
      CREATE INDEX clicks_flow ON clicks (flow_id, created_at, click_id);
      CREATE INDEX clicks_stream ON clicks (stream_id, created_at, click_id) WHERE stream_id IS NOT NULL;
      CREATE INDEX clicks_sub1 ON clicks (sub1, created_at, click_id) WHERE sub1 IS NOT NULL;
      CREATE TABLE conversions (
        id TEXT PRIMARY KEY,
        click_id TEXT NOT NULL,
        txid TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('lead', 'sale', 'rejected')),
        payout_micros INTEGER NOT NULL,
        currency TEXT NOT NULL,
        postbacks INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        click_created_at TEXT NOT NULL,
        flow_id TEXT NOT NULL,
        stream_id TEXT,
        outcome TEXT NOT NULL,
        country TEXT,
        device_type TEXT NOT NULL,
        os TEXT NOT NULL,
        browser TEXT NOT NULL,
        language TEXT,
        referrer_host TEXT,
        sub1 TEXT,
        sub2 TEXT,
        sub3 TEXT,
        sub4 TEXT,
        sub5 TEXT,
        sub6 TEXT,
        sub7 TEXT,
        sub8 TEXT,
        sub9 TEXT,
        sub10 TEXT,
        is_unique INTEGER NOT NULL,
        is_bot INTEGER NOT NULL
      );
      CREATE UNIQUE INDEX conversions_click_txid ON conversions (click_id, txid);
      CREATE INDEX conversions_created ON conversions (created_at, id);
      CREATE INDEX conversions_flow ON conversions (flow_id, created_at, id);
      CREATE INDEX conversions_stream ON conversions (stream_id, created_at, id) WHERE stream_id IS NOT NULL;
      CREATE TABLE applied_batches (
        batch_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        applied_at TEXT NOT NULL
      );
      CREATE INDEX applied_batches_at ON applied_batches (applied_at);
    `,
    postgres: `
      CREATE TABLE clicks (
        click_id TEXT COLLATE "C" PRIMARY KEY,
        flow_id TEXT NOT NULL,
        stream_id TEXT,
        created_at TIMESTAMPTZ NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('redirect', 'no_match', 'bot')),
        country TEXT,
        device_type TEXT NOT NULL CHECK (device_type IN ('desktop', 'mobile', 'tablet', 'other')),
        os TEXT NOT NULL,
        browser TEXT NOT NULL,
        language TEXT,
        referrer_host TEXT,
        sub1 TEXT,
        sub2 TEXT,
        sub3 TEXT,
        sub4 TEXT,
        sub5 TEXT,
        sub6 TEXT,
        sub7 TEXT,
        sub8 TEXT,
        sub9 TEXT,
        sub10 TEXT,
        is_unique BOOLEAN NOT NULL,
        is_bot BOOLEAN NOT NULL,
        cost_micros BIGINT NOT NULL,
        ip_prefix TEXT,
        server_id TEXT
      );
      CREATE INDEX clicks_created ON clicks (created_at, click_id);
      CREATE INDEX clicks_flow ON clicks (flow_id, created_at, click_id);
      CREATE INDEX clicks_stream ON clicks (stream_id, created_at, click_id) WHERE stream_id IS NOT NULL;
      CREATE INDEX clicks_sub1 ON clicks (sub1, created_at, click_id) WHERE sub1 IS NOT NULL;
      CREATE TABLE conversions (
        id TEXT COLLATE "C" PRIMARY KEY,
        click_id TEXT COLLATE "C" NOT NULL,
        txid TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('lead', 'sale', 'rejected')),
        payout_micros BIGINT NOT NULL,
        currency TEXT NOT NULL,
        postbacks INTEGER NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        click_created_at TIMESTAMPTZ NOT NULL,
        flow_id TEXT NOT NULL,
        stream_id TEXT,
        outcome TEXT NOT NULL,
        country TEXT,
        device_type TEXT NOT NULL,
        os TEXT NOT NULL,
        browser TEXT NOT NULL,
        language TEXT,
        referrer_host TEXT,
        sub1 TEXT,
        sub2 TEXT,
        sub3 TEXT,
        sub4 TEXT,
        sub5 TEXT,
        sub6 TEXT,
        sub7 TEXT,
        sub8 TEXT,
        sub9 TEXT,
        sub10 TEXT,
        is_unique BOOLEAN NOT NULL,
        is_bot BOOLEAN NOT NULL
      );
      CREATE UNIQUE INDEX conversions_click_txid ON conversions (click_id, txid);
      CREATE INDEX conversions_created ON conversions (created_at, id);
      CREATE INDEX conversions_flow ON conversions (flow_id, created_at, id);
      CREATE INDEX conversions_stream ON conversions (stream_id, created_at, id) WHERE stream_id IS NOT NULL;
      CREATE TABLE applied_batches (
        batch_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL
      );
      CREATE INDEX applied_batches_at ON applied_batches (applied_at);
    `,
  },
  {
    version: 6,
    name: 'totals kept by triggers; active streams by id',
    // The system metrics' totals were two COUNT(*)s over whole tables every 10 s (0.1-0.2 s of a
    // blocked event loop at 100k flows on SQLite); these rows hold them instead, kept by the
    // database itself so every writer (any node, the CLI, a script) keeps them right. Only rows
    // coming and going and status changes move them: a counter flush fires nothing. PostgreSQL
    // counts inserted and deleted rows once per statement (a bulk insert is one update of the
    // row, not one per row); SQLite has only row triggers, which update in place.
    // streams_status_id serves `targets.check`, which walks the active streams by id.
    sqlite: `
      CREATE INDEX streams_status_id ON streams (status, id);
      CREATE TABLE totals (
        name TEXT PRIMARY KEY,
        total INTEGER NOT NULL,
        active INTEGER NOT NULL
      );
      INSERT INTO totals (name, total, active)
        SELECT 'streams', COUNT(*), COALESCE(SUM(status = 'active'), 0) FROM streams;
      INSERT INTO totals (name, total, active)
        SELECT 'traffic_flows', COUNT(*), COALESCE(SUM(status = 'active'), 0) FROM traffic_flows;
      CREATE TRIGGER streams_totals_added AFTER INSERT ON streams BEGIN
        UPDATE totals SET total = total + 1, active = active + (NEW.status = 'active') WHERE name = 'streams';
      END;
      CREATE TRIGGER streams_totals_removed AFTER DELETE ON streams BEGIN
        UPDATE totals SET total = total - 1, active = active - (OLD.status = 'active') WHERE name = 'streams';
      END;
      CREATE TRIGGER streams_totals_status AFTER UPDATE OF status ON streams
        WHEN OLD.status IS NOT NEW.status BEGIN
        UPDATE totals SET active = active + (NEW.status = 'active') - (OLD.status = 'active') WHERE name = 'streams';
      END;
      CREATE TRIGGER flows_totals_added AFTER INSERT ON traffic_flows BEGIN
        UPDATE totals SET total = total + 1, active = active + (NEW.status = 'active') WHERE name = 'traffic_flows';
      END;
      CREATE TRIGGER flows_totals_removed AFTER DELETE ON traffic_flows BEGIN
        UPDATE totals SET total = total - 1, active = active - (OLD.status = 'active') WHERE name = 'traffic_flows';
      END;
      CREATE TRIGGER flows_totals_status AFTER UPDATE OF status ON traffic_flows
        WHEN OLD.status IS NOT NEW.status BEGIN
        UPDATE totals SET active = active + (NEW.status = 'active') - (OLD.status = 'active') WHERE name = 'traffic_flows';
      END;
    `,
    postgres: `
      CREATE INDEX streams_status_id ON streams (status, id);
      CREATE TABLE totals (
        name TEXT PRIMARY KEY,
        total BIGINT NOT NULL,
        active BIGINT NOT NULL
      );
      INSERT INTO totals (name, total, active)
        SELECT 'streams', COUNT(*), COUNT(*) FILTER (WHERE status = 'active') FROM streams;
      INSERT INTO totals (name, total, active)
        SELECT 'traffic_flows', COUNT(*), COUNT(*) FILTER (WHERE status = 'active') FROM traffic_flows;
      CREATE FUNCTION totals_added() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE totals SET total = total + d.n, active = active + d.a
          FROM (SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE status = 'active') AS a FROM added) AS d
          WHERE name = TG_TABLE_NAME AND d.n > 0;
        RETURN NULL;
      END $$;
      CREATE FUNCTION totals_removed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE totals SET total = total - d.n, active = active - d.a
          FROM (SELECT COUNT(*) AS n, COUNT(*) FILTER (WHERE status = 'active') AS a FROM removed) AS d
          WHERE name = TG_TABLE_NAME AND d.n > 0;
        RETURN NULL;
      END $$;
      CREATE FUNCTION totals_status() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE totals SET active = active + CASE WHEN NEW.status = 'active' THEN 1 ELSE -1 END
          WHERE name = TG_TABLE_NAME;
        RETURN NULL;
      END $$;
      CREATE TRIGGER streams_totals_added AFTER INSERT ON streams
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION totals_added();
      CREATE TRIGGER streams_totals_removed AFTER DELETE ON streams
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION totals_removed();
      CREATE TRIGGER streams_totals_status AFTER UPDATE OF status ON streams
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION totals_status();
      CREATE TRIGGER flows_totals_added AFTER INSERT ON traffic_flows
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION totals_added();
      CREATE TRIGGER flows_totals_removed AFTER DELETE ON traffic_flows
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION totals_removed();
      CREATE TRIGGER flows_totals_status AFTER UPDATE OF status ON traffic_flows
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION totals_status();
    `,
  },
  {
    version: 7,
    name: 'conversion sums per flow and stream from the index alone',
    // The flows and streams lists sum each page's conversions by currency (ConversionStore.sumsBy).
    // Through conversions_flow (flow_id, created_at, id) every conversion summed was a table row
    // read: 50 flows of 1,000 conversions each cost ~0.16 s on SQLite, ~0.5 s on PostgreSQL. These
    // hold every column the sum reads, so it is an index-only range per id.
    sqlite: `
      CREATE INDEX conversions_flow_sums ON conversions (flow_id, currency, status, payout_micros);
      CREATE INDEX conversions_stream_sums ON conversions (stream_id, currency, status, payout_micros);
    `,
    postgres: `
      CREATE INDEX conversions_flow_sums ON conversions (flow_id, currency, status, payout_micros);
      CREATE INDEX conversions_stream_sums ON conversions (stream_id, currency, status, payout_micros);
    `,
  },
  {
    version: 8,
    name: 'audit log',
    // Who changed what over the ACP (docs/audit.md). Newest-first keyset pages on (created_at, id),
    // alone or after an equality filter on operator, action or target; retention deletes by
    // created_at.
    sqlite: `
      CREATE TABLE audit_log (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        operator TEXT NOT NULL,
        action TEXT NOT NULL,
        target_type TEXT NOT NULL,
        target_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        server_id TEXT NOT NULL
      );
      CREATE INDEX audit_log_created ON audit_log (created_at, id);
      CREATE INDEX audit_log_operator ON audit_log (operator, created_at, id);
      CREATE INDEX audit_log_action ON audit_log (action, created_at, id);
      CREATE INDEX audit_log_target ON audit_log (target_type, target_id, created_at, id);
    `,
    postgres: `
      CREATE TABLE audit_log (
        id TEXT COLLATE "C" PRIMARY KEY,
        created_at TIMESTAMPTZ NOT NULL,
        operator TEXT NOT NULL,
        action TEXT NOT NULL,
        target_type TEXT NOT NULL,
        target_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        server_id TEXT NOT NULL
      );
      CREATE INDEX audit_log_created ON audit_log (created_at, id);
      CREATE INDEX audit_log_operator ON audit_log (operator, created_at, id);
      CREATE INDEX audit_log_action ON audit_log (action, created_at, id);
      CREATE INDEX audit_log_target ON audit_log (target_type, target_id, created_at, id);
    `,
  },
  {
    version: 9,
    name: 'bots and uniques counted; flow forward_query',
    // Counters as the click counters flush them (#14): bots apart from clicks, uniques among the
    // redirected clicks. forward_query is a routing option of the flow
    // (docs/routing.md#forward_query), off by default.
    sqlite: `
      ALTER TABLE traffic_flows ADD COLUMN bots INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE traffic_flows ADD COLUMN uniques INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE traffic_flows ADD COLUMN forward_query INTEGER NOT NULL DEFAULT 0 CHECK (forward_query IN (0, 1));
      ALTER TABLE streams ADD COLUMN uniques INTEGER NOT NULL DEFAULT 0;
    `,
    postgres: `
      ALTER TABLE traffic_flows ADD COLUMN bots BIGINT NOT NULL DEFAULT 0;
      ALTER TABLE traffic_flows ADD COLUMN uniques BIGINT NOT NULL DEFAULT 0;
      ALTER TABLE traffic_flows ADD COLUMN forward_query BOOLEAN NOT NULL DEFAULT FALSE;
      ALTER TABLE streams ADD COLUMN uniques BIGINT NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 10,
    name: 'uniqueness sightings shared between nodes',
    // First sightings of (flow, visitor) pairs, so nodes sharing PostgreSQL agree on uniques
    // (src/clicks/uniqueness-exchange.ts). Readers follow `seq`: writers take a table lock that
    // only writers of this table conflict with, so rows commit in `seq` order (the identity keeps
    // its default CACHE 1) and a reader that has seen a seq has seen every smaller one. SQLite has
    // one writer at a time anyway.
    sqlite: `
      CREATE TABLE click_sightings (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        flow_id TEXT NOT NULL,
        visitor_key INTEGER NOT NULL,
        first_seen_at TEXT NOT NULL,
        server_id TEXT NOT NULL
      );
      CREATE INDEX click_sightings_seen ON click_sightings (first_seen_at);
    `,
    postgres: `
      CREATE TABLE click_sightings (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        flow_id TEXT COLLATE "C" NOT NULL,
        visitor_key BIGINT NOT NULL,
        first_seen_at TIMESTAMPTZ NOT NULL,
        server_id TEXT NOT NULL
      );
      CREATE INDEX click_sightings_seen ON click_sightings (first_seen_at);
    `,
  },
  {
    version: 11,
    name: 'targeting: bot action, time zone and cost of a flow; redirect mode of a stream',
    // Targeting (docs/routing.md#rules). Rules live in the streams' filters JSON (no column). Cost
    // per click in micro-units like every amount (src/storage/money.ts).
    sqlite: `
      ALTER TABLE traffic_flows ADD COLUMN bot_action TEXT NOT NULL DEFAULT 'route' CHECK (bot_action IN ('route', 'block', 'stream'));
      ALTER TABLE traffic_flows ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';
      ALTER TABLE traffic_flows ADD COLUMN cost_per_click_micros INTEGER NOT NULL DEFAULT 0 CHECK (cost_per_click_micros >= 0);
      ALTER TABLE traffic_flows ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
      ALTER TABLE streams ADD COLUMN redirect_mode TEXT NOT NULL DEFAULT 'http' CHECK (redirect_mode IN ('http', 'meta_refresh', 'js'));
    `,
    postgres: `
      ALTER TABLE traffic_flows ADD COLUMN bot_action TEXT NOT NULL DEFAULT 'route' CHECK (bot_action IN ('route', 'block', 'stream'));
      ALTER TABLE traffic_flows ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';
      ALTER TABLE traffic_flows ADD COLUMN cost_per_click_micros BIGINT NOT NULL DEFAULT 0 CHECK (cost_per_click_micros >= 0);
      ALTER TABLE traffic_flows ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD';
      ALTER TABLE streams ADD COLUMN redirect_mode TEXT NOT NULL DEFAULT 'http' CHECK (redirect_mode IN ('http', 'meta_refresh', 'js'));
    `,
  },
  {
    version: 12,
    name: 'stream daily caps',
    // `daily_cap` clicks per day in the flow's time zone (0: none). stream_days holds the
    // clicks per stream per local day, added to by every node's counter batch (idempotent with
    // it) and read back after each flush, so nodes sharing the database see each other's counts
    // within a flush interval. Rows of past days are not needed after the day; they are small.
    sqlite: `
      ALTER TABLE streams ADD COLUMN daily_cap INTEGER NOT NULL DEFAULT 0 CHECK (daily_cap >= 0);
      CREATE TABLE stream_days (
        stream_id TEXT NOT NULL,
        day TEXT NOT NULL,
        clicks INTEGER NOT NULL,
        PRIMARY KEY (stream_id, day)
      );
    `,
    postgres: `
      ALTER TABLE streams ADD COLUMN daily_cap INTEGER NOT NULL DEFAULT 0 CHECK (daily_cap >= 0);
      CREATE TABLE stream_days (
        stream_id TEXT NOT NULL,
        day TEXT NOT NULL,
        clicks BIGINT NOT NULL,
        PRIMARY KEY (stream_id, day)
      );
    `,
  },
  {
    version: 13,
    name: 'the address each node advertises to its peers',
    // #13: a node's ACP can show every node's figures and the doctor can reach the whole cluster
    // from one URL; each node writes where it can be reached with its heartbeat (null: unknown).
    sqlite: `ALTER TABLE nodes ADD COLUMN url TEXT;`,
    postgres: `ALTER TABLE nodes ADD COLUMN url TEXT;`,
  },
  {
    version: 14,
    name: 'hourly click rollups for reports',
    // Reports at scale: clicks summed per UTC hour × flow × stream × country × device × os ×
    // browser × language × outcome, added to in the same transaction as each click batch (so
    // idempotent with it) and kept `reports.retention_days`, longer than raw clicks. Reports that
    // group by none of the sub-ids read these instead of scanning the click log. '' stands for
    // "none" in the key (a primary key column cannot be NULL on PostgreSQL). Existing clicks are
    // summed in here once.
    sqlite: `
      CREATE TABLE report_hours (
        hour TEXT NOT NULL,
        flow_id TEXT NOT NULL,
        stream_id TEXT NOT NULL,
        country TEXT NOT NULL,
        device_type TEXT NOT NULL,
        os TEXT NOT NULL,
        browser TEXT NOT NULL,
        language TEXT NOT NULL,
        outcome TEXT NOT NULL,
        clicks INTEGER NOT NULL,
        uniques INTEGER NOT NULL,
        bots INTEGER NOT NULL,
        no_match INTEGER NOT NULL,
        cost_micros INTEGER NOT NULL,
        PRIMARY KEY (hour, flow_id, stream_id, country, device_type, os, browser, language, outcome)
      );
      INSERT INTO report_hours
        SELECT substr(created_at, 1, 13) || ':00:00.000Z', flow_id, COALESCE(stream_id, ''), COALESCE(country, ''),
          device_type, os, browser, COALESCE(language, ''), outcome,
          SUM(CASE WHEN outcome = 'redirect' THEN 1 ELSE 0 END),
          SUM(CASE WHEN outcome = 'redirect' AND is_unique THEN 1 ELSE 0 END),
          SUM(CASE WHEN outcome = 'bot' THEN 1 ELSE 0 END),
          SUM(CASE WHEN outcome = 'no_match' THEN 1 ELSE 0 END),
          SUM(cost_micros)
        FROM clicks
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9;
    `,
    postgres: `
      CREATE TABLE report_hours (
        hour TIMESTAMPTZ NOT NULL,
        flow_id TEXT NOT NULL,
        stream_id TEXT NOT NULL,
        country TEXT NOT NULL,
        device_type TEXT NOT NULL,
        os TEXT NOT NULL,
        browser TEXT NOT NULL,
        language TEXT NOT NULL,
        outcome TEXT NOT NULL,
        clicks BIGINT NOT NULL,
        uniques BIGINT NOT NULL,
        bots BIGINT NOT NULL,
        no_match BIGINT NOT NULL,
        cost_micros BIGINT NOT NULL,
        PRIMARY KEY (hour, flow_id, stream_id, country, device_type, os, browser, language, outcome)
      );
      INSERT INTO report_hours
        SELECT date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', flow_id, COALESCE(stream_id, ''), COALESCE(country, ''),
          device_type, os, browser, COALESCE(language, ''), outcome,
          SUM(CASE WHEN outcome = 'redirect' THEN 1 ELSE 0 END),
          SUM(CASE WHEN outcome = 'redirect' AND is_unique THEN 1 ELSE 0 END),
          SUM(CASE WHEN outcome = 'bot' THEN 1 ELSE 0 END),
          SUM(CASE WHEN outcome = 'no_match' THEN 1 ELSE 0 END),
          SUM(cost_micros)
        FROM clicks
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9;
    `,
  },
  {
    version: 15,
    name: 'the click log without its stream index',
    // An index keyed by anything but time takes each batch's clicks at as many places in the index
    // as the batch has distinct keys: with 10,000 streams a 10,000-click batch touched ~10,000 leaf
    // pages of clicks_stream, and once a log of millions of clicks no longer fit the page cache each
    // was a page read and a page written. At 2 million clicks that index alone cost 15–26 µs of
    // CPU a click on SQLite (docs/clicks.md#indexes). A stream belongs to one flow for good, so the
    // list filtered by stream walks clicks_flow with the stream's flow.
    sqlite: `DROP INDEX IF EXISTS clicks_stream;`,
    postgres: `DROP INDEX IF EXISTS clicks_stream;`,
  },
  {
    version: 16,
    name: 'the currency of deleted flows',
    // A click's money is in its flow's currency, read from the flow's row; a deleted flow's clicks
    // and rollups stay (retention), so its currency is kept here when it goes, for reports'
    // `filter.currency` and their check that money is in one currency. Flows deleted before this
    // version are not known: their clicks are in no currency-narrowed report.
    sqlite: `CREATE TABLE deleted_flows (id TEXT PRIMARY KEY, currency TEXT NOT NULL);`,
    postgres: `CREATE TABLE deleted_flows (id TEXT COLLATE "C" PRIMARY KEY, currency TEXT NOT NULL);`,
  },
  {
    version: 17,
    name: 'deployment secrets',
    // Secrets every node sharing the database must agree on and no configuration gave: the
    // visitor key's (src/clicks/visitor-secret.ts). Made by the first node that needs one.
    sqlite: `CREATE TABLE deployment_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, created_at TEXT NOT NULL);`,
    postgres: `CREATE TABLE deployment_secrets (name TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL);`,
  },
  {
    version: 18,
    name: 'names and ids of flows, streams, the audit log and the cluster compared bytewise',
    // Migration 5's rule, for the text columns the other lists sort, page or filter on: with the
    // database's default collation PostgreSQL ordered names as its locale does (en_US: "eclair,
    // Ecĺair, Éclair, Euro flow, same, Same") where SQLite orders bytes ("Ecĺair, Euro flow, Same,
    // eclair, same, Éclair"), so the two answered `sort.by: name|slug` and its cursors differently.
    // Only the collation changes: no table is rewritten, the indexes on these columns are rebuilt.
    // Equality alone is bytewise under any deterministic collation, so these keep theirs: `status`
    // and `type` (fixed ASCII values; the totals triggers name `status`) and the click log's and
    // conversions' filters (changing them would rebuild the largest tables' indexes for nothing).
    // SQLite's columns are BINARY already.
    sqlite: 'SELECT 1;',
    postgres: `
      ALTER TABLE traffic_flows
        ALTER COLUMN id TYPE TEXT COLLATE "C",
        ALTER COLUMN slug TYPE TEXT COLLATE "C",
        ALTER COLUMN name TYPE TEXT COLLATE "C";
      ALTER TABLE streams
        ALTER COLUMN id TYPE TEXT COLLATE "C",
        ALTER COLUMN flow_id TYPE TEXT COLLATE "C",
        ALTER COLUMN name TYPE TEXT COLLATE "C";
      ALTER TABLE audit_log
        ALTER COLUMN operator TYPE TEXT COLLATE "C",
        ALTER COLUMN action TYPE TEXT COLLATE "C",
        ALTER COLUMN target_type TYPE TEXT COLLATE "C",
        ALTER COLUMN target_id TYPE TEXT COLLATE "C";
      ALTER TABLE nodes ALTER COLUMN server_id TYPE TEXT COLLATE "C";
      ALTER TABLE task_runs
        ALTER COLUMN run_id TYPE TEXT COLLATE "C",
        ALTER COLUMN task TYPE TEXT COLLATE "C";
    `,
  },
];
