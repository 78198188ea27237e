import assert from 'node:assert/strict';
import { BlockList } from 'node:net';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { compileIpRanges, ipRangesMatch, ipValueProblem } from '../../src/routing/ip-ranges.ts';

const MAPPED = 0xffffn << 32n;
const ALL = (1n << 128n) - 1n;

/** An address as text: IPv4 dotted, or IPv6 in one of its forms (full, compressed, dotted tail). */
const v4Text = (a: number) => [a >>> 24, (a >>> 16) & 255, (a >>> 8) & 255, a & 255].join('.');
function v6Text(a: bigint, form: number): string {
  const groups = Array.from({ length: 8 }, (_, i) => Number((a >> BigInt(112 - 16 * i)) & 0xffffn));
  if (form === 1 && a >> 32n === 0xffffn) return `::ffff:${v4Text(Number(a & 0xffffffffn))}`;
  if (form === 2) return groups.map((g) => g.toString(16).padStart(4, '0').toUpperCase()).join(':');
  // The longest run of zero groups as `::` (RFC 5952's shape; any run would do).
  let best = -1;
  let len = 0;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > len) [best, len] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (len < 2) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + len).join(':')}`;
}

/** The naive matcher: every address in one 128-bit space (IPv4 as `::ffff:a.b.c.d`), every block tried. */
interface Block {
  text: string;
  start: bigint;
  end: bigint;
}
const block = (a: bigint, bits: number, text: string): Block => {
  const host = (1n << BigInt(128 - bits)) - 1n;
  return { text, start: a & (ALL ^ host), end: (a & (ALL ^ host)) | host };
};

/** Addresses near one another, so that blocks overlap, nest and touch. */
const bases = [0n, MAPPED, 0x20010db8n << 96n, 0xfe80n << 112n, (0x20010db8n << 96n) | (1n << 64n), ALL];
const v6Address = fc
  .tuple(fc.constantFrom(...bases), fc.bigInt({ min: 0n, max: (1n << 70n) - 1n }), fc.boolean())
  .map(([base, off, down]) => (down ? (base - off) & ALL : (base + off) & ALL));
const v4Address = fc.oneof(
  fc.integer({ min: 0, max: 0xffffffff }),
  fc.integer({ min: 0, max: 1 << 20 }).map((x) => (0x0a000000 + x) >>> 0),
);
/** Prefix lengths, the edges of the IPv4-mapped block more often than chance would pick them. */
const v6Bits = fc.oneof(fc.integer({ min: 0, max: 128 }), fc.constantFrom(0, 64, 95, 96, 97, 127, 128));
const ruleValue: fc.Arbitrary<Block> = fc.oneof(
  fc
    .tuple(v4Address, fc.integer({ min: 0, max: 32 }), fc.boolean())
    .map(([a, bits, bare]) =>
      block(MAPPED | BigInt(a), 96 + bits, bare && bits === 32 ? v4Text(a) : `${v4Text(a)}/${bits}`),
    ),
  fc
    .tuple(v6Address, v6Bits, fc.integer({ min: 0, max: 2 }))
    .map(([a, bits, form]) => block(a, bits, `${v6Text(a, form)}/${bits}`)),
);
/** A client: anywhere, or just inside or outside a block's ends. */
const clientOf = (blocks: Block[]) => {
  const anywhere = [v4Address.map((a) => MAPPED | BigInt(a)), v6Address];
  if (blocks.length === 0) return fc.oneof(...anywhere);
  const nearEnds = fc.tuple(fc.nat(), fc.constantFrom(-1n, 0n, 1n), fc.boolean()).map(([i, d, atEnd]) => {
    const b = blocks[i % blocks.length]!;
    return ((atEnd ? b.end : b.start) + d) & ALL;
  });
  return fc.oneof(...anywhere, nearEnds);
};
const clientText = (a: bigint, form: number) =>
  a >> 32n === 0xffffn && form === 0 ? v4Text(Number(a & 0xffffffffn)) : v6Text(a, form);

describe('ip rules: sorted, merged ranges matched by binary search', () => {
  test('match exactly what trying every block matches, IPv4 and IPv6 (and as Node’s BlockList did)', () => {
    fc.assert(
      fc.property(
        fc.array(ruleValue, { maxLength: 40 }).chain((blocks) =>
          fc.tuple(
            fc.constant(blocks),
            fc.array(fc.tuple(clientOf(blocks), fc.integer({ min: 0, max: 2 })), {
              minLength: 1,
              maxLength: 20,
            }),
          ),
        ),
        ([blocks, clients]) => {
          for (const b of blocks) assert.equal(ipValueProblem(b.text), undefined, b.text);
          const ranges = compileIpRanges(blocks.map((b) => b.text));
          const list = new BlockList();
          for (const b of blocks) {
            const [a, bits] = b.text.split('/') as [string, string];
            const v6 = a.includes(':');
            list.addSubnet(a, Number(bits ?? (v6 ? 128 : 32)), v6 ? 'ipv6' : 'ipv4');
          }
          for (const [a, form] of clients) {
            const text = clientText(a, form);
            const naive = blocks.some((b) => b.start <= a && a <= b.end);
            assert.equal(ipRangesMatch(ranges, text), naive, `${text} in ${blocks.map((b) => b.text)}`);
            const plain = text.startsWith('::ffff:') && text.includes('.') ? text.slice(7) : text;
            assert.equal(
              list.check(plain, plain.includes(':') ? 'ipv6' : 'ipv4'),
              naive,
              `BlockList: ${text}`,
            );
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  test('ranges are sorted, disjoint and merged (touching blocks become one range)', () => {
    const r = compileIpRanges([
      '10.0.1.0/24',
      '10.0.0.0/24',
      '10.0.0.128/25',
      '192.168.0.0/16',
      '::ffff:172.16.0.0/108',
      '2001:db8::/33',
      '2001:db8:8000::/33',
      '2001:db8::1',
      'fe80::1%eth0/64',
    ]);
    assert.deepEqual(
      [...r.v4].map((x) => v4Text(x)),
      ['10.0.0.0', '10.0.1.255', '172.16.0.0', '172.31.255.255', '192.168.0.0', '192.168.255.255'],
    );
    // 2001:db8::/33 and 2001:db8:8000::/33 are 2001:db8::/32; the zone id of a stored value is ignored.
    const words = [...r.v6].map((x) => x.toString(16));
    assert.deepEqual(words, [
      '20010db8',
      '0',
      '0',
      '0',
      '20010db8',
      'ffffffff',
      'ffffffff',
      'ffffffff',
      'fe800000',
      '0',
      '0',
      '0',
      'fe800000',
      '0',
      'ffffffff',
      'ffffffff',
    ]);
    // An IPv6 block that holds the IPv4-mapped addresses holds every IPv4 address.
    assert.deepEqual([...compileIpRanges(['::/0']).v4], [0, 0xffffffff]);
    assert.equal(ipRangesMatch(compileIpRanges(['::/64']), '203.0.113.9'), true);
    assert.equal(ipRangesMatch(compileIpRanges(['0.0.0.0/0']), '2001:db8::1'), false);
  });

  test('100,000 blocks (a flow’s limit) compile into the ranges a slow, obvious merge gives', () => {
    let seed = 3;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      return Math.floor((seed / 4294967296) * n);
    };
    const blocks: Block[] = [];
    for (let i = 0; i < 100_000; i++) {
      if (i % 5) {
        const a = (rand(224) * 2 ** 24 + rand(2 ** 24)) >>> 0;
        const bits = 12 + rand(21);
        blocks.push(block(MAPPED | BigInt(a), 96 + bits, `${v4Text(a)}/${bits}`));
      } else {
        const a =
          ((0x2000n + BigInt(rand(0x2000))) << 112n) | (BigInt(rand(2 ** 30)) << 80n) | BigInt(rand(2 ** 30));
        const bits = 16 + rand(113);
        blocks.push(block(a, bits, `${v6Text(a, 0)}/${bits}`));
      }
    }
    const ranges = compileIpRanges(blocks.map((b) => b.text));
    // The same ranges merged the slow way: BigInts sorted by start, each joined to the last when
    // it overlaps or touches it.
    const merged: [bigint, bigint][] = [];
    for (const b of [...blocks].sort((x, y) => (x.start < y.start ? -1 : x.start > y.start ? 1 : 0))) {
      const last = merged.at(-1);
      if (last !== undefined && b.start <= last[1] + 1n) last[1] = b.end > last[1] ? b.end : last[1];
      else merged.push([b.start, b.end]);
    }
    const word = (x: bigint, k: number) => Number((x >> BigInt(96 - 32 * k)) & 0xffffffffn);
    const expected4 = merged
      .filter(([x]) => x >> 32n === 0xffffn)
      .flatMap(([x, y]) => [word(x, 3), word(y, 3)]);
    const expected6 = merged
      .filter(([x]) => x >> 32n !== 0xffffn)
      .flatMap(([x, y]) => [0, 1, 2, 3].map((k) => word(x, k)).concat([0, 1, 2, 3].map((k) => word(y, k))));
    assert.deepEqual([...ranges.v4], expected4);
    assert.deepEqual([...ranges.v6], expected6);
    assert.ok(ranges.v4.length / 2 < 80_000, 'overlapping IPv4 blocks were merged');
    for (let i = 0; i < ranges.v4.length - 2; i += 2) assert.ok(ranges.v4[i + 2]! > ranges.v4[i + 1]! + 1);
  });

  test('values are refused with what is wrong: zone ids, IPv4 parts with leading zeros, malformed text', () => {
    const problem = (v: string) => ipValueProblem(v) ?? '(none)';
    assert.match(problem('fe80::1%eth0/64'), /has a zone id \(%eth0\): a rule matches addresses/);
    assert.match(problem('fe80::1%25eth0'), /zone id/);
    assert.match(problem('010.1.1.1/8'), /leading zero, which some tools read as octal/);
    assert.match(problem('10.01.1.1'), /leading zero/);
    assert.match(problem('::ffff:10.1.1.01'), /leading zero/);
    for (const bad of [
      '1.2.3',
      '1.2.3.4.5',
      '256.1.1.1',
      '1.2.3.4/',
      '1.2.3.4/+8',
      '1.2.3.4/8/9',
      ':1::',
      '1:::2',
      '1::2::3',
      '12345::',
      '1:2:3:4:5:6:7:8:9',
      '1::2:3:4:5:6:7:8',
      'g::1',
      '::1.2.3',
      '1.2.3.4::',
      '',
      '/8',
    ])
      assert.match(problem(bad), /is not an IPv4 or IPv6 address or CIDR block/, bad);
    assert.match(problem('10.0.0.0/33'), /prefix length outside 0–32/);
    assert.match(problem('::/129'), /prefix length outside 0–128/);
    assert.match(problem('::/1290'), /prefix length outside 0–128/);
    for (const good of [
      '0.0.0.0/0',
      '10.0.0.0',
      '::',
      '::/0',
      '1::',
      '::1',
      '::ffff:1.2.3.4/120',
      'FE80::1/10',
      '1:2:3:4:5:6:7:8',
      '1:2:3:4:5:6:1.2.3.4',
      '203.0.113.7/32',
      '10.0.0.0/08',
    ])
      assert.equal(problem(good), '(none)', good);
  });

  test('clients that are not addresses match nothing; a zone id on a client is ignored', () => {
    const r = compileIpRanges(['fe80::/10', '0.0.0.0/0']);
    for (const c of ['', 'unknown', '1.2.3', '::g', '010.1.1.1'])
      assert.equal(ipRangesMatch(r, c), undefined, c);
    assert.equal(ipRangesMatch(r, 'fe80::1%eth0'), true);
    assert.equal(ipRangesMatch(r, '::ffff:7f00:1'), true);
  });
});
