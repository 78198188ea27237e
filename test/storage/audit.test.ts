import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import type { AuditEntry, AuditRecord } from '../../src/storage/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { BACKENDS, type Opened, storeSuite } from './backends.ts';

const T0 = Date.UTC(2026, 0, 2, 12);
const entry = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  operator: 'ada',
  action: 'flow.create',
  target_type: 'flow',
  target_id: 'f1',
  request_id: 'req-1',
  server_id: 'node-a',
  ...over,
});

for (const backend of BACKENDS) {
  describe(`audit log storage (${backend.name})`, async () => {
    const clock = new ManualClock(T0);
    let db: Opened;
    const written: AuditRecord[] = [];
    const { available } = await storeSuite(backend, {
      clock,
      onOpen: async (x) => {
        db = x;
        // Three in one millisecond, then one a day later per action.
        for (const target_id of ['f1', 'f2', 'f3'])
          written.push(await db.storage.audit.append(entry({ target_id })));
        for (const [i, action] of ['stream.delete', 'task.run', 'operator.revoke'].entries()) {
          clock.advance(86_400_000);
          written.push(
            await db.storage.audit.append(
              entry({
                action,
                target_type: action.split('.')[0]!,
                target_id: `t${i}`,
                operator: i === 1 ? 'bob' : 'ada',
                request_id: `req-${i + 2}`,
              }),
            ),
          );
        }
      },
    });
    const skip = !available && 'PostgreSQL unavailable';

    test('a row keeps what it was given, stamped with the clock', { skip }, async () => {
      const [first] = written;
      assert.deepEqual(
        { ...first, id: undefined },
        { ...entry(), id: undefined, created_at: new Date(T0).toISOString() },
      );
      assert.match(first!.id, /^[A-Za-z0-9-]{1,64}$/);
    });

    test('newest first, ties in the order written; pages follow the cursor', { skip }, async () => {
      const expected = [...written].reverse().map((r) => r.id);
      const all = await db.storage.audit.list({ filter: {}, limit: 100 });
      assert.deepEqual(
        all.items.map((r) => r.id),
        expected,
      );
      assert.equal(all.total, written.length);
      assert.equal(all.total_capped, false);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await db.storage.audit.list({ filter: {}, limit: 4, cursor });
        seen.push(...page.items.map((r) => r.id));
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      assert.deepEqual(seen, expected);
    });

    test('filters: operator, action, target, from (inclusive) and to (exclusive)', { skip }, async () => {
      const ids = async (filter: object) =>
        (await db.storage.audit.list({ filter, limit: 100 })).items.map((r) => r.target_id);
      assert.deepEqual(await ids({ operator: 'bob' }), ['t1']);
      assert.deepEqual(await ids({ action: 'flow.create' }), ['f3', 'f2', 'f1']);
      assert.deepEqual(await ids({ target_type: 'operator', target_id: 't2' }), ['t2']);
      const day1 = new Date(T0 + 86_400_000).toISOString();
      const day2 = new Date(T0 + 2 * 86_400_000).toISOString();
      assert.deepEqual(await ids({ from: day1, to: day2 }), ['t0']);
      await assert.rejects(
        db.storage.audit.list({ filter: { from: '2026-01-02' }, limit: 10 }),
        (err) => err instanceof ApiError && err.code === 'validation.invalid_input',
      );
    });

    test('deleteOlderThan removes only the older rows', { skip }, async () => {
      const cut = new Date(T0 + 2 * 86_400_000).toISOString();
      assert.equal(await db.storage.audit.deleteOlderThan(cut), 4);
      const left = await db.storage.audit.list({ filter: {}, limit: 100 });
      assert.deepEqual(
        left.items.map((r) => r.target_id),
        ['t2', 't1'],
      );
    });
  });
}
