import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compileFlowSliced } from '../../src/routing/compiled-flow.ts';
import { buildTarget, compileFlow, decide } from '../../src/routing/index.ts';
import type { TimeSlice } from '../../src/time/index.ts';
import { seeded } from '../helpers/random.ts';
import { flowRecord, macroValues, streamRecord, visitor } from '../helpers/records.ts';

const flow = flowRecord;
const stream = streamRecord;

const never = () => {
  throw new Error('random() must not be called for position rotation');
};

describe('routing decision', () => {
  test('forced streams win, in position order, first whose filters pass', () => {
    const f = compileFlow(flow(), [
      stream({ id: 'reg', type: 'regular', position: 0 }),
      stream({ id: 'forced-de', type: 'forced', position: 2, filters: { countries_include: ['DE'] } }),
      stream({ id: 'forced-any', type: 'forced', position: 5 }),
      stream({ id: 'forced-first-fr', type: 'forced', position: 1, filters: { countries_include: ['FR'] } }),
    ]);
    assert.equal(decide(f, visitor('DE'), never)?.id, 'forced-de');
    assert.equal(decide(f, visitor('FR'), never)?.id, 'forced-first-fr');
    assert.equal(decide(f, visitor('US'), never)?.id, 'forced-any');
    assert.equal(decide(f, visitor(undefined), never)?.id, 'forced-any');
  });

  test('regular by position: the first that passes; then the default', () => {
    const f = compileFlow(flow(), [
      stream({ id: 'b', position: 2 }),
      stream({ id: 'a', position: 1, filters: { countries_exclude: ['US'] } }),
      stream({ id: 'def', type: 'default', position: 0 }),
    ]);
    assert.equal(decide(f, visitor('DE'), never)?.id, 'a');
    assert.equal(decide(f, visitor('US'), never)?.id, 'b');
    const onlyDefault = compileFlow(flow(), [
      stream({ id: 'us', filters: { countries_include: ['US'] } }),
      stream({ id: 'def', type: 'default' }),
    ]);
    assert.equal(decide(onlyDefault, visitor('DE'), never)?.id, 'def');
  });

  test('an unknown country passes no include filter and every exclude filter', () => {
    const f = compileFlow(flow(), [
      stream({ id: 'inc', position: 0, filters: { countries_include: ['DE'] } }),
      stream({ id: 'exc', position: 1, filters: { countries_exclude: ['DE', 'FR'] } }),
    ]);
    assert.equal(decide(f, visitor(undefined), never)?.id, 'exc');
    assert.equal(decide(f, visitor('FR'), never), undefined);
  });

  test('paused streams are never chosen; no stream at all is no match', () => {
    const f = compileFlow(flow(), [
      stream({ id: 'p', status: 'paused' }),
      stream({ id: 'd', type: 'default', status: 'paused' }),
    ]);
    assert.equal(decide(f, visitor('DE'), never), undefined);
    assert.equal(decide(compileFlow(flow(), []), visitor('DE'), never), undefined);
  });

  test('weighted rotation follows the weights (chi-square over 10,000 seeded decisions)', () => {
    const weights = { a: 1, b: 2, c: 7, zero: 0 };
    const f = compileFlow(flow({ rotation: 'weight' }), [
      ...Object.entries(weights).map(([id, weight], i) => stream({ id, weight, position: i })),
      stream({ id: 'filtered', weight: 50, filters: { countries_include: ['JP'] } }),
    ]);
    const random = seeded(42);
    const counts: Record<string, number> = {};
    const N = 10_000;
    for (let i = 0; i < N; i++) {
      const id = decide(f, visitor('DE'), random)!.id;
      counts[id] = (counts[id] ?? 0) + 1;
    }
    assert.equal(counts.zero, undefined, 'weight 0 is never chosen');
    assert.equal(counts.filtered, undefined, 'filtered out streams carry no weight');
    const total = 10;
    let chi2 = 0;
    for (const [id, w] of Object.entries(weights)) {
      if (w === 0) continue;
      const expected = (N * w) / total;
      chi2 += ((counts[id] ?? 0) - expected) ** 2 / expected;
    }
    // 2 degrees of freedom: the 99.9th percentile of chi-square is 13.8.
    assert.ok(chi2 < 13.8, `chi2 = ${chi2}, counts ${JSON.stringify(counts)}`);
  });

  test('weighted rotation falls back to the default when every regular stream is filtered out', () => {
    const f = compileFlow(flow({ rotation: 'weight' }), [
      stream({ id: 'jp', filters: { countries_include: ['JP'] } }),
      stream({ id: 'def', type: 'default' }),
    ]);
    assert.equal(decide(f, visitor('DE'), seeded(1))?.id, 'def');
  });
});

describe('target URL macros', () => {
  test('are substituted and URL-encoded; literals stay as written', () => {
    const f = compileFlow(flow({ slug: 'sum-mer' }), [
      stream({
        id: 'S1',
        target_url: 'https://x.test/{flow}/?c={country}&s={stream}&r={request_id}&q=a%20b',
      }),
    ]);
    const s = decide(f, visitor('DE'), never)!;
    assert.equal(
      buildTarget(s, macroValues({ country: 'DE', flow: 'sum-mer', request_id: 'a b&c' })),
      'https://x.test/sum-mer/?c=DE&s=S1&r=a%20b%26c&q=a%20b',
    );
    assert.equal(
      buildTarget(s, macroValues({ flow: 'sum-mer', request_id: 'r' })),
      'https://x.test/sum-mer/?c=&s=S1&r=r&q=a%20b',
    );
  });

  test('a macro value cannot add a line break or leave its component: it is percent-encoded', () => {
    const s = decide(
      compileFlow(flow(), [stream({ target_url: 'https://x.test/{request_id}?r={request_id}' })]),
      visitor('DE'),
      never,
    )!;
    assert.equal(
      buildTarget(s, macroValues({ country: 'DE', request_id: '\r\nset-cookie: a=b/../?#' })),
      'https://x.test/%0D%0Aset-cookie%3A%20a%3Db%2F..%2F%3F%23?r=%0D%0Aset-cookie%3A%20a%3Db%2F..%2F%3F%23',
    );
  });

  test("the flow's slug and the stream's id are written in when the flow is compiled, not per click", () => {
    const f = compileFlow(flow({ slug: 'sum-mer' }), [
      stream({ id: 'S1', target_url: 'https://x.test/{flow}/?s={stream}&p={param:flow}&c={country}' }),
    ]);
    const s = decide(f, visitor('DE'), never)!;
    // Only the per-click macros are left to fill; {param:flow} is the query parameter, not the slug.
    assert.equal(s.target, 'https://x.test/sum-mer/?s=S1&p={param:flow}&c={country}');
    assert.equal(s.marks.length, 2 * 3);
    assert.equal(
      buildTarget(s, macroValues({ country: 'FR', query: { flow: 'q' } })),
      'https://x.test/sum-mer/?s=S1&p=q&c=FR',
    );
    const only = decide(
      compileFlow(flow({ slug: 'a' }), [
        stream({ id: 'S2', target_url: 'https://x.test/{flow}?s={stream}' }),
      ]),
      visitor('DE'),
      never,
    )!;
    assert.equal(only.marks.length, 0, 'nothing left to fill: the target is the location');
    assert.equal(only.target, 'https://x.test/a?s=S2');
  });

  test('a URL without macros is returned as is', () => {
    const s = decide(
      compileFlow(flow(), [stream({ target_url: 'https://plain.test/a?b=c' })]),
      visitor('DE'),
      never,
    )!;
    assert.equal(buildTarget(s, macroValues({ country: 'DE' })), 'https://plain.test/a?b=c');
  });

  test('a target stored raw is normalised at compile, or left out of routing when it cannot be sent', () => {
    const f = compileFlow(flow(), [
      stream({ id: 'crlf', position: 0, target_url: 'https://x.test/a\r\nset-cookie: a=b' }),
      stream({ id: 'host-macro', position: 1, target_url: 'https://example.com{request_id}/' }),
      stream({ id: 'idn', position: 2, target_url: 'https://例え.jp/パス?r={request_id}' }),
    ]);
    assert.deepEqual(
      f.refused.map((r) => r.id),
      ['crlf', 'host-macro'],
    );
    const s = decide(f, visitor('DE'), never)!;
    assert.equal(s.id, 'idn');
    assert.equal(
      buildTarget(s, macroValues({ country: 'DE', request_id: '.evil.net' })),
      'https://xn--r8jz45g.jp/%E3%83%91%E3%82%B9?r=.evil.net',
    );
  });
});

describe('compiling a flow a rule at a time (docs/routing.md#rules)', () => {
  test('pauses before every rule of every active stream, and decides as the one-step compile does', async () => {
    let pauses = 0;
    const slice = {
      pause: async () => {
        pauses++;
      },
    } as unknown as TimeSlice;
    const ip = (values: string[]) => ({ field: 'ip', op: 'is' as const, values });
    const streams = [
      stream({
        id: 'a',
        position: 0,
        filters: { logic: 'or', rules: [ip(['10.0.0.0/8']), ip(['2001:db8::/32'])] },
      }),
      stream({
        id: 'b',
        position: 1,
        filters: { rules: [ip(['192.0.2.0/24']), ip(['0.0.0.0/0']), ip(['::/0'])] },
      }),
      stream({ id: 'paused', position: 2, status: 'paused', filters: { rules: [ip(['0.0.0.0/0'])] } }),
      stream({ id: 'def', type: 'default' }),
    ];
    const sliced = await compileFlowSliced(flow(), streams, () => undefined, slice);
    assert.ok(pauses >= 5, `${pauses} pauses for the 5 rules of active streams`);
    const whole = compileFlow(flow(), streams);
    for (const client of [
      '10.1.2.3',
      '2001:db8::9',
      '192.0.2.7',
      '198.51.100.1',
      '::ffff:10.0.0.1',
      'fe80::1',
    ])
      assert.equal(
        decide(sliced, visitor('DE', { client }), never)?.id,
        decide(whole, visitor('DE', { client }), never)?.id,
        client,
      );
    assert.equal(decide(sliced, visitor('DE', { client: '192.0.2.7' }), never)?.id, 'b');
  });
});
