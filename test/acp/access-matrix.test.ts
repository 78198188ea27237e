import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { roleAllows, sha256Hex } from '../../src/auth/index.ts';
import { ROLES, type Role } from '../../src/config/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

/**
 * The access rule of every ACP route. A route added without a line here fails the first test:
 * whoever adds an endpoint decides, in review, who may call it.
 */
const RULES: Record<string, Role> = {
  '/acp/system/metrics': 'viewer',
  '/acp/system/config': 'viewer',
  '/acp/system/procedures': 'viewer',
  '/acp/auth/whoami': 'viewer',
  '/acp/cluster/nodes': 'viewer',
  '/acp/cron-tasks/list': 'viewer',
  '/acp/cron-tasks/run': 'operator',
  '/acp/http-client/recent-failures': 'operator',
  '/acp/routing/simulate': 'viewer',
  '/acp/reports/query': 'viewer',
  '/acp/reports/currencies': 'viewer',
  '/acp/cluster/metrics': 'viewer',
  '/acp/traffic-flows/list': 'viewer',
  '/acp/traffic-flows/create': 'admin',
  '/acp/traffic-flows/update': 'admin',
  '/acp/traffic-flows/delete': 'admin',
  '/acp/streams/list': 'viewer',
  '/acp/streams/create': 'admin',
  '/acp/streams/update': 'admin',
  '/acp/streams/delete': 'admin',
  '/acp/clicks/get': 'viewer',
  '/acp/clicks/list': 'viewer',
  '/acp/conversions/list': 'viewer',
  '/acp/operators/list': 'admin',
  '/acp/operators/create': 'admin',
  '/acp/operators/revoke': 'admin',
  '/acp/audit/list': 'admin',
  '/acp/postback/rotate-key': 'admin',
};

const METRICS_TOKEN = 'scrape-token-0123456789abcdef';

describe('access control: every ACP route × every credential', () => {
  let t: TestNode;
  const tokens: Record<string, string> = {};
  before(async () => {
    t = await startTestNode({
      yaml: `observability:\n  metrics:\n    prometheus_enabled: true\n    auth_token_sha256: ${sha256Hex(METRICS_TOKEN)}\n`,
    });
    for (const role of ROLES) tokens[role] = await t.token(role, `matrix-${role}`);
    tokens.revoked = await t.token('admin', 'matrix-revoked');
    assert.ok(await t.node.storage.operators.revoke('matrix-revoked'));
  });
  after(() => t.close());

  test('every registered route has a rule, and the rule is the role it was registered with', () => {
    const registered = Object.fromEntries(t.node.acp.routes.map((r) => [r.path, r.role]));
    assert.deepEqual(registered, RULES);
  });

  test('every route that changes something is audited, with its action; nothing else is', () => {
    const audited = Object.fromEntries(
      t.node.acp.routes.filter((r) => r.action !== undefined).map((r) => [r.path, r.action]),
    );
    assert.deepEqual(audited, {
      '/acp/cron-tasks/run': 'task.run',
      '/acp/traffic-flows/create': 'flow.create',
      '/acp/traffic-flows/update': 'flow.update',
      '/acp/traffic-flows/delete': 'flow.delete',
      '/acp/streams/create': 'stream.create',
      '/acp/streams/update': 'stream.update',
      '/acp/streams/delete': 'stream.delete',
      '/acp/operators/create': 'operator.create',
      '/acp/operators/revoke': 'operator.revoke',
      '/acp/postback/rotate-key': 'postback_key.rotate',
    });
  });

  test('no token, a wrong or revoked token: 401; a role below the rule: 403; at or above: through', async () => {
    const credentials: [string, string | undefined, Role | null][] = [
      ['no token', undefined, null],
      ['wrong token', 'slc_not-a-real-token', null],
      ['revoked token', tokens.revoked, null],
      ...ROLES.map((r): [string, string, Role] => [r, tokens[r]!, r]),
    ];
    let n = 0;
    const failures: string[] = [];
    for (const [path, rule] of Object.entries(RULES)) {
      for (const [label, token, role] of credentials) {
        // Each call from its own address (through the trusted local proxy), so the failed-auth
        // limit of one address never blurs the matrix.
        const res = await t.acp(
          path,
          token,
          {},
          { 'x-forwarded-for': `10.9.${Math.floor(n / 250)}.${n++ % 250}` },
        );
        const body = (await res.json()) as { error?: { code: string; request_id: string } };
        const expected = role === null ? 401 : roleAllows(role, rule) ? 'through' : 403;
        const ok =
          expected === 'through'
            ? res.status !== 401 && res.status !== 403 && res.status < 500
            : res.status === expected &&
              body.error?.code === (expected === 401 ? 'auth.unauthorized' : 'auth.forbidden') &&
              t.logs.apiErrors(body.error.request_id).length === 1;
        if (!ok)
          failures.push(
            `${path} as ${label}: ${res.status} ${body.error?.code ?? ''} (expected ${expected})`,
          );
      }
    }
    assert.deepEqual(failures, []);
  });

  test('/metrics with a scrape token configured: none or wrong is 401, the token is 200', async () => {
    assert.equal((await fetch(`${t.url}/metrics`)).status, 401);
    assert.equal(
      (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}x` } })).status,
      401,
    );
    // An ACP token is not a scrape token.
    assert.equal(
      (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${tokens.admin}` } })).status,
      401,
    );
    const ok = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /sluice_controller_requests_total/);
  });

  test('no token, no secret in the logs: neither the tokens nor their Authorization headers', () => {
    for (const token of [...Object.values(tokens), METRICS_TOKEN]) {
      assert.ok(!t.logs.raw.includes(token), 'a token reached the log');
    }
    assert.ok(!/bearer\s+\S/i.test(t.logs.raw), 'an Authorization value reached the log');
  });
});

describe('failed-authentication limiting per client address', () => {
  let t: TestNode;
  let admin: string;
  // The node's clock moves only when the test moves it: the window cannot run out while the test is
  // still making its failures on a slow machine, and its end is reached without sleeping.
  const clock = new ManualClock();
  before(async () => {
    t = await startTestNode({
      clock,
      yaml: `acp:\n  auth_rate_limit:\n    max_failures: 3\n    window_ms: 1500\nobservability:\n  metrics:\n    prometheus_enabled: true\n    auth_token_sha256: ${sha256Hex(METRICS_TOKEN)}\n`,
    });
    admin = await t.token('admin');
  });
  after(() => t.close());

  const from = (address: string) => ({ 'x-forwarded-for': address });

  test('after max_failures an address gets 429 rate.limited, even with a good token, until its window ends', async () => {
    const a = from('198.51.100.7');
    for (let i = 0; i < 3; i++) {
      const res = await t.acp('/acp/system/metrics', `slc_guess-${i}`, {}, a);
      assert.equal(res.status, 401);
      await res.body?.cancel();
    }
    const limited = await t.acp('/acp/system/metrics', admin, {}, a);
    assert.equal(limited.status, 429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.equal(retryAfter, 2, 'the 1.5 s window, in whole seconds rounded up');
    const body = (await limited.json()) as {
      error: { code: string; request_id: string; details: { retry_after_seconds: number } };
    };
    assert.equal(body.error.code, 'rate.limited');
    assert.equal(body.error.details.retry_after_seconds, retryAfter);
    const records = t.logs.apiErrors(body.error.request_id);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.http_status, 429);

    // Another address is not affected.
    assert.equal((await t.acp('/acp/system/metrics', admin, {}, from('198.51.100.8'))).status, 200);

    clock.advance(1499);
    const still = await t.acp('/acp/system/metrics', admin, {}, a);
    assert.equal(still.status, 429, 'locked out until the window ends');
    assert.equal(still.headers.get('retry-after'), '1');
    await still.body?.cancel();
    clock.advance(1);
    const again = await t.acp('/acp/system/metrics', admin, {}, a);
    assert.equal(again.status, 200);
    await again.json();
  });

  test('a request with no credential is answered 401 and never locks its address out', async () => {
    // Nothing was guessed: a client finding out which routes need a token (or a test of every
    // route's 401) used to lock its address out of its own valid token for a whole window.
    const c = from('198.51.100.20');
    for (let i = 0; i < 6; i++) {
      const res = await t.acp('/acp/system/metrics', undefined, {}, c);
      assert.equal(res.status, 401);
      await res.body?.cancel();
      const blank = await fetch(`${t.url}/acp/system/metrics`, {
        method: 'POST',
        headers: { authorization: '', ...c },
      });
      assert.equal(blank.status, 401, 'an empty Authorization header presents nothing either');
      await blank.body?.cancel();
      const scrape = await fetch(`${t.url}/metrics`, { headers: c });
      assert.equal(scrape.status, 401);
      await scrape.body?.cancel();
    }
    const ok = await t.acp('/acp/system/metrics', admin, {}, c);
    assert.equal(ok.status, 200);
    await ok.json();
  });

  test('through a lockout passes only a credential that authenticated from that address before', async () => {
    // Whoever holds that token there has nothing to guess. Any other credential is refused while
    // the address is locked out: a proven address must not become a place to guess from.
    const d = from('198.51.100.21');
    const first = await t.acp('/acp/system/metrics', admin, {}, d);
    assert.equal(first.status, 200);
    await first.json();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await t.acp('/acp/system/metrics', `slc_guess-${i}`, {}, d);
      statuses.push(res.status);
      await res.body?.cancel();
    }
    assert.deepEqual(statuses, [401, 401, 401, 429, 429, 429]);
    const ok = await t.acp('/acp/system/metrics', admin, {}, d);
    assert.equal(ok.status, 200, 'the token used from here before');
    await ok.json();
    // The same token however the header spells it: one holder of one token is one proof.
    for (const header of [`bearer ${admin}`, `Bearer  ${admin}`, `BEARER\t${admin}`]) {
      const res = await fetch(`${t.url}/acp/system/metrics`, {
        method: 'POST',
        headers: { authorization: header, ...d },
      });
      assert.equal(res.status, 200, JSON.stringify(header));
      await res.json();
    }
    const viewer = await t.token('viewer', 'matrix-limit-viewer');
    const other = await t.acp('/acp/system/metrics', viewer, {}, d);
    assert.equal(other.status, 429, 'a valid token never used from here is refused like a guess');
    await other.body?.cancel();
    // A proven token that is revoked is a guess like any other from then on.
    const f = from('198.51.100.23');
    const revoked = await t.token('viewer', 'matrix-limit-revoked');
    const before = await t.acp('/acp/system/metrics', revoked, {}, f);
    assert.equal(before.status, 200);
    await before.json();
    assert.ok(await t.node.storage.operators.revoke('matrix-limit-revoked'));
    const after: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await t.acp('/acp/system/metrics', revoked, {}, f);
      after.push(res.status);
      await res.body?.cancel();
    }
    assert.deepEqual(after, [401, 401, 401, 429, 429]);
    // A good scrape token lifts nothing for ACP tokens; an operator proves no neighbour in its /64.
    const e = from('198.51.100.22');
    const scrape = await fetch(`${t.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}`, ...e },
    });
    assert.equal(scrape.status, 200);
    await scrape.arrayBuffer();
    const six = from('2001:db8:1:2::10');
    const proven = await t.acp('/acp/system/metrics', admin, {}, six);
    assert.equal(proven.status, 200);
    await proven.json();
    for (const where of [e, from('2001:db8:1:2:ffff::99')]) {
      const seen: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await t.acp('/acp/system/metrics', `slc_guess-${i}`, {}, where);
        seen.push(res.status);
        await res.body?.cancel();
      }
      assert.deepEqual(seen, [401, 401, 401, 429], JSON.stringify(where));
    }
  });

  test('wrong scrape tokens on /metrics count against the address too', async () => {
    const b = from('203.0.113.9');
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${t.url}/metrics`, { headers: { authorization: 'Bearer wrong', ...b } });
      assert.equal(res.status, 401);
      await res.body?.cancel();
    }
    const limited = await fetch(`${t.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}`, ...b },
    });
    assert.equal(limited.status, 429);
    await limited.body?.cancel();
    const acp = await t.acp('/acp/system/metrics', admin, {}, b);
    assert.equal(acp.status, 429, 'one budget per address across the ACP and /metrics');
    await acp.body?.cancel();
  });
});
