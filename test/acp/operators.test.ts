import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/auth/index.ts';
import type { TestNode } from '../helpers/node.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

interface Op {
  name: string;
  role: string;
  source: string;
  created_at: string | null;
  revoked_at: string | null;
}
/** The fields of the answers these tests read (a list, an operator, a created token, an error). */
interface Answer extends Op {
  items: Op[];
  total: number;
  token: string;
  error: { code: string; message: string };
}

const CONFIGURED_TOKEN = 'slc_configured-admin-token-0123456789';
const YAML = `acp:\n  operators:\n    - name: root\n      role: admin\n      token_sha256: ${sha256Hex(CONFIGURED_TOKEN)}\n`;

for (const backend of BACKENDS) {
  describe(`operators over the ACP (${backend.name})`, async () => {
    let t: TestNode;
    let admin: string;
    const { available } = await nodeSuite(backend, {
      node: { yaml: YAML },
      onStart: async (x) => {
        t = x;
        admin = await t.token('admin', 'ada');
      },
    });
    const skip = !available && 'PostgreSQL unavailable';

    const call = async (path: string, token: string, body: unknown = {}) => {
      const res = await t.acp(path, token, body);
      return { status: res.status, headers: res.headers, body: (await res.json()) as Answer };
    };

    test('create answers the token once; it signs in with its role; the list never shows a token or hash', {
      skip,
    }, async () => {
      const created = await call('/acp/operators/create', admin, { name: 'olga', role: 'operator' });
      assert.equal(created.status, 201);
      assert.equal(created.headers.get('cache-control'), 'no-store');
      assert.deepEqual(Object.keys(created.body).sort(), ['name', 'role', 'token']);
      assert.equal(created.body.name, 'olga');
      assert.equal(created.body.role, 'operator');
      const me = await call('/acp/auth/whoami', created.body.token);
      assert.equal(me.status, 200);
      assert.deepEqual([me.body.name, me.body.role], ['olga', 'operator']);
      // Stored hashed, as the CLI does.
      const stored = await t.node.storage.operators.findActiveByTokenHash(sha256Hex(created.body.token));
      assert.equal(stored?.name, 'olga');

      const listed = await call('/acp/operators/list', admin);
      assert.equal(listed.status, 200);
      const text = JSON.stringify(listed.body);
      assert.ok(!text.includes(created.body.token));
      assert.ok(!text.includes(sha256Hex(created.body.token)));
      assert.ok(!text.includes(sha256Hex(CONFIGURED_TOKEN)));
      assert.deepEqual(
        listed.body.items.map((o) => [o.name, o.role, o.source]),
        [
          ['root', 'admin', 'config'],
          ['ada', 'admin', 'storage'],
          ['olga', 'operator', 'storage'],
        ],
      );
      for (const o of listed.body.items)
        assert.deepEqual(Object.keys(o).sort(), ['created_at', 'name', 'revoked_at', 'role', 'source']);
      assert.equal(listed.body.total, 3);
    });

    test('create refuses a taken name (stored or configured), a bad name and an unknown role', {
      skip,
    }, async () => {
      for (const [body, status] of [
        [{ name: 'olga', role: 'viewer' }, 409],
        [{ name: 'root', role: 'viewer' }, 409],
        [{ name: 'has space', role: 'viewer' }, 400],
        [{ name: 'x', role: 'owner' }, 400],
        [{ name: 'x' }, 400],
      ] as const) {
        const r = await call('/acp/operators/create', admin, body);
        assert.equal(r.status, status, JSON.stringify(body));
      }
      const root = await call('/acp/operators/create', admin, { name: 'root', role: 'viewer' });
      assert.equal(root.body.error.code, 'resource.conflict');
      assert.match(root.body.error.message, /configured in acp\.operators/);
      const olga = await call('/acp/operators/create', admin, { name: 'olga', role: 'viewer' });
      assert.match(olga.body.error.message, /An active operator named "olga" already exists/);
    });

    test('revoke: a stored operator loses access at once and is listed as revoked on request', {
      skip,
    }, async () => {
      const { body } = await call('/acp/operators/create', admin, { name: 'temp', role: 'viewer' });
      const r = await call('/acp/operators/revoke', admin, { name: 'temp' });
      assert.equal(r.status, 200);
      assert.equal(r.body.name, 'temp');
      assert.ok(!Number.isNaN(Date.parse(r.body.revoked_at ?? '')));
      assert.equal((await call('/acp/auth/whoami', body.token)).status, 401);
      const active = await call('/acp/operators/list', admin);
      assert.ok(!active.body.items.some((o) => o.name === 'temp'));
      const all = await call('/acp/operators/list', admin, { include_revoked: true });
      assert.ok(all.body.items.some((o) => o.name === 'temp' && o.revoked_at !== null));
      assert.equal((await call('/acp/operators/revoke', admin, { name: 'temp' })).status, 404);
    });

    test('revoke refuses a configured operator and oneself, saying why', { skip }, async () => {
      const configured = await call('/acp/operators/revoke', admin, { name: 'root' });
      assert.equal(configured.status, 409);
      assert.match(
        configured.body.error.message,
        /configured in acp\.operators and cannot be revoked over the API/,
      );
      const self = await call('/acp/operators/revoke', admin, { name: 'ada' });
      assert.equal(self.status, 409);
      assert.match(self.body.error.message, /your own token/);
      // The configured admin may revoke stored admins; a stored admin still never revokes itself.
      const second = (await call('/acp/operators/create', admin, { name: 'bea', role: 'admin' })).body.token;
      assert.equal((await call('/acp/operators/revoke', CONFIGURED_TOKEN, { name: 'ada' })).status, 200);
      assert.equal((await call('/acp/operators/revoke', second, { name: 'bea' })).status, 409, 'oneself');
      assert.equal((await call('/acp/operators/revoke', CONFIGURED_TOKEN, { name: 'bea' })).status, 200);
    });

    test('only admins manage operators', { skip }, async () => {
      for (const role of ['viewer', 'operator'] as const) {
        const token = await t.token(role);
        for (const path of ['/acp/operators/list', '/acp/operators/create', '/acp/operators/revoke']) {
          const r = await call(path, token, {});
          assert.equal(r.status, 403, `${path} as ${role}`);
        }
      }
    });
  });
}

describe('the last admin', async () => {
  const sqlite = BACKENDS.find((b) => b.name === 'sqlite')!;
  let t: TestNode;
  before(async () => {
    t = await sqlite.startNode();
  });
  after(() => t.close());

  test('stays: admins revoke each other, never themselves, so the caller is always an admin left', async () => {
    const ada = await t.token('admin', 'ada');
    const bob = await t.token('admin', 'bob');
    const revoke = (token: string, name: string) => t.acp('/acp/operators/revoke', token, { name });
    assert.equal((await revoke(bob, 'ada')).status, 200);
    assert.equal((await revoke(ada, 'bob')).status, 401, 'ada was revoked');
    const self = await revoke(bob, 'bob');
    assert.equal(self.status, 409);
    assert.equal(((await self.json()) as Answer).error.code, 'resource.conflict');
    const list = (await (await t.acp('/acp/operators/list', bob, {})).json()) as Answer;
    assert.deepEqual(
      list.items.map((o) => [o.name, o.role]),
      [['bob', 'admin']],
    );
  });
});
