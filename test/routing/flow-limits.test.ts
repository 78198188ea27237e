import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import type { TestNode } from '../helpers/node.ts';
import { streamInput } from '../helpers/records.ts';
import { BACKENDS, nodeSuite } from '../storage/backends.ts';

/** `n` IPv4 blocks /16–/28, deterministic; as [start, end] too, for the naive answer. */
function blocks(n: number, seed: number): { text: string[]; ranges: [number, number][] } {
  let s = seed;
  const rand = (m: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return Math.floor((s / 4294967296) * m);
  };
  const text: string[] = [];
  const ranges: [number, number][] = [];
  for (let i = 0; i < n; i++) {
    const bits = 16 + rand(13);
    const size = 2 ** (32 - bits);
    const start = Math.floor((rand(223) * 2 ** 24 + rand(2 ** 24)) / size) * size + 2 ** 24;
    text.push(`${start >>> 24}.${(start >>> 16) & 255}.${(start >>> 8) & 255}.${start & 255}/${bits}`);
    ranges.push([start, start + size - 1]);
  }
  return { text, ranges };
}
const dotted = (a: number) => `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`;
/** Rules of 1,000 values (50 of them: the most a stream holds), any of which takes the click. */
const anyOf = (values: string[]) => ({
  logic: 'or',
  rules: Array.from({ length: Math.ceil(values.length / 1000) }, (_, i) => ({
    field: 'ip',
    op: 'is',
    values: values.slice(i * 1000, (i + 1) * 1000),
  })),
});

for (const backend of BACKENDS) {
  describe(`what a flow may hold, on ${backend.label} (docs/routing.md#limits)`, async () => {
    let t: TestNode;
    let admin: string;
    const { it } = await nodeSuite(backend, {
      onStart: async (node) => {
        t = node;
        admin = await t.token('admin');
      },
    });

    const call = async <T>(path: string, body: unknown, status = 200): Promise<T> => {
      const res = await t.acp(path, admin, body);
      const json = (await res.json()) as T;
      assert.equal(res.status, status, `${path}: ${JSON.stringify(json).slice(0, 500)}`);
      return json;
    };
    type Refusal = { error: { code: string; message: string; details: { path: string; message: string }[] } };
    const refused = async (path: string, body: unknown, at: string, message: RegExp) => {
      const r = await call<Refusal>(path, body, 400);
      assert.equal(r.error.code, 'validation.invalid_input');
      const detail = r.error.details.find((d) => d.path === at);
      assert.ok(detail, `a problem at ${at}: ${JSON.stringify(r.error.details).slice(0, 300)}`);
      assert.match(detail.message, message);
    };
    const flow = (slug: string) => call<FlowRecord>('/acp/traffic-flows/create', { slug, name: slug });
    const stream = (f: FlowRecord, extra: Record<string, unknown>, status = 200) =>
      call<StreamRecord>(
        '/acp/streams/create',
        { flow_id: f.id, name: 's', type: 'regular', target_url: 'https://x.test/', ...extra },
        status,
      );

    it('100,000 ip blocks (the limit) compile and route as trying every block does; one more is refused', async () => {
      const f = await flow('lim-ips');
      const a = blocks(50_000, 1);
      const b = blocks(50_000, 2);
      const sa = await stream(f, { position: 0, target_url: 'https://a.test/', filters: anyOf(a.text) });
      await stream(f, { position: 1, target_url: 'https://b.test/', filters: anyOf(b.text) });
      await stream(f, { type: 'default', target_url: 'https://default.test/' });

      // Addresses inside some of A's and B's blocks, at their ends, and anywhere.
      const clients: number[] = [];
      for (let i = 0; i < 40; i++) {
        const [start, end] = (i % 2 ? a : b).ranges[i * 1234]!;
        clients.push(start, end, end + 1, (start - 1) >>> 0, (i * 104_729 * 40_009) >>> 0);
      }
      for (const c of clients) {
        const inA = a.ranges.some(([s, e]) => s <= c && c <= e);
        const inB = b.ranges.some(([s, e]) => s <= c && c <= e);
        const expected = inA ? 'https://a.test/' : inB ? 'https://b.test/' : 'https://default.test/';
        const res = await fetch(`${t.url}/go/lim-ips`, {
          redirect: 'manual',
          headers: {
            'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0',
            'x-forwarded-for': dotted(c),
          },
        });
        assert.equal(res.headers.get('location'), expected, dotted(c));
      }

      // The simulator names a long rule's first values, not its thousand.
      const sim = await call<{ trace: { name: string; reason: string }[] }>('/acp/routing/simulate', {
        slug: 'lim-ips',
        ip: '0.0.0.1',
        user_agent: 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0',
      });
      const reason = sim.trace[0]!.reason;
      assert.match(
        reason,
        /^rules \(or\) fail — rule 1 \(ip is \["[^"]+"(,"[^"]+"){9}, … 990 more\]\): fail; rule 2/,
      );
      assert.ok(reason.length < 30_000, `${reason.length} characters`);

      // The flow holds 100,000 rule values: one more, in a new stream or an old one, is refused.
      const limit =
        /the flow's streams would hold 100,001 rule values, more than the 100,000 a flow may hold/;
      await refused(
        '/acp/streams/create',
        {
          flow_id: f.id,
          name: 'one more',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: { rules: [{ field: 'country', op: 'is', values: ['DE'] }] },
        },
        '/filters/rules',
        limit,
      );
      // Its own rules are not counted twice: the same stream rewritten with fewer values is fine.
      await call('/acp/streams/update', { id: sa.id, filters: anyOf(a.text.slice(0, 49_000)) });
      await stream(f, { filters: anyOf(a.text.slice(0, 1000)) });
      await refused(
        '/acp/streams/update',
        { id: sa.id, filters: anyOf(a.text.slice(0, 49_001)) },
        '/filters/rules',
        limit,
      );
    });

    it('a flow stored past the limit (by an older version) still routes; a write may take away, not add', async () => {
      const f = await flow('lim-past');
      const a = blocks(50_000, 3);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const s = await t.node.storage.streams.create(
          streamInput(f.id, {
            name: `s${i}`,
            position: i,
            filters: anyOf(a.text) as StreamRecord['filters'],
          }),
        );
        ids.push(s.id);
      }
      await stream(f, { type: 'default', target_url: 'https://default.test/' });
      const [start] = a.ranges[0]!;
      const res = await fetch(`${t.url}/go/lim-past`, {
        redirect: 'manual',
        headers: {
          'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0',
          'x-forwarded-for': dotted(start),
        },
      });
      assert.equal(res.headers.get('location'), 'https://example.com/');
      // 150,000 values: more is refused, fewer is taken (though still past the limit).
      await refused(
        '/acp/streams/create',
        {
          flow_id: f.id,
          name: 'more',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: anyOf(a.text.slice(0, 1)),
        },
        '/filters/rules',
        /150,001 rule values, more than the 100,000/,
      );
      await call('/acp/streams/update', { id: ids[0], filters: anyOf(a.text.slice(0, 10)) });
      await refused(
        '/acp/streams/update',
        { id: ids[0], filters: anyOf(a.text.slice(0, 11)) },
        '/filters/rules',
        /100,011/,
      );
    });

    it('a flow holds 1,000 streams; the 1,001st is refused naming the limit', async () => {
      const f = await flow('lim-streams');
      for (let i = 0; i < 999; i++)
        await t.node.storage.streams.create(streamInput(f.id, { name: `s${i}`, position: i }));
      await stream(f, {});
      await refused(
        '/acp/streams/create',
        { flow_id: f.id, name: 'one more', type: 'regular', target_url: 'https://x.test/' },
        '/flow_id',
        /the flow has 1,000 streams, the most a flow may hold/,
      );
    });

    it('lists past their limits are refused naming the limit: rules, values, countries, lengths', async () => {
      const f = await flow('lim-lists');
      const ip = (values: string[]) => ({ field: 'ip', op: 'is', values });
      await refused(
        '/acp/streams/create',
        {
          flow_id: f.id,
          name: 's',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: { rules: Array(51).fill(ip(['10.0.0.0/8'])) },
        },
        '/filters/rules',
        /more than 50 items/,
      );
      await refused(
        '/acp/streams/create',
        {
          flow_id: f.id,
          name: 's',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: { rules: [ip(Array(1001).fill('10.0.0.0/8'))] },
        },
        '/filters/rules/0/values',
        /more than 1000 items/,
      );
      await refused(
        '/acp/streams/create',
        {
          flow_id: f.id,
          name: 's',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: { countries_include: Array(301).fill('DE') },
        },
        '/filters/countries_include',
        /more than 300 items/,
      );
      await refused(
        '/acp/streams/create',
        {
          flow_id: f.id,
          name: 's',
          type: 'regular',
          target_url: 'https://x.test/',
          filters: { rules: [{ field: 'param:a', op: 'is', values: ['x'.repeat(257)] }] },
        },
        '/filters/rules/0/values/0',
        /more than 256 characters/,
      );
      await refused(
        '/acp/streams/create',
        { flow_id: f.id, name: 's', type: 'regular', target_url: `https://x.test/${'a'.repeat(2034)}` },
        '/target_url',
        /more than 2048 characters/,
      );
    });

    it('ip values with a zone id or an IPv4 part with a leading zero are refused, saying why', async () => {
      const f = await flow('lim-ip-text');
      const create = (value: string) => ({
        flow_id: f.id,
        name: 's',
        type: 'regular',
        target_url: 'https://x.test/',
        filters: { rules: [{ field: 'ip', op: 'is', values: ['10.0.0.0/8', value] }] },
      });
      await refused(
        '/acp/streams/create',
        create('fe80::1%eth0/64'),
        '/filters/rules/0/values/1',
        /zone id \(%eth0\)/,
      );
      await refused(
        '/acp/streams/create',
        create('010.1.1.1/8'),
        '/filters/rules/0/values/1',
        /leading zero/,
      );
      await refused(
        '/acp/streams/create',
        create('::ffff:010.1.1.1'),
        '/filters/rules/0/values/1',
        /leading zero/,
      );
    });
  });
}
