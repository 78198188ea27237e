import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError, loadConfig, REDACTED, Redactor, redactConfig } from '../../src/config/index.ts';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function configDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cfg-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
const load = (files: Record<string, string>, env: NodeJS.ProcessEnv = {}, mode = 'm') =>
  loadConfig({ configDir: configDir(files), mode, env });

describe('configuration loader', () => {
  test('defaults come from the schema (docs/configuration.md#keys)', () => {
    const { config } = load({ 'config.m.yml': '' });
    assert.equal(config.app.name, 'sluice');
    assert.equal(config.app.server.port, 8080);
    assert.equal(config.app.server.country_header, 'cf-ipcountry');
    assert.deepEqual(config.app.server.trusted_proxies, ['127.0.0.1/32', '::1/128']);
    assert.equal(config.storage.driver, 'sqlite');
    assert.equal(config.cluster.lease_ttl_ms, 10_000);
    assert.equal(config.cluster.forget_after_ms, 86_400_000);
    assert.equal(config.cache.max_entries, 10_000);
    assert.equal(config.observability.metrics.prometheus_enabled, false);
    assert.equal(config.observability.metrics.prefix, 'sluice');
    assert.deepEqual(
      config.observability.metrics.http_buckets_ms,
      [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000],
    );
    assert.deepEqual(Object.keys(config.cron.tasks).sort(), [
      'cache_reload',
      'clicks_retention',
      'reports_retention',
      'stats_flush',
      'targets_check',
    ]);
    assert.equal(config.cron.tasks.stats_flush?.enabled, true);
  });

  test('task names of the whole alphabet start', () => {
    const name = `Az09._-${'x'.repeat(57)}`;
    const { config } = load({
      'config.m.yml': `cron:\n  tasks:\n    ${name}:\n      kind: cache.reload\n      schedule: '* * * * *'\n`,
    });
    assert.equal(config.cron.tasks[name]?.kind, 'cache.reload');
  });

  test('the mode file merges over the base: mappings key by key, lists replace', () => {
    const { config, files } = load({
      'config.yml':
        'app:\n  name: base\n  server:\n    port: 1000\n    trusted_proxies: [10.0.0.0/8, 192.168.0.0/16]\n',
      'config.m.yml': 'app:\n  server:\n    port: 2000\n    trusted_proxies: [172.16.0.0/12]\n',
    });
    assert.equal(config.app.name, 'base');
    assert.equal(config.app.server.port, 2000);
    assert.deepEqual(config.app.server.trusted_proxies, ['172.16.0.0/12']);
    assert.equal(files.length, 2);
  });

  test('APP__A__B overrides are YAML scalars and win over files; APP_VERSION and APP_COMMIT fill in', () => {
    const { config } = load(
      { 'config.m.yml': 'app:\n  server:\n    port: 2000\n' },
      {
        APP__APP__SERVER__PORT: '3000',
        APP__OBSERVABILITY__METRICS__PROMETHEUS_ENABLED: 'true',
        APP__OBSERVABILITY__METRICS__HTTP_BUCKETS_MS: '[1, 2, 3]',
        APP__CRON__TASKS__STATS_FLUSH__ENABLED: 'false',
        APP_VERSION: '9.9.9',
        APP_COMMIT: 'feed',
      },
    );
    assert.equal(config.app.server.port, 3000);
    assert.equal(config.observability.metrics.prometheus_enabled, true);
    assert.deepEqual(config.observability.metrics.http_buckets_ms, [1, 2, 3]);
    assert.equal(config.cron.tasks.stats_flush?.enabled, false);
    assert.equal(config.app.version, '9.9.9');
    assert.equal(config.app.commit, 'feed');
  });

  test("an http.probe task's method, expect_status, retries and headers are filled in when not set, as enabled and timeout_ms are; other kinds get none (a contract audit)", () => {
    const { config } = load({
      'config.m.yml': [
        'cron:',
        '  tasks:',
        "    p: { kind: http.probe, schedule: '* * * * *', execution_scope: all, url: 'http://x.test/' }",
        "    q: { kind: http.probe, schedule: '* * * * *', execution_scope: leader, url: 'http://x.test/', method: HEAD, expect_status: 204, retries: 2 }",
        "    f: { kind: stats.flush, schedule: '* * * * *' }",
        '',
      ].join('\n'),
    });
    const shown = redactConfig(config).cron.tasks;
    assert.deepEqual(shown.p, {
      kind: 'http.probe',
      schedule: '* * * * *',
      execution_scope: 'all',
      url: 'http://x.test/',
      enabled: true,
      timeout_ms: 60_000,
      method: 'GET',
      expect_status: 200,
      retries: 0,
      headers: {},
    });
    assert.equal(shown.q?.method, 'HEAD');
    assert.equal(shown.q?.expect_status, 204);
    assert.equal(shown.q?.retries, 2);
    // Every task's execution_scope too: its kind's when the file says none (a security review
    // saw the built-in tasks' missing from the view).
    assert.deepEqual(shown.f, {
      kind: 'stats.flush',
      schedule: '* * * * *',
      enabled: true,
      timeout_ms: 60_000,
      execution_scope: 'all',
    });
    assert.deepEqual(shown.stats_flush, {
      kind: 'stats.flush',
      schedule: '* * * * * *',
      enabled: true,
      timeout_ms: 30_000,
      execution_scope: 'all',
    });
    assert.equal(shown.targets_check?.execution_scope, 'leader');
    assert.equal(shown.clicks_retention?.execution_scope, 'leader');
  });

  const refused: [string, Record<string, string>, NodeJS.ProcessEnv, RegExp][] = [
    [
      "a postback alias named like one of the standard parameters (it would reread every network's)",
      { 'config.m.yml': 'postback:\n  aliases: { click_id: txid }\n' },
      {},
      /^config: postback\.aliases\.click_id in .*: click_id is a postback parameter of its own/,
    ],
    [
      'a postback status value that is a standard one',
      { 'config.m.yml': 'postback:\n  statuses: { Sale: rejected }\n' },
      {},
      /^config: postback\.statuses\.Sale in .*: sale is a status of its own/,
    ],
    [
      'two postback status values that differ only in case',
      { 'config.m.yml': 'postback:\n  statuses: { Approved: sale, approved: rejected }\n' },
      {},
      /^config: postback\.statuses\.approved in .*: the same value as Approved/,
    ],
    [
      'a postback status mapped outside lead, sale and rejected',
      { 'config.m.yml': 'postback:\n  statuses: { approved: paid }\n' },
      {},
      /^config: postback\.statuses\.approved in /,
    ],
    [
      'a visitor-key secret too short, said as the length rule it breaks (not "non-empty")',
      { 'config.m.yml': 'clicks:\n  visitor_key_secret: ZZshort7\n' },
      {},
      /^config: clicks\.visitor_key_secret in .*: expected a string of 16 to 1024 characters, got a value not shown \(secret\)$/,
    ],
    [
      'a URL too long, said as its length rule, the value cut',
      { 'config.m.yml': `routing:\n  fallback_url: https://x.test/${'a'.repeat(2100)}\n` },
      {},
      /^config: routing\.fallback_url in .*: expected a string of 1 to 2048 characters matching \/\^https\?:\/\/\/, got "https:\/\/x\.test\/a+"… \(2115 characters\)$/,
    ],
    [
      'an unknown key',
      { 'config.m.yml': 'cache:\n  size: 1\n' },
      {},
      /^config: cache\.size in .*config\.m\.yml: unknown key/,
    ],
    [
      'a wrong type',
      { 'config.m.yml': 'cache:\n  ttl_ms: soon\n' },
      {},
      /cache\.ttl_ms .*expected an integer/,
    ],
    [
      'an out-of-range port',
      { 'config.m.yml': 'app:\n  server:\n    port: 70000\n' },
      {},
      /from 0 to 65535, got 70000/,
    ],
    [
      'non-increasing buckets',
      { 'config.m.yml': 'observability:\n  metrics:\n    task_buckets_ms: [5, 5]\n' },
      {},
      /strictly increasing/,
    ],
    [
      'a bad CIDR',
      { 'config.m.yml': 'app:\n  server:\n    trusted_proxies: [10.0.0.0/33]\n' },
      {},
      /trusted_proxies\.0 .*CIDR/,
    ],
    [
      'renew ≥ ttl',
      { 'config.m.yml': 'cluster:\n  renew_interval_ms: 10000\n' },
      {},
      /renew_interval_ms .*less than cluster\.lease_ttl_ms \(10000, the default\)$/,
    ],
    [
      'a node forgotten before it counts as not alive',
      { 'config.m.yml': 'cluster:\n  forget_after_ms: 9000\n' },
      {},
      /cluster\.forget_after_ms .*more than three cluster\.renew_interval_ms \(3 × 3000, the default\)$/,
    ],
    [
      'a lease shorter than the default renewal, set by the environment',
      { 'config.m.yml': '' },
      { APP__CLUSTER__LEASE_TTL_MS: '1000' },
      /^config: cluster\.lease_ttl_ms in environment variable APP__CLUSTER__LEASE_TTL_MS: expected more than cluster\.renew_interval_ms \(\d+, the default\)$/,
    ],
    [
      'a renewal too long for the default forget_after_ms',
      { 'config.m.yml': 'cluster:\n  lease_ttl_ms: 86400000\n  renew_interval_ms: 30000000\n' },
      {},
      /^config: cluster\.renew_interval_ms in .*config\.m\.yml: expected less than a third of cluster\.forget_after_ms \(86400000, the default\)$/,
    ],
    [
      'renew ≥ ttl, each set in another place: both named',
      { 'config.m.yml': 'cluster:\n  renew_interval_ms: 2000\n' },
      { APP__CLUSTER__LEASE_TTL_MS: '1500' },
      /^config: cluster\.renew_interval_ms in .*config\.m\.yml: expected less than cluster\.lease_ttl_ms \(1500, from environment variable APP__CLUSTER__LEASE_TTL_MS\)$/,
    ],
    [
      'a string that starts with NUL, quoted as JSON',
      { 'config.m.yml': 'app:\n  server:\n    trusted_proxies: ["\\0.inf"]\n' },
      {},
      /trusted_proxies\.0 .*got "\\u0000\.inf"$/,
    ],
    [
      'an infinite bucket bound, named as YAML spells it',
      { 'config.m.yml': 'observability:\n  metrics:\n    http_buckets_ms: [5, .inf]\n' },
      {},
      /http_buckets_ms\.1 .*got \.inf, not a finite number$/,
    ],
    [
      'postgres without url',
      { 'config.m.yml': 'storage:\n  driver: postgres\n' },
      {},
      /storage\.postgres\.url .*required/,
    ],
    [
      'postgres election on sqlite',
      { 'config.m.yml': 'cluster:\n  leader_election: postgres\n' },
      {},
      /cluster\.leader_election .*storage\.driver postgres/,
    ],
    ['invalid YAML', { 'config.m.yml': 'a: [\n' }, {}, /invalid YAML/],
    ['a list at the top', { 'config.m.yml': '- 1\n' }, {}, /mapping at the top level/],
    ['a __proto__ key', { 'config.m.yml': '__proto__:\n  polluted: 1\n' }, {}, /reserved key name/],
    [
      'a bad schedule',
      { 'config.m.yml': "cron:\n  tasks:\n    t:\n      kind: cache.reload\n      schedule: '* * *'\n" },
      {},
      /cron\.tasks\.t\.schedule .*5 fields/,
    ],
    [
      'a probe without url',
      {
        'config.m.yml':
          "cron:\n  tasks:\n    p:\n      kind: http.probe\n      schedule: '* * * * *'\n      execution_scope: all\n",
      },
      {},
      /cron\.tasks\.p\.url .*required/,
    ],
    [
      'a clicks.flush task on the leader only (the other nodes would never write their clicks)',
      {
        'config.m.yml':
          "cron:\n  tasks:\n    w:\n      kind: clicks.flush\n      schedule: '* * * * * *'\n      execution_scope: leader\n",
      },
      {},
      /cron\.tasks\.w\.execution_scope .*clicks\.flush runs on every node/,
    ],
    [
      'a probe option on another kind (it would be ignored)',
      {
        'config.m.yml':
          "cron:\n  tasks:\n    t:\n      kind: stats.flush\n      schedule: '* * * * *'\n      url: http://x.test/\n",
      },
      {},
      /cron\.tasks\.t\.url .*unknown key for kind stats\.flush/,
    ],
    [
      'retries on targets_check (a built-in task merged with the file)',
      { 'config.m.yml': 'cron:\n  tasks:\n    targets_check:\n      retries: 2\n' },
      {},
      /cron\.tasks\.targets_check\.retries .*unknown key for kind targets\.check/,
    ],
    [
      'U+0000 in app.version (it is stored, and PostgreSQL cannot store it)',
      { 'config.m.yml': 'app:\n  version: "1.0\\0"\n' },
      {},
      /app\.version .*expected a string matching/,
    ],
    [
      'a task name with a space (docs/configuration.md: [A-Za-z0-9._-]{1,64}; a contract audit)',
      {
        'config.m.yml': "cron:\n  tasks:\n    a b:\n      kind: cache.reload\n      schedule: '* * * * *'\n",
      },
      {},
      /^config: cron\.tasks\."a b" in .*config\.m\.yml: invalid task name; expected 1 to 64 of A-Z a-z 0-9 \. _ - \(\^\[A-Za-z0-9\._-\]\{1,64\}\$\)$/,
    ],
    [
      'a task name with quotes and braces',
      {
        'config.m.yml':
          "cron:\n  tasks:\n    'we\"ird{x}':\n      kind: cache.reload\n      schedule: '* * * * *'\n",
      },
      {},
      /^config: cron\.tasks\."we\\"ird\{x\}" in .*: invalid task name/,
    ],
    [
      'a task name of 65 characters, its task otherwise wrong too (the name is named first)',
      { 'config.m.yml': `cron:\n  tasks:\n    ${'t'.repeat(65)}:\n      kind: nope\n` },
      {},
      /^config: cron\.tasks\."t{65}" in .*: invalid task name/,
    ],
    [
      'a task name with a colon, set by the environment',
      { 'config.m.yml': '' },
      { 'APP__CRON__TASKS__A:B__KIND': 'cache.reload' },
      /^config: cron\.tasks\."a:b" in environment variable APP__CRON__TASKS__A:B__KIND: invalid task name/,
    ],
    [
      'a bad env value',
      { 'config.m.yml': '' },
      { APP__CACHE__TTL_MS: 'x' },
      /in environment variable APP__CACHE__TTL_MS/,
    ],
  ];
  for (const [what, files, env, message] of refused) {
    test(`refuses ${what} with exit code 78 and a message naming it`, () => {
      assert.throws(
        () => load(files, env),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.exitCode === 78 &&
          message.test(e.message) &&
          !e.message.includes('\n'),
      );
    });
  }
  test('refuses a missing mode file', () => {
    assert.throws(() => load({ 'config.yml': '' }), /config\.m\.yml: the file does not exist/);
  });
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

describe('redaction of the shown configuration', () => {
  test('secrets become [redacted]; other values and the original stay as they are', () => {
    const { config } = load({
      'config.m.yml': [
        'storage:\n  postgres:\n    url: postgres://u:pw@h/db',
        `acp:\n  operators:\n    - { name: a, role: admin, token_sha256: ${'c'.repeat(64)} }`,
        `observability:\n  metrics:\n    auth_token_sha256: ${'d'.repeat(64)}`,
        "cron:\n  tasks:\n    p:\n      kind: http.probe\n      schedule: '* * * * *'\n      execution_scope: all\n      url: http://x/?sig=abc&q=1\n      headers: { authorization: Bearer zzz }",
        '',
      ].join('\n'),
    });
    const shown = redactConfig(config);
    assert.equal(shown.storage.postgres.url, REDACTED);
    assert.equal(shown.acp.operators[0]?.token_sha256, REDACTED);
    assert.equal(shown.acp.operators[0]?.name, 'a');
    assert.equal(shown.observability.metrics.auth_token_sha256, REDACTED);
    assert.deepEqual(shown.cron.tasks.p?.headers, { authorization: REDACTED });
    assert.equal(shown.cron.tasks.p?.url, 'http://x/?sig=[redacted]&q=1');
    assert.equal(config.cron.tasks.p?.url, 'http://x/?sig=abc&q=1');
    assert.equal(config.storage.postgres.url, 'postgres://u:pw@h/db');
  });
});

describe('the one redaction rule (Redactor)', () => {
  const r = new Redactor({ secretQueryParams: ['token', 'api_key'], secretHeaders: ['x-custom'] });

  test('a URL: userinfo and secret query and fragment parameters become [redacted]; the rest stays as written', () => {
    assert.equal(
      r.url('https://u:p@h.test:8443/a%20b?API_KEY=1&x=a+b%2F&token&token=2#token=3&y=4'),
      'https://[redacted]@h.test:8443/a%20b?API_KEY=[redacted]&x=a+b%2F&token&token=[redacted]#token=[redacted]&y=4',
    );
    assert.equal(r.url('https://only-user@h.test/'), 'https://[redacted]@h.test/');
    assert.equal(
      r.url('https://h.test/?to%6Ben=x'),
      'https://h.test/?to%6Ben=[redacted]',
      'an encoded name too',
    );
    assert.equal(r.url('https://h.test/plain?a=1'), 'https://h.test/plain?a=1');
    assert.equal(r.url('not a url'), '[invalid url]');
  });

  test('free text: every URL in an error message is masked, the punctuation around it kept', () => {
    assert.equal(
      r.text('GET http://h.test/x?token=abc: refused (see https://u:pw@h.test/y?api_key=k).'),
      'GET http://h.test/x?token=[redacted]: refused (see https://[redacted]@h.test/y?api_key=[redacted]).',
    );
    const once = r.text('GET http://h.test/x?token=abc, again');
    assert.equal(r.text(once), once, 'masking twice changes nothing');
    assert.equal(r.text('no url here: token=abc'), 'no url here: token=abc');
  });

  test('the default rule masks the common secret parameter names, not only the exact few listed (a security review)', () => {
    const names = [
      'client_secret',
      'private_token',
      'x-api-key',
      'api-key',
      'access-token',
      'access_token',
      'pwd',
      'signature',
      'sig',
      'auth',
      'X-Amz-Signature',
      'refresh_token',
      'db_password',
      'passwd',
    ];
    const query = names.map((n, i) => `${n}=S${i}`).join('&');
    const { config } = load({
      'config.m.yml': `cron:\n  tasks:\n    p:\n      kind: http.probe\n      schedule: '* * * * *'\n      execution_scope: all\n      url: "http://x.test/?${query}&q=kept"\n`,
    });
    const masked = `http://x.test/?${names.map((n) => `${n}=${REDACTED}`).join('&')}&q=kept`;
    assert.equal(redactConfig(config).cron.tasks.p?.url, masked, 'the configuration view');
    assert.equal(
      Redactor.of(config).text(`GET http://x.test/?${query}&q=kept: connect ECONNREFUSED`),
      `GET ${masked}: connect ECONNREFUSED`,
      "a probe's last_error",
    );
    // An operator's own list adds names; the built-in ones stay masked even with an empty list.
    const none = new Redactor({ secretQueryParams: [] });
    assert.equal(
      none.url('http://x.test/?client_secret=1&x-api-key=2&sub1=3&monkey=4&keyword=5&author=6'),
      'http://x.test/?client_secret=[redacted]&x-api-key=[redacted]&sub1=3&monkey=4&keyword=5&author=6',
    );
  });

  test('headers: the always-secret ones, the configured ones and a call’s own, case-insensitive', () => {
    assert.deepEqual(
      r.headers({ Authorization: 'a', COOKIE: 'b', 'X-Custom': 'c', 'X-Probe': 'd', 'X-Plain': 'e' }, [
        'x-probe',
      ]),
      {
        Authorization: REDACTED,
        COOKIE: REDACTED,
        'X-Custom': REDACTED,
        'X-Probe': REDACTED,
        'X-Plain': 'e',
      },
    );
  });

  test('an advertised or fallback URL with credentials is refused, naming the key and never quoting them (a security review)', () => {
    // Secrets that a temporary directory's random name (`sluice-cfg-gPw4Jh`, quoted in the message)
    // cannot spell: a password of `Pw` matched one such name in about 190 runs of this test.
    for (const [yaml, key] of [
      [
        'cluster:\n  advertise_url: "http://nodeuser:s3cret-pw@127.0.0.1:18307/?token=ADVTOK"\n',
        'cluster.advertise_url',
      ],
      ['cluster:\n  advertise_url: "https://:s3cret-pw@node-2.test:8443"\n', 'cluster.advertise_url'],
      [
        'routing:\n  fallback_url: "https://nodeuser:s3cret-pw@landing.test/x?token=ADVTOK"\n',
        'routing.fallback_url',
      ],
      ['routing:\n  fallback_url: "https://nodeuser@landing.test/"\n', 'routing.fallback_url'],
      // Refused by the schema (not http): the value is quoted, its credentials are not.
      [
        'cluster:\n  advertise_url: "ftp://nodeuser:s3cret-pw@node-2.test/?token=ADVTOK"\n',
        'cluster.advertise_url',
      ],
    ] as const) {
      assert.throws(
        () => load({ 'config.m.yml': yaml }),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.exitCode === 78 &&
          e.message.startsWith(`config: ${key} in `) &&
          !e.message.includes('\n') &&
          !/s3cret-pw|ADVTOK|nodeuser/.test(e.message),
        yaml,
      );
    }
    const { config } = load({
      'config.m.yml':
        'cluster:\n  advertise_url: "http://node-2.test:8080"\nrouting:\n  fallback_url: "https://landing.test/?a=1"\n',
    });
    assert.equal(config.cluster.advertise_url, 'http://node-2.test:8080');
    assert.equal(config.routing.fallback_url, 'https://landing.test/?a=1');
  });

  test('a refused configuration never quotes a secret value: not a probe header, not a postgres url', () => {
    for (const [yaml, key] of [
      [
        "cron:\n  tasks:\n    p:\n      kind: http.probe\n      schedule: '* * * * *'\n      execution_scope: all\n      url: http://x/\n      headers: { x-api-key: 123456789 }\n",
        'cron.tasks.p.headers.x-api-key',
      ],
      ['storage:\n  postgres:\n    url: mysql://u:hunter2@h/db\n', 'storage.postgres.url'],
    ] as const) {
      assert.throws(
        () => load({ 'config.m.yml': yaml }),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.message.includes(key) &&
          !e.message.includes('123456789') &&
          !e.message.includes('hunter2'),
      );
    }
  });
});
