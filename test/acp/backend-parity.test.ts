import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import type { TestNode } from '../helpers/node.ts';
import { BACKENDS } from '../storage/backends.ts';

/** fast-check's seed: fixed by `FC_SEED` to replay a failure, else fresh each run (printed on failure). */
const SEED = process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined;
const RUNS = Number(process.env.FC_RUNS ?? 150);

/** One node per backend, with the same fixtures (their ids differ). */
interface Side {
  backend: string;
  t: TestNode;
  admin: string;
  viewer: string;
  flow: FlowRecord;
  stream: StreamRecord;
}

interface Answer {
  status: number;
  code: string | null;
  message: string | null;
  paths: string[];
  records: number;
}

/** A forged cursor of the list at `path`: named as its own next_cursor would be, so only its values are wrong. */
const cursor = (path: string, parts: unknown[]) =>
  Buffer.from(
    JSON.stringify([path === '/acp/streams/list' ? 'streams' : 'traffic_flows', ...parts]),
  ).toString('base64url');
const ZERO_ID = '00000000-0000-0000-0000-000000000000';

/**
 * The same input asked of SQLite and PostgreSQL gets the same answer. PostgreSQL is the stricter
 * store (no U+0000 in TEXT, 32-bit INTEGER, typed comparisons): inputs it would refuse with an
 * error of its own (a 500) must be refused before, alike, as 400 `validation.invalid_input` naming
 * the field, with one `api error` record and nothing written.
 */
describe('hostile input gets the same answer from SQLite and PostgreSQL', async () => {
  const available = (await Promise.all(BACKENDS.map((b) => b.available()))).every(Boolean);
  const it = (name: string, fn: () => Promise<void>) =>
    test(name, { skip: !available && 'PostgreSQL unavailable' }, fn);
  const sides: Side[] = [];
  before(async () => {
    if (!available) return;
    for (const backend of BACKENDS) {
      const t = await backend.startNode();
      const [admin, viewer] = await Promise.all([t.token('admin'), t.token('viewer')]);
      const post = async <T>(path: string, body: unknown) => {
        const res = await t.acp(path, admin, body);
        assert.equal(res.status, 200, `${backend.name} ${path}`);
        return (await res.json()) as T;
      };
      const flow = await post<FlowRecord>('/acp/traffic-flows/create', { slug: 'parity', name: 'Parity' });
      const stream = await post<StreamRecord>('/acp/streams/create', {
        flow_id: flow.id,
        name: 'one',
        type: 'regular',
        target_url: 'https://one.test/',
      });
      // A second flow and stream, so that a list has a next page.
      await post('/acp/traffic-flows/create', { slug: 'parity-2', name: 'Parity 2' });
      await post('/acp/streams/create', {
        flow_id: flow.id,
        name: 'two',
        type: 'regular',
        position: 1,
        target_url: 'https://two.test/',
      });
      sides.push({ backend: backend.name, t, admin, viewer, flow, stream });
    }
  });
  after(async () => {
    for (const s of sides) await s.t.close();
  });

  /** Sends the same request to every backend; the answers must agree, and that one is returned. */
  async function ask(
    path: string,
    body: (s: Side) => unknown,
    as: 'admin' | 'viewer' = 'admin',
  ): Promise<Answer> {
    const answers: Answer[] = [];
    for (const s of sides) {
      const res = await s.t.acp(path, s[as], body(s));
      const json = (await res.json()) as {
        error?: { code: string; message: string; details?: { path: string }[] };
      };
      answers.push({
        status: res.status,
        code: json.error?.code ?? null,
        message: json.error?.message ?? null,
        paths: Array.isArray(json.error?.details) ? json.error.details.map((d) => d.path) : [],
        records: s.t.logs.apiErrors(res.headers.get('x-request-id')!).length,
      });
    }
    assert.deepEqual(answers[1], answers[0], `${path}: ${sides.map((s) => s.backend).join(' vs ')}`);
    return answers[0]!;
  }

  /** Both backends refuse it as 400 validation.invalid_input, naming `field`, with one record. */
  async function refused(path: string, body: (s: Side) => unknown, field: string, as?: 'admin' | 'viewer') {
    const a = await ask(path, body, as);
    assert.equal(a.status, 400, `${path} ${JSON.stringify(body(sides[0]!))}: ${a.message}`);
    assert.equal(a.code, 'validation.invalid_input');
    assert.ok(a.message?.includes(field), `message names ${field}: ${a.message}`);
    assert.ok(a.paths.includes(field), `details name ${field}: ${a.paths}`);
    assert.equal(a.records, 1, 'one api error record');
  }

  /** The flow and stream fixtures are as they were, on every backend. */
  async function unchanged() {
    for (const s of sides) {
      assert.deepEqual(
        { ...(await s.t.node.storage.flows.get(s.flow.id)), clicks: 0, no_match: 0 },
        { ...s.flow, clicks: 0, no_match: 0 },
      );
      assert.deepEqual((await s.t.node.storage.streams.get(s.stream.id))?.version, s.stream.version);
      const flows = await s.t.node.storage.flows.list({
        filter: {},
        sort: { by: 'created_at', order: 'asc' },
        limit: 10,
      });
      assert.equal(flows.total, 2, `${s.backend}: no flow half-written`);
    }
  }

  it('a forged cursor with a number for a text sort column is 400 on both backends', async () => {
    await refused(
      '/acp/traffic-flows/list',
      () => ({
        sort: { by: 'slug', order: 'asc' },
        cursor: cursor('/acp/traffic-flows/list', ['slug', 'asc', 5, ZERO_ID]),
      }),
      '/cursor',
      'viewer',
    );
    await refused(
      '/acp/streams/list',
      () => ({
        sort: { by: 'name', order: 'asc' },
        cursor: cursor('/acp/streams/list', ['name', 'asc', 7, ZERO_ID]),
      }),
      '/cursor',
      'viewer',
    );
  });

  it('a forged cursor with text for an integer or timestamp sort column is 400 on both backends', async () => {
    for (const [path, by] of [
      ['/acp/traffic-flows/list', 'created_at'],
      ['/acp/traffic-flows/list', 'clicks'],
      ['/acp/streams/list', 'position'],
      ['/acp/streams/list', 'hits'],
      ['/acp/streams/list', 'created_at'],
    ] as const) {
      await refused(
        path,
        () => ({ sort: { by, order: 'asc' }, cursor: cursor(path, [by, 'asc', 'nope', ZERO_ID]) }),
        '/cursor',
        'viewer',
      );
    }
  });

  it('a forged cursor with 1e23, a fraction or a position beyond int4 is 400 on both backends', async () => {
    for (const [path, by, value] of [
      ['/acp/traffic-flows/list', 'clicks', 1e23],
      ['/acp/traffic-flows/list', 'clicks', 1.5],
      ['/acp/streams/list', 'hits', 2 ** 63],
      ['/acp/streams/list', 'position', 2 ** 31],
      ['/acp/streams/list', 'position', -(2 ** 31) - 1],
    ] as const) {
      await refused(
        path,
        () => ({ sort: { by, order: 'desc' }, cursor: cursor(path, [by, 'desc', value, ZERO_ID]) }),
        '/cursor',
        'viewer',
      );
    }
  });

  it('a forged cursor with U+0000 in its sort value or its id is 400 on both backends', async () => {
    await refused(
      '/acp/traffic-flows/list',
      () => ({
        sort: { by: 'slug', order: 'asc' },
        cursor: cursor('/acp/traffic-flows/list', ['slug', 'asc', 'a\u0000', ZERO_ID]),
      }),
      '/cursor',
      'viewer',
    );
    await refused(
      '/acp/streams/list',
      () => ({
        sort: { by: 'name', order: 'asc' },
        cursor: cursor('/acp/streams/list', ['name', 'asc', 'a', 'x\u0000y']),
      }),
      '/cursor',
      'viewer',
    );
  });

  it('a real next_cursor still walks every row on both backends', async () => {
    for (const s of sides) {
      const seen: string[] = [];
      let next: string | null = null;
      do {
        const res = await s.t.acp('/acp/streams/list', s.viewer, {
          sort: { by: 'position', order: 'asc' },
          limit: 1,
          ...(next ? { cursor: next } : {}),
        });
        assert.equal(res.status, 200);
        const page = (await res.json()) as { items: StreamRecord[]; next_cursor: string | null };
        seen.push(...page.items.map((i) => i.name));
        next = page.next_cursor;
      } while (next);
      assert.deepEqual(seen, ['one', 'two'], s.backend);
    }
  });

  it('U+0000 in a flow or stream name, slug or target is 400 on both backends, and nothing is written', async () => {
    await refused('/acp/traffic-flows/create', () => ({ slug: 'nul', name: 'a\u0000b' }), '/name');
    await refused('/acp/traffic-flows/create', () => ({ slug: 'nul\u0000', name: 'n' }), '/slug');
    await refused('/acp/traffic-flows/update', (s) => ({ id: s.flow.id, name: '\u0000' }), '/name');
    await refused(
      '/acp/streams/create',
      (s) => ({ flow_id: s.flow.id, name: 'x\u0000', type: 'regular', target_url: 'https://a.test/' }),
      '/name',
    );
    await refused(
      '/acp/streams/create',
      (s) => ({ flow_id: s.flow.id, name: 'x', type: 'regular', target_url: 'https://a.test/\u0000' }),
      '/target_url',
    );
    await refused(
      '/acp/streams/update',
      (s) => ({ id: s.stream.id, target_url: 'https://a.test/?q=\u0000' }),
      '/target_url',
    );
    await refused('/acp/streams/update', (s) => ({ id: s.stream.id, name: 'n\u0000' }), '/name');
    await unchanged();
  });

  it('a version of 2^31 or more, negative or fractional on update is 400 on both backends', async () => {
    for (const version of [2 ** 31, 2 ** 53, 1e23, -1, 0, 1.5]) {
      await refused('/acp/traffic-flows/update', (s) => ({ id: s.flow.id, version, name: 'v' }), '/version');
      await refused('/acp/streams/update', (s) => ({ id: s.stream.id, version, name: 'v' }), '/version');
    }
    // The int4 edge is a version like any other: stale, so a conflict on both.
    const edge = await ask('/acp/traffic-flows/update', (s) => ({
      id: s.flow.id,
      version: 2 ** 31 - 1,
      name: 'v',
    }));
    assert.equal(edge.status, 409);
    assert.equal(edge.code, 'resource.conflict');
    await unchanged();
  });

  it('positions, weights and limits out of range are 400 on both backends', async () => {
    for (const [field, value] of [
      ['position', 2 ** 31],
      ['position', -1],
      ['weight', 1e23],
      ['weight', 0.5],
    ] as const) {
      await refused('/acp/streams/update', (s) => ({ id: s.stream.id, [field]: value }), `/${field}`);
    }
    for (const limit of [1e23, 2 ** 31, 0, 501]) {
      await refused('/acp/streams/list', () => ({ limit }), '/limit', 'viewer');
      await refused('/acp/traffic-flows/list', () => ({ limit }), '/limit', 'viewer');
    }
    await unchanged();
  });

  it('control characters in any string the ACP takes are 400 naming the field on both backends', async () => {
    for (const bad of ['a\u0000', 'a\nb', 'a\u001b[31m', 'a\u007f', 'a\u0085']) {
      await refused('/acp/traffic-flows/create', () => ({ slug: 'ctl', name: bad }), '/name');
      await refused('/acp/cron-tasks/list', () => ({ filter: { name: bad } }), '/filter/name', 'viewer');
      await refused('/acp/cron-tasks/run', () => ({ name: bad }), '/name');
      await refused('/acp/http-client/recent-failures', () => ({ client: bad }), '/client');
      await refused('/acp/http-client/recent-failures', () => ({ task: bad }), '/task');
    }
    await unchanged();
  });

  it('any cursor at all gets the same answer on both backends, never a 5xx', async () => {
    const sortKeys = {
      '/acp/traffic-flows/list': ['created_at', 'slug', 'name', 'clicks'],
      '/acp/streams/list': ['position', 'created_at', 'name', 'hits'],
    } as const;
    const sortValue = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.string({ unit: 'binary', maxLength: 24 }),
      fc.integer(),
      fc.double(),
      fc.constantFrom(2 ** 31, 2 ** 63, 1e23, -0, '\u0000', '0000-01-01T00:00:00.000Z'),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
    );
    const id = fc.oneof(
      fc.uuid(),
      fc.string({ unit: 'binary', maxLength: 24 }),
      fc.jsonValue({ maxDepth: 1 }),
    );
    // Mostly cursors of the very query (so the sort value and id are what is judged), some of
    // another sort, some not cursors at all.
    const shape = fc.oneof(
      { weight: 6, arbitrary: fc.tuple(sortValue, id).map(([v, i]) => ({ kind: 'same' as const, v, i })) },
      {
        weight: 1,
        arbitrary: fc
          .tuple(fc.constantFrom('slug', 'hits', 'x'), fc.constantFrom('asc', 'desc'), sortValue, id)
          .map(([b, o, v, i]) => ({ kind: 'other' as const, parts: [b, o, v, i] })),
      },
      {
        weight: 1,
        arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 64 }).map((raw) => ({
          kind: 'raw' as const,
          raw,
        })),
      },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/acp/traffic-flows/list', '/acp/streams/list' as const),
        fc.nat(3),
        fc.constantFrom('asc', 'desc'),
        shape,
        async (path, k, order, c) => {
          const by = sortKeys[path][k]!;
          const value =
            c.kind === 'same'
              ? cursor(path, [by, order, c.v, c.i])
              : c.kind === 'other'
                ? cursor(path, c.parts)
                : c.raw;
          const a = await ask(path, () => ({ sort: { by, order }, cursor: value }), 'viewer');
          assert.ok(a.status === 200 || a.status === 400, `${path} ${by} ${value}: ${a.status} ${a.message}`);
          if (a.status === 400) assert.equal(a.code, 'validation.invalid_input');
        },
      ),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });

  it('any body on the flow and stream routes gets the same answer on both backends, never a 5xx', async () => {
    const routes = [
      '/acp/traffic-flows/create',
      '/acp/traffic-flows/update',
      '/acp/traffic-flows/list',
      '/acp/streams/create',
      '/acp/streams/update',
      '/acp/streams/list',
    ];
    const FLOW = '@flow';
    const STREAM = '@stream';
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 32 }),
      fc.constantFrom('\u0000', 'a\u0000b', 'https://x.test/\u0000', 'https://x.test/{flow}', 'ok'),
    );
    const number = fc.oneof(
      fc.integer(),
      fc.double(),
      fc.constantFrom(2 ** 31, 2 ** 31 - 1, -(2 ** 31) - 1, 2 ** 53, 1e23, -0),
    );
    const value = fc.oneof(text, number, fc.jsonValue({ maxDepth: 2 }), fc.constantFrom(FLOW, STREAM));
    const fields = fc.record(
      {
        id: fc.constantFrom(FLOW, STREAM, ZERO_ID),
        flow_id: fc.constantFrom(FLOW, ZERO_ID),
        version: number,
        slug: fc.oneof(text, fc.constantFrom('parity-x', 'parity')),
        name: text,
        type: fc.constantFrom('regular', 'forced', 'default', 'x'),
        position: number,
        weight: number,
        target_url: text,
        limit: number,
        other: value,
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), fields, async (path, body) => {
        const a = await ask(path, (s) =>
          JSON.parse(
            JSON.stringify(body, (_k, v) => (v === FLOW ? s.flow.id : v === STREAM ? s.stream.id : v)),
          ),
        );
        assert.ok(a.status < 500, `${path} ${JSON.stringify(body)}: ${a.status} ${a.message}`);
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });
});
