import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AuditRecord } from '../../src/storage/index.ts';
import type { TestNode } from '../helpers/node.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

/** A task that never fires by itself in a test's lifetime, so running it now is never refused. */
const YAML = `cron:\n  tasks:\n    yearly_reload:\n      kind: cache.reload\n      schedule: "0 0 3 1 1 *"\n`;

/** The fields of the answers these tests read (a created flow or stream, an operator, an error). */
interface Answer {
  id: string;
  token: string;
  error: { code: string };
}

type Page = { items: AuditRecord[]; total: number; total_capped: boolean; next_cursor: string | null };

for (const backend of BACKENDS) {
  describe(`audit of ACP writes (${backend.name})`, async () => {
    let t: TestNode;
    let admin: string;
    const { available } = await nodeSuite(backend, {
      node: { yaml: YAML },
      onStart: async (x) => {
        t = x;
        admin = await t.token('admin', 'ada');
      },
    });

    const call = async (path: string, token: string, body: unknown) => {
      const res = await t.acp(path, token, body);
      return {
        status: res.status,
        request_id: res.headers.get('x-request-id')!,
        body: (await res.json()) as Answer,
      };
    };
    const list = async (body: unknown = {}): Promise<Page> => {
      const r = await call('/acp/audit/list', admin, body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body as unknown as Page;
    };
    const auditLines = () => t.logs.lines.filter((l) => l.message === 'audit');

    test('every write is audited once: a row and an info record with operator, action, target and request id', {
      skip: !available && 'PostgreSQL unavailable',
    }, async () => {
      const done: { action: string; target_id: string; request_id: string }[] = [];
      const write = async (
        path: string,
        body: unknown,
        action: string,
        target: (b: Answer) => string,
        expected = 200,
      ) => {
        const r = await call(path, admin, body);
        assert.equal(r.status, expected, `${path}: ${JSON.stringify(r.body)}`);
        done.push({ action, target_id: target(r.body), request_id: r.request_id });
        return r.body;
      };
      const flow = await write(
        '/acp/traffic-flows/create',
        { slug: 'audited', name: 'A' },
        'flow.create',
        (b) => b.id,
      );
      await write('/acp/traffic-flows/update', { id: flow.id, name: 'B' }, 'flow.update', () => flow.id);
      const stream = await write(
        '/acp/streams/create',
        { flow_id: flow.id, name: 's', type: 'default', target_url: 'https://example.com/' },
        'stream.create',
        (b) => b.id,
      );
      await write('/acp/streams/update', { id: stream.id, weight: 5 }, 'stream.update', () => stream.id);
      await write('/acp/streams/delete', { id: stream.id }, 'stream.delete', () => stream.id);
      await write('/acp/traffic-flows/delete', { id: flow.id }, 'flow.delete', () => flow.id);
      await write('/acp/cron-tasks/run', { name: 'yearly_reload' }, 'task.run', () => 'yearly_reload', 202);
      const created = await write(
        '/acp/operators/create',
        { name: 'newcomer', role: 'viewer' },
        'operator.create',
        () => 'newcomer',
        201,
      );
      await write('/acp/operators/revoke', { name: 'newcomer' }, 'operator.revoke', () => 'newcomer');
      const rotated = await write(
        '/acp/postback/rotate-key',
        {},
        'postback_key.rotate',
        () => 'postback_key',
      );

      const page = await list({ limit: 500 });
      assert.equal(page.total, done.length);
      // Newest first: the reverse of the order the writes were made in.
      assert.deepEqual(
        page.items.map((r) => r.action),
        done.map((d) => d.action).reverse(),
      );
      for (const d of done) {
        const rows = page.items.filter((r) => r.request_id === d.request_id);
        assert.equal(rows.length, 1, `${d.action}: one row`);
        const row = rows[0]!;
        assert.equal(row.operator, 'ada');
        assert.equal(row.action, d.action);
        assert.equal(row.target_type, d.action.split('.')[0]);
        assert.equal(row.target_id, d.target_id);
        assert.equal(row.server_id, t.node.serverId);
        assert.ok(!Number.isNaN(Date.parse(row.created_at)));
        const lines = auditLines().filter((l) => l.request_id === d.request_id);
        assert.equal(lines.length, 1, `${d.action}: one log record`);
        assert.equal(lines[0]!.level, 'info');
        assert.equal(lines[0]!.operator, 'ada');
        assert.equal(lines[0]!.action, d.action);
        assert.equal(lines[0]!.target_type, row.target_type);
        assert.equal(lines[0]!.target_id, d.target_id);
      }
      // The new operator's token is in its one answer, and in no log line nor audit row.
      assert.match(created.token, /^slc_/);
      assert.ok(!t.logs.raw.includes(created.token), 'the token is never logged');
      assert.ok(!JSON.stringify(page).includes(created.token), 'the token is in no audit row');
      // So is the postback key a rotation answered.
      const key = (rotated as unknown as { key: string }).key;
      assert.match(key, /^pbk_/);
      assert.ok(!t.logs.raw.includes(key) && !JSON.stringify(page).includes(key), 'the key neither');
      assert.deepEqual(Object.keys(page.items[0]!).sort(), [
        'action',
        'created_at',
        'id',
        'operator',
        'request_id',
        'server_id',
        'target_id',
        'target_type',
      ]);
    });

    test('a write that fails is not audited (invalid, not found, conflict, forbidden)', {
      skip: !available && 'PostgreSQL unavailable',
    }, async () => {
      const before = (await list()).total;
      const linesBefore = auditLines().length;
      const viewer = await t.token('viewer', 'vic');
      const failures: [string, string, unknown, number][] = [
        ['/acp/traffic-flows/create', admin, { slug: 'Not A Slug', name: 'x' }, 400],
        ['/acp/traffic-flows/update', admin, { id: 'no-such-flow', name: 'x' }, 404],
        ['/acp/traffic-flows/delete', admin, { id: 'no-such-flow' }, 404],
        ['/acp/streams/delete', admin, { id: 'no-such-stream' }, 404],
        ['/acp/traffic-flows/create', viewer, { slug: 'fine', name: 'x' }, 403],
        ['/acp/cron-tasks/run', admin, { name: 'no_such_task' }, 404],
        ['/acp/operators/revoke', admin, { name: 'nobody' }, 404],
        ['/acp/operators/revoke', admin, { name: 'ada' }, 409],
      ];
      await call('/acp/traffic-flows/create', admin, { slug: 'taken', name: 'x' });
      failures.push(['/acp/traffic-flows/create', admin, { slug: 'taken', name: 'y' }, 409]);
      const after1 = (await list()).total;
      for (const [path, token, body, status] of failures) {
        const r = await call(path, token, body);
        assert.equal(r.status, status, `${path} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
      }
      // Only the one successful create in between was audited.
      assert.equal(after1, before + 1);
      assert.equal((await list()).total, after1);
      assert.equal(auditLines().length, linesBefore + 1);
    });

    test('the list: admin only, filters, keyset pages newest first', {
      skip: !available && 'PostgreSQL unavailable',
    }, async () => {
      for (const role of ['viewer', 'operator'] as const) {
        const r = await call('/acp/audit/list', await t.token(role), {});
        assert.equal(r.status, 403);
        assert.equal(r.body.error.code, 'auth.forbidden');
      }
      const all = await list({ limit: 500 });
      const flowCreates = await list({ filter: { action: 'flow.create' } });
      assert.ok(flowCreates.total >= 2);
      assert.deepEqual(
        flowCreates.items.map((r) => r.id),
        all.items.filter((r) => r.action === 'flow.create').map((r) => r.id),
      );
      const operators = await list({ filter: { target_type: 'operator', target_id: 'newcomer' } });
      assert.deepEqual(
        operators.items.map((r) => r.action),
        ['operator.revoke', 'operator.create'],
      );
      assert.equal((await list({ filter: { operator: 'nobody' } })).total, 0);
      const newest = all.items[0]!;
      const from = await list({ filter: { from: newest.created_at } });
      assert.ok(from.items.every((r) => r.created_at >= newest.created_at));
      assert.ok(from.items.some((r) => r.id === newest.id));
      const to = await list({ filter: { to: newest.created_at } });
      assert.ok(to.items.every((r) => r.created_at < newest.created_at));
      // Any ISO-8601 date or date-time with a zone, as the other lists take them.
      const sameInstant = newest.created_at.replace('Z', '+00:00');
      assert.deepEqual((await list({ filter: { from: sameInstant } })).items, from.items);
      const day = newest.created_at.slice(0, 10);
      const nextDay = new Date(Date.parse(day) + 86_400_000).toISOString().slice(0, 10);
      const thatDay = await list({ filter: { from: day, to: nextDay }, limit: 500 });
      assert.deepEqual(
        thatDay.items.map((r) => r.id),
        all.items.filter((r) => r.created_at.startsWith(day)).map((r) => r.id),
      );
      // Two at a time, following next_cursor: the same rows in the same order, none twice.
      const paged: string[] = [];
      let cursor: string | null | undefined;
      do {
        const p: Page = await list({ limit: 2, ...(cursor ? { cursor } : {}) });
        paged.push(...p.items.map((r) => r.id));
        cursor = p.next_cursor;
      } while (cursor);
      assert.deepEqual(
        paged,
        all.items.map((r) => r.id),
      );
      for (const bad of [
        { filter: { from: 'yesterday' } },
        { filter: { to: '2026-02-30' } },
        { cursor: 'nonsense' },
        { filter: { action: 'DROP' } },
      ]) {
        const r = await call('/acp/audit/list', admin, bad);
        assert.equal(r.status, 400, JSON.stringify(bad));
        assert.equal(r.body.error.code, 'validation.invalid_input');
      }
    });
  });
}
