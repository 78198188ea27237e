import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Type } from '@sinclair/typebox';
import { AcpRouter } from '../../src/acp/index.ts';
import { Authenticator, roleAllows, sha256Hex } from '../../src/auth/index.ts';
import { ROLES } from '../../src/config/index.ts';
import { startNode } from '../../src/main.ts';
import { systemClock } from '../../src/time/index.ts';
import { LogCapture, startTestNode, type TestNode } from '../helpers/node.ts';

describe('roles', () => {
  test('viewer < operator < admin', () => {
    const allowed = ROLES.flatMap((have) =>
      ROLES.filter((need) => roleAllows(have, need)).map((need) => `${have}>=${need}`),
    );
    assert.deepEqual(allowed.sort(), [
      'admin>=admin',
      'admin>=operator',
      'admin>=viewer',
      'operator>=operator',
      'operator>=viewer',
      'viewer>=viewer',
    ]);
  });
});

describe('ACP authentication and role checks', () => {
  const configToken = 'cfg-operator-token-0123456789';
  let t: TestNode;
  const tokens: Record<string, string> = {};
  before(async () => {
    t = await startTestNode({
      yaml: `acp:\n  operators:\n    - { name: ci, role: operator, token_sha256: ${sha256Hex(configToken)} }\n`,
    });
  });
  after(() => t.close());

  test('a stored token of each role reaches system metrics (any operator)', async () => {
    for (const role of ROLES) {
      tokens[role] = await t.token(role);
      const res = await t.acp('/acp/system/metrics', tokens[role]);
      assert.equal(res.status, 200, role);
      await res.json();
    }
  });

  test('a token from acp.operators (token_sha256) is accepted', async () => {
    const res = await t.acp('/acp/system/metrics', configToken);
    assert.equal(res.status, 200);
    await res.json();
  });

  test('the scheme is case-insensitive but the token is not', async () => {
    const ok = await t.acp('/acp/system/metrics', undefined, undefined, {
      authorization: `bearer ${configToken}`,
    });
    assert.equal(ok.status, 200);
    await ok.json();
    const bad = await t.acp('/acp/system/metrics', configToken.toUpperCase());
    assert.equal(bad.status, 401);
    await bad.json();
  });

  test('a revoked token is refused at once', async () => {
    const token = await t.token('admin', 'leaving');
    assert.equal((await t.acp('/acp/system/metrics', token)).status, 200);
    assert.equal(await t.node.storage.operators.revoke('leaving'), true);
    const res = await t.acp('/acp/system/metrics', token);
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'auth.unauthorized');
  });
});

describe('ACP router: 401 before 403, 403 before the body is read', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  test('role checks on a route that needs admin', async () => {
    // The node is already listening; a second router on a fresh app exercises the same code.
    const { default: Fastify } = await import('fastify');
    const app = Fastify();
    const acp = new AcpRouter(app, new Authenticator([], t.node.storage.operators, systemClock));
    let called = 0;
    acp.add({
      path: '/acp/test/admin-only',
      role: 'admin',
      body: Type.Object({ n: Type.Integer() }, { additionalProperties: false }),
      handler: ({ body, principal }) => {
        called++;
        return { n: body.n, who: principal.name };
      },
    });
    assert.deepEqual(
      acp.routes.map(({ path, role }) => ({ path, role })),
      [{ path: '/acp/test/admin-only', role: 'admin' }],
    );
    assert.deepEqual(Object.keys(acp.routes[0]!.body.properties), ['n']);
    const viewer = await t.token('viewer');
    const operator = await t.token('operator');
    const admin = await t.token('admin', 'root');
    const call = (token: string | undefined, payload: unknown) =>
      app.inject({
        method: 'POST',
        url: '/acp/test/admin-only',
        headers: token ? { authorization: `Bearer ${token}` } : {},
        payload: payload as string,
      });
    assert.equal((await call(undefined, { n: 1 })).statusCode, 401);
    assert.equal((await call(undefined, { bad: true })).statusCode, 401, '401 even with a bad body');
    assert.equal((await call(viewer, { n: 1 })).statusCode, 403);
    assert.equal((await call(operator, { bad: true })).statusCode, 403, '403 even with a bad body');
    assert.equal(called, 0);
    const ok = await call(admin, { n: 7 });
    assert.equal(ok.statusCode, 200);
    assert.deepEqual(ok.json(), { n: 7, who: 'root' });
    assert.equal(called, 1);
    await app.close();
  });
});

describe('bootstrap admin on a first development start', () => {
  test('creates admin once, prints its token once, and the token works', async () => {
    const first = await startTestNode({ mode: 'development' });
    try {
      // The token, and the postback key a first start makes in any mode (test/conversions).
      const tokens = first.printed.filter((l) => l.includes('slc_'));
      assert.equal(tokens.length, 1);
      assert.equal(first.printed.length, 2);
      const token = /slc_[A-Za-z0-9_-]{43}/.exec(tokens[0]!)?.[0];
      assert.ok(token, 'token printed');
      assert.ok(!first.logs.raw.includes(token), 'the token is printed, never logged');
      const res = await first.acp('/acp/system/metrics', token);
      assert.equal(res.status, 200);
      await res.json();
      const ops = await first.node.storage.operators.list();
      assert.deepEqual(
        ops.map((o) => [o.name, o.role]),
        [['admin', 'admin']],
      );
      await first.node.stop();
      const printed: string[] = [];
      const again = await startNode({
        configDir: first.dir,
        mode: 'development',
        env: {},
        cwd: first.dir,
        logDestination: new LogCapture(),
        print: (l) => printed.push(l),
      });
      await again.stop();
      assert.deepEqual(printed, [], 'a second start creates nothing and prints nothing');
    } finally {
      await first.close();
    }
  });

  test('is not done outside development, nor when acp.operators has one', async () => {
    const testMode = await startTestNode();
    const withConfigured = await startTestNode({
      mode: 'development',
      yaml: `acp:\n  operators:\n    - { name: ops, role: admin, token_sha256: ${'a'.repeat(64)} }\n`,
    });
    try {
      const ofAdmin = (printed: string[]) => printed.filter((l) => l.includes('ACP operator'));
      assert.deepEqual(ofAdmin(testMode.printed), []);
      assert.deepEqual(ofAdmin(withConfigured.printed), []);
      assert.equal(await testMode.node.storage.operators.countActive(), 0);
      assert.equal(await withConfigured.node.storage.operators.countActive(), 0);
    } finally {
      await testMode.close();
      await withConfigured.close();
    }
  });
});
