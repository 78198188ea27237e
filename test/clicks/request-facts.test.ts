import assert from 'node:assert/strict';
import { BlockList } from 'node:net';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  canonicalAddress,
  ipPrefix,
  preferredLanguage,
  referrerHost,
  subValue,
} from '../../src/clicks/index.ts';
import { SUB_ID_MAX_LENGTH } from '../../src/storage/index.ts';

describe('language: the preferred Accept-Language entry', () => {
  const cases: [string | undefined, string | null][] = [
    ['de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7', 'de'],
    ['en-US', 'en'],
    ['FR-ca', 'fr'],
    ['en;q=0.5, de;q=0.8, fr;q=0.6', 'de'],
    ['en;q=0.8, de;q=0.8', 'en'], // equal q: the first
    ['*;q=1, es;q=0.2', 'es'],
    ['*', null],
    ['en;q=0, *;q=0.1', null],
    ['', null],
    [undefined, null],
    ['zh-Hant-TW', 'zh'],
    ['pt_BR', 'pt'],
    ['  ja ;  q=1 , en;q=0.1', 'ja'],
    ['en;Q=0.3,it;q=0.4', 'it'],
    ['x-klingon, i-default, en;q=0.1', 'en'], // singletons are not languages
    ['e1, 12, en;q=0.2', 'en'],
    ['en;q=2, de;q=0.5', 'de'], // out of range: passed over
    ['en;q=abc, de;q=0.5', 'de'],
    ['en;q=0.1234, de;q=0.5', 'de'], // four decimals: not a qvalue
    ['en;level=1;q=0.9, ru;q=0.95', 'ru'],
    [',,,de,,', 'de'],
    ['abcdefghi, ab', 'ab'], // 9 letters: too long for a primary subtag
  ];
  for (const [header, expected] of cases) {
    test(`${JSON.stringify(header)} → ${expected}`, () => assert.equal(preferredLanguage(header), expected));
  }

  test('any header: null or 2–8 lower-case letters, never a throw', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (s) => {
        const lang = preferredLanguage(s);
        assert.ok(lang === null || /^[a-z]{2,8}$/.test(lang), `${JSON.stringify(s)} → ${lang}`);
      }),
      { numRuns: 3000 },
    );
  });
});

/** The definition: WHATWG URL parsing, http(s) only, a host of at most 253 characters. */
function reference(header: string): string | null {
  const url = URL.parse(header);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) return null;
  return url.hostname.length > 0 && url.hostname.length <= 253 ? url.hostname : null;
}

describe('referrer host', () => {
  const cases: [string | undefined, string | null][] = [
    ['https://www.Google.com/search?q=x', 'www.google.com'],
    ['http://facebook.com', 'facebook.com'],
    ['HTTPS://M.FACEBOOK.COM/', 'm.facebook.com'],
    ['https://user:pass@example.org:8443/path', 'example.org'],
    ['https://203.0.113.7/x', '203.0.113.7'],
    ['http://0x7f.1/', '127.0.0.1'],
    ['https://[2001:DB8::1]/', '[2001:db8::1]'],
    ['https://bücher.example/', 'xn--bcher-kva.example'],
    ['https://example.com.#frag', 'example.com.'],
    ['  https://spaces.example/ ', 'spaces.example'],
    ['android-app://com.google.android.gm/', null],
    ['ftp://files.example/', null],
    ['javascript:alert(1)', null],
    ['not a url', null],
    ['https://', null],
    ['http://999.1.1.1/', null],
    ['https://exa mple.com/', null],
    ['', null],
    [undefined, null],
  ];
  for (const [header, expected] of cases) {
    test(`${JSON.stringify(header)} → ${expected}`, () => assert.equal(referrerHost(header), expected));
  }

  test('the fast path agrees with the WHATWG URL parser on any input', () => {
    const hostish = fc.stringMatching(/^[A-Za-z0-9.\-:@[\]%_~]{0,30}$/);
    const header = fc.oneof(
      fc.webUrl({ withQueryParameters: true, withFragments: true }),
      fc
        .tuple(
          fc.constantFrom('http://', 'https://', 'HTTP://', 'hTTps://', 'http:/', 'ws://', ''),
          hostish,
          fc.string(),
        )
        .map(([a, b, c]) => a + b + c),
      fc.string(),
    );
    fc.assert(
      fc.property(header, (h) => assert.equal(referrerHost(h), reference(h), JSON.stringify(h))),
      { numRuns: 20_000 },
    );
  });
});

describe('sub-ids', () => {
  test('absent or empty: null; repeated: the first value', () => {
    assert.equal(subValue(undefined), null);
    assert.equal(subValue(''), null);
    assert.equal(subValue(['a', 'b']), 'a');
    assert.equal(subValue([]), null);
    assert.equal(subValue('abc_123-x'), 'abc_123-x');
  });

  test('cut at 256 characters (code points), never between the halves of a surrogate pair', () => {
    assert.equal(subValue('x'.repeat(300)), 'x'.repeat(SUB_ID_MAX_LENGTH));
    assert.equal(subValue('x'.repeat(256)), 'x'.repeat(256));
    assert.equal(subValue(`${'x'.repeat(255)}😀tail`), `${'x'.repeat(255)}😀`);
    assert.equal(subValue(`${'x'.repeat(256)}😀tail`), 'x'.repeat(256));
    // 300 emoji are 600 UTF-16 units: 256 of them are kept, not 128.
    assert.equal(subValue('😀'.repeat(300)), '😀'.repeat(256));
    // A lone high surrogate is one character (and then replaced).
    assert.equal(subValue(`${'x'.repeat(255)}\ud800tail`), `${'x'.repeat(255)}\ufffd`);
  });

  test('control characters removed and lone surrogates replaced: every value can be stored and encoded', () => {
    assert.equal(subValue('a\u0000b\nc\u0085d'), 'abcd');
    assert.equal(subValue('\u0000\u0001'), null);
    assert.equal(subValue('a\ud800b'), 'a\ufffdb');
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (s) => {
        const v = subValue(s);
        if (v === null) return;
        assert.ok([...v].length <= SUB_ID_MAX_LENGTH);
        assert.ok(v.isWellFormed());
        assert.ok(
          ![...v].some(
            (ch) => ch.charCodeAt(0) < 0x20 || (ch.charCodeAt(0) >= 0x7f && ch.charCodeAt(0) < 0xa0),
          ),
        );
        encodeURIComponent(v);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('IP prefix', () => {
  const cases: [string | undefined, string | null][] = [
    ['203.0.113.77', '203.0.113.0/24'],
    ['10.1.2.3', '10.1.2.0/24'],
    ['::ffff:203.0.113.77', '203.0.113.0/24'],
    ['::FFFF:cb00:714d', '203.0.113.0/24'],
    ['0:0:0:0:0:ffff:203.0.113.77', '203.0.113.0/24'],
    ['2001:db8:1234:5678::1', '2001:db8:1234::/48'],
    ['2001:0db8:0000:ffff:1:2:3:4', '2001:db8::/48'],
    ['2001:0:0:1::', '2001::/48'],
    ['0:0:1::', '0:0:1::/48'],
    ['0:db8:1::', '0:db8:1::/48'],
    ['::1', '::/48'],
    ['::', '::/48'],
    ['fe80::1%eth0', 'fe80::/48'],
    ['', null],
    [undefined, null],
    ['not-an-ip', null],
    ['1.2.3', null],
    ['1.2.3.256', null],
    ['2001:db8::1::2', null],
  ];
  for (const [address, expected] of cases) {
    test(`${address} → ${expected}`, () => assert.equal(ipPrefix(address), expected));
  }

  test('any IPv6 address: the prefix contains it and is in RFC 5952 form', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }), (groups) => {
        if (groups.slice(0, 6).join() === '0,0,0,0,0,65535') return; // IPv4-mapped: its own case
        const address = groups.map((g) => g.toString(16)).join(':');
        const prefix = ipPrefix(address)!;
        const [net, bits] = prefix.split('/');
        assert.equal(bits, '48');
        const list = new BlockList();
        list.addSubnet(net!, 48, 'ipv6');
        assert.ok(list.check(address, 'ipv6'), `${address} in ${prefix}`);
        // The URL parser serialises IPv6 per RFC 5952.
        const canonical = new URL(
          `http://[${[...groups.slice(0, 3), 0, 0, 0, 0, 0].map((g) => g.toString(16)).join(':')}]/`,
        );
        assert.equal(`[${net}]`, canonical.hostname);
      }),
      { numRuns: 3000 },
    );
  });

  test('IPv4-mapped addresses are IPv4', () => {
    assert.equal(canonicalAddress('::ffff:198.51.100.1'), '198.51.100.1');
    assert.equal(canonicalAddress('::ffff:c633:6401'), '198.51.100.1');
    assert.equal(canonicalAddress('198.51.100.1'), '198.51.100.1');
    assert.equal(canonicalAddress('2001:db8::1'), '2001:db8::1');
  });
});

describe('values shared between clicks stay right past their pools', () => {
  // The pools are emptied when full (10,000 prefixes or hosts, 1,000 languages): more distinct
  // values than that must still come back exactly.
  test('20,000 distinct /24 prefixes, then the first ones again', () => {
    const address = (i: number) => `10.${i >> 8}.${i & 255}.7`;
    for (let i = 0; i < 20_000; i++) assert.equal(ipPrefix(address(i)), `10.${i >> 8}.${i & 255}.0/24`);
    for (let i = 0; i < 100; i++) assert.equal(ipPrefix(address(i)), `10.${i >> 8}.${i & 255}.0/24`);
  });

  test('12,000 distinct referrer hosts and 2,000 languages', () => {
    for (let i = 0; i < 12_000; i++) {
      assert.equal(referrerHost(`https://Site${i}.Example.com/x`), `site${i}.example.com`);
    }
    const tag = (i: number) =>
      String.fromCharCode(97 + (i % 26), 97 + ((i / 26) % 26), 97 + ((i / 676) % 26));
    for (let i = 0; i < 2_000; i++) assert.equal(preferredLanguage(`${tag(i).toUpperCase()}-x`), tag(i));
  });
});
