// Postbacks are authenticated by default (docs/clicks.md#postback-keys): the key a first start
// makes and prints once, shared by every node on the database; its rotation over the ACP with a
// grace for the old key; and `postback.require_key: false`, warned about and reported by the doctor.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sha256Hex } from '../../src/auth/index.ts';
import { KEY_REREAD_MS, PostbackKeys } from '../../src/conversions/index.ts';
import { runDoctor } from '../../src/doctor/index.ts';
import { newBatchId } from '../../src/storage/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { POSTBACK_KEY, printedPostbackKey, startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, testSchema } from '../helpers/postgres.ts';
import { newClick } from '../helpers/records.ts';
import { BACKENDS, type BackendCase } from '../storage/backends.ts';

type StartOpts = NonNullable<Parameters<typeof startTestNode>[0]>;

/**
 * A first node on a fresh database, and a way to start another on the same database: beside it on
 * PostgreSQL (a shared schema), in its place on SQLite (the first is stopped: one node a file).
 */
async function onOneDatabase(backend: BackendCase, opts: StartOpts = {}) {
  const schema = backend.name === 'postgres' ? testSchema() : undefined;
  const started: TestNode[] = [];
  const first = await startTestNode({ ...opts, ...(schema ? { postgres: { schema } } : {}) });
  started.push(first);
  await first.node.storage.clicks.insertBatch({
    id: newBatchId(),
    server_id: 'n1',
    rows: ['pk-1', 'pk-2'].map((click_id) => newClick({ click_id })),
  });
  return {
    first,
    another: async (o: StartOpts = {}): Promise<TestNode> => {
      if (schema === undefined) await first.node.stop();
      const sqlite = `storage:\n  sqlite:\n    path: ${join(first.dir, 'sluice.db')}\n`;
      const t = await startTestNode({
        ...o,
        ...(schema ? { postgres: { schema } } : { yaml: sqlite + (o.yaml ?? '') }),
      });
      started.push(t);
      return t;
    },
    close: async () => {
      for (const t of started.reverse()) await t.close();
      if (schema) await dropSchema(schema);
    },
  };
}

async function postback(t: TestNode, query: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${t.url}/postback?${query}`);
  const body = (await res.json()) as { error?: { code: string } };
  return { status: res.status, ...(body.error ? { code: body.error.code } : {}) };
}

const ok = { status: 200 };
const refused = { status: 401, code: 'auth.unauthorized' };

for (const backend of BACKENDS) {
  describe(`postback keys (${backend.name})`, async () => {
    const available = await backend.available();
    const skip = !available && 'PostgreSQL unavailable';

    test('a default node refuses a postback without its key; the key its first start printed converts, on the next node too, which prints nothing', {
      skip,
    }, async () => {
      const db = await onOneDatabase(backend);
      try {
        const { first } = db;
        // Any visitor sees a click id (X-Click-Id, the offer's URL): it posted a sale with it.
        assert.deepEqual(await postback(first, 'click_id=pk-1&payout=999999999'), refused);
        assert.deepEqual(await postback(first, 'click_id=pk-1&payout=999999999&key=guess'), refused);
        assert.deepEqual(await first.node.storage.conversions.ofClick('pk-1'), []);
        const printed = first.printed.filter((l) => POSTBACK_KEY.test(l));
        assert.equal(printed.length, 1, 'printed once');
        assert.match(printed[0]!, /^Created the postback key\. .*shown only this once/);
        const key = first.postbackKey!;
        assert.ok(!first.logs.raw.includes(key), 'printed, never logged');
        assert.deepEqual(await postback(first, `click_id=pk-1&txid=a&key=${key}`), ok);
        // The database keeps its hash, never the key.
        const stored = await first.node.storage.readSecret('postback_key');
        assert.ok(stored?.includes(sha256Hex(key)) && !stored.includes(key));

        const next = await db.another();
        assert.equal(printedPostbackKey(next.printed), undefined, 'a later start prints nothing');
        assert.deepEqual(next.printed, []);
        assert.deepEqual(await postback(next, `click_id=pk-2&txid=b&key=${key}`), ok);
        assert.deepEqual(await postback(next, 'click_id=pk-2&txid=c'), refused);
        assert.deepEqual(next.node.telemetry.systemMetrics().postbacks, {
          key_required: true,
          key_source: 'stored',
        });
      } finally {
        await db.close();
      }
    });

    test('rotate-key: the new key converts at once on every node, the old one for key_grace_hours and not after', {
      skip,
    }, async () => {
      const clock = new ManualClock(Date.UTC(2026, 10, 28, 12));
      const db = await onOneDatabase(backend, { clock });
      try {
        const a = db.first;
        // PostgreSQL: a second node serves beside the first; SQLite has one node.
        const b = backend.name === 'postgres' ? await db.another({ clock }) : a;
        const old = a.postbackKey!;
        const admin = await a.token('admin', 'ada');
        const res = await a.acp('/acp/postback/rotate-key', admin);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('cache-control'), 'no-store');
        const { key } = (await res.json()) as { key: string };
        assert.match(key, new RegExp(`^${POSTBACK_KEY.source}$`));
        assert.notEqual(key, old);
        assert.deepEqual(await postback(a, `click_id=pk-1&txid=new-a&key=${key}`), ok);
        // Node b read the keys when it started: a key it does not know makes it read them again
        // (waiting up to KEY_REREAD_MS since its last read), and the rotated key converts there too.
        assert.deepEqual(await postback(b, `click_id=pk-1&txid=new-b&key=${key}`), ok);
        for (const t of [a, b])
          assert.deepEqual(await postback(t, `click_id=pk-1&txid=old&key=${old}`), ok, 'within the grace');
        clock.advance(24 * 3_600_000 - 1);
        for (const t of [a, b])
          assert.deepEqual(await postback(t, `click_id=pk-1&txid=old&key=${old}`), ok, 'the grace’s last ms');
        clock.advance(1);
        for (const t of [a, b]) {
          assert.deepEqual(await postback(t, `click_id=pk-2&key=${old}`), refused, 'after the grace');
          assert.deepEqual(await postback(t, `click_id=pk-2&txid=after&key=${key}`), ok);
        }
        // Audited without the key; the key is in no log line.
        const audit = await a.node.storage.audit.list({ filter: {}, limit: 10 });
        const rotation = audit.items.find((r) => r.action === 'postback_key.rotate');
        assert.deepEqual(
          [rotation?.operator, rotation?.target_type, rotation?.target_id],
          ['ada', 'postback_key', 'postback_key'],
        );
        for (const t of new Set([a, b])) assert.ok(!t.logs.raw.includes(key) && !t.logs.raw.includes(old));
      } finally {
        await db.close();
      }
    });

    test('two rotations at once both answer a key, and both keys convert: neither is lost', {
      skip,
    }, async () => {
      const db = await onOneDatabase(backend);
      try {
        const a = db.first;
        const b = backend.name === 'postgres' ? await db.another() : a;
        const rotate = async (t: TestNode) => {
          const res = await t.acp('/acp/postback/rotate-key', await t.token('admin'));
          assert.equal(res.status, 200);
          return ((await res.json()) as { key: string }).key;
        };
        const keys = await Promise.all([rotate(a), rotate(b)]);
        assert.notEqual(keys[0], keys[1]);
        // The later one is current, the earlier one in its grace, the first key too.
        for (const t of [a, b])
          for (const [i, key] of [...keys, a.postbackKey].entries())
            assert.deepEqual(await postback(t, `click_id=pk-1&txid=k${i}&key=${key}`), ok, `key ${i}`);
      } finally {
        await db.close();
      }
    });

    test('only an admin rotates the key: a viewer or an operator is refused and nothing changes', {
      skip,
    }, async () => {
      const db = await onOneDatabase(backend);
      try {
        const t = db.first;
        const before = await t.node.storage.readSecret('postback_key');
        for (const role of ['viewer', 'operator'] as const) {
          const res = await t.acp('/acp/postback/rotate-key', await t.token(role));
          assert.equal(res.status, 403, role);
          assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'auth.forbidden');
        }
        assert.equal((await t.acp('/acp/postback/rotate-key', undefined)).status, 401);
        assert.equal(await t.node.storage.readSecret('postback_key'), before);
        assert.deepEqual(await postback(t, `click_id=pk-1&key=${t.postbackKey}`), ok);
      } finally {
        await db.close();
      }
    });

    test('require_key: false takes postbacks without a key, warns at every start, and is a finding of the doctor', {
      skip,
    }, async () => {
      const yaml = 'postback:\n  require_key: false\n';
      const db = await onOneDatabase(backend, { yaml });
      try {
        const warned = (t: TestNode) =>
          t.logs.lines.filter((l) => l.level === 'warn' && l.key === 'postback.require_key');
        const t = await db.another({ yaml });
        for (const n of [db.first, t]) {
          assert.equal(warned(n).length, 1, 'one warn record at each start');
          assert.deepEqual(n.printed, [], 'no key is made');
        }
        assert.deepEqual(await postback(t, 'click_id=pk-1&txid=open'), ok);
        assert.deepEqual(t.node.telemetry.systemMetrics().postbacks, {
          key_required: false,
          key_source: 'none',
        });
        const report = await runDoctor({
          urls: [t.url],
          token: await t.token('viewer'),
          discover: false,
          taskP95Ms: 5000,
          clientErrorRate: 0.5,
        });
        const node = report.nodes[0]!;
        assert.ok(node.reachable, 'the node was reached');
        const health = node.procedures.find((p) => p.key === 'acp_health')!;
        const item = health.items.find((i) => i.subject === 'postbacks')!;
        assert.equal(item.finding, true);
        assert.match(item.message, /postbacks need no key \(postback\.require_key: false\)/);
        assert.equal(health.status, 'finding');
      } finally {
        await db.close();
      }
    });
  });
}

describe('postback keys, configured', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({
      yaml: `postback:\n  key_sha256: ${sha256Hex('mine')}\n  require_key: false\n`,
    });
  });
  after(() => t.close());

  test('a configured key is the key (require_key: false changes nothing), nothing is made, and rotate-key is 409', async () => {
    assert.deepEqual(t.printed, []);
    assert.equal(await t.node.storage.readSecret('postback_key'), undefined);
    await t.node.storage.clicks.insertBatch({
      id: newBatchId(),
      server_id: 'n1',
      rows: [newClick({ click_id: 'c-1' })],
    });
    assert.deepEqual(await postback(t, 'click_id=c-1'), refused);
    assert.deepEqual(await postback(t, 'click_id=c-1&key=mine'), ok);
    assert.equal(
      t.logs.lines.filter((l) => l.key === 'postback.require_key').length,
      0,
      'no warning: a key is required',
    );
    const res = await t.acp('/acp/postback/rotate-key', await t.token('admin'));
    assert.equal(res.status, 409);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'resource.conflict');
    assert.match(body.error.message, /postback\.key_sha256/);
    assert.equal(t.logs.lines.filter((l) => l.message === 'audit').length, 0, 'a refusal is not audited');
    assert.deepEqual(await postback(t, 'click_id=c-1&txid=2&key=mine'), ok);
  });
});

describe('two nodes starting together on one PostgreSQL database', async () => {
  const pg = BACKENDS.find((b) => b.name === 'postgres')!;
  const available = await pg.available();

  test('make one postback key: one of them prints it, and it converts on both', {
    skip: !available && 'PostgreSQL unavailable',
  }, async () => {
    const schema = testSchema();
    const nodes = await Promise.all([0, 1].map(() => startTestNode({ postgres: { schema } })));
    try {
      const keys = nodes.map((n) => n.postbackKey).filter((k) => k !== undefined);
      assert.equal(keys.length, 1, 'printed by one node');
      await nodes[0]!.node.storage.clicks.insertBatch({
        id: newBatchId(),
        server_id: 'n1',
        rows: [newClick({ click_id: 'race-1' })],
      });
      for (const [i, n] of nodes.entries())
        assert.deepEqual(await postback(n, `click_id=race-1&txid=${i}&key=${keys[0]}`), ok);
    } finally {
      for (const n of nodes) await n.close();
      await dropSchema(schema);
    }
  });
});

// A node holds the key hashes it read; a rotation on another node only ever made it read them again
// when a key it did not know arrived. A node that saw only the old key (the one a leak made an
// operator rotate) kept taking it for ever, grace or none (review-30).
for (const backend of BACKENDS) {
  describe(`a key rotated out on another node (${backend.label})`, async () => {
    const skip = !(await backend.available()) && 'PostgreSQL unavailable';

    for (const graceHours of [0, 1]) {
      test(`is refused there once its grace is over (key_grace_hours ${graceHours}), though only the old key ever came`, {
        skip,
      }, async () => {
        const clock = new ManualClock(Date.UTC(2026, 10, 28, 12));
        const db = await backend.open(clock);
        try {
          const opts = {
            requireKey: true,
            configuredSha256: undefined,
            graceHours,
            store: db.storage,
            clock,
          };
          const a = new PostbackKeys(opts);
          const b = new PostbackKeys(opts);
          await a.start();
          const old = await a.ensure();
          assert.ok(old !== undefined);
          await b.start();
          assert.equal(await b.accepts(old), true);
          const key = await a.rotate();
          clock.advance(graceHours * 3_600_000);
          // The hashes b holds are older than a re-read's interval now (however slow the machine).
          await sleep(KEY_REREAD_MS + 50);
          assert.equal(await a.accepts(old), false, 'refused on the node that rotated');
          assert.equal(await b.accepts(old), false, 'refused on the other node too');
          assert.equal(await b.accepts(key), true);
        } finally {
          await db.cleanup();
        }
      });
    }
  });
}
