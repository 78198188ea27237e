import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from 'node:test';
import {
  GeoCountry,
  isCountryCode,
  newRequestId,
  normalizeCountry,
  requestIdFrom,
} from '../../src/http/index.ts';

/** RFC 9562: 8-4-4-4-12 lower-case hex, version nibble 4 (random), variant bits 10. */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('request ids', () => {
  test('a new id is a random (version 4) UUID, and 100,000 of them are distinct', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 100_000; i++) {
      const id = newRequestId();
      if (i % 997 === 0) assert.match(id, UUID_V4);
      ids.add(id);
    }
    assert.equal(ids.size, 100_000);
  });

  test('an inbound id in the alphabet is kept; anything else gets a new one', () => {
    assert.equal(requestIdFrom(req({ 'x-request-id': 'abc.DEF:1-2_3' })), 'abc.DEF:1-2_3');
    for (const bad of ['', 'a b', 'a/b', 'x'.repeat(129)])
      assert.match(requestIdFrom(req({ 'x-request-id': bad })), UUID_V4, JSON.stringify(bad));
    assert.match(requestIdFrom(req({})), UUID_V4);
  });
});

describe('country codes', () => {
  const cases: [string, string | undefined][] = [
    ['DE', 'DE'],
    ['de', 'DE'],
    ['dE', 'DE'],
    [' us ', 'US'],
    ['USA', undefined],
    ['U', undefined],
    ['1A', undefined],
    ['@Z', undefined],
    ['[Z', undefined],
    ['éa', undefined],
    ['XX', undefined], // Cloudflare's "unknown"
    ['t1', undefined], // Tor, lower case
    ['zz', undefined],
    ['UK', undefined], // not assigned: GB is
    ['eu', undefined],
    ['QM', undefined], // user-assigned
    ['XA', undefined], // ICU's pseudo-region
    ['su', undefined], // withdrawn (the USSR)
    ['IC', undefined], // reserved (the Canary Islands are ES)
    ['xk', 'XK'], // Kosovo, as GeoIP databases send it
  ];
  for (const [raw, expected] of cases) {
    test(`${JSON.stringify(raw)} → ${expected}`, () => assert.equal(normalizeCountry(raw), expected));
  }

  test('assigned ISO 3166-1 alpha-2 codes only, upper case', () => {
    for (const c of ['DE', 'US', 'GB', 'JP', 'BR', 'XK']) assert.equal(isCountryCode(c), true, c);
    for (const c of ['de', 'XX', 'ZZ', 'T1', 'A1', 'O1', 'UK', 'EU', 'QQ', 'DEU', 'D', ''])
      assert.equal(isCountryCode(c), false, c);
  });

  test('every pair of ASCII characters: a code exactly when both are letters and they name a country', () => {
    let countries = 0;
    for (let a = 32; a < 127; a++) {
      for (let b = 32; b < 127; b++) {
        const raw = String.fromCharCode(a, b);
        const expected = /^[A-Za-z]{2}$/.test(raw) && isCountryCode(raw.toUpperCase());
        if (expected && raw === raw.toUpperCase()) countries++;
        assert.equal(normalizeCountry(raw), expected ? raw.toUpperCase() : undefined, raw);
      }
    }
    // ISO 3166-1 assigns 249 codes; with XK, 250.
    assert.equal(countries, 250);
  });

  test('the built-in database: public addresses have a code, private and malformed ones none', () => {
    const geo = GeoCountry.builtin();
    assert.equal(geo.lookup('8.8.8.8'), 'US');
    assert.equal(geo.lookup('::ffff:8.8.8.8'), 'US');
    assert.equal(geo.lookup('127.0.0.1'), undefined);
    assert.equal(geo.lookup('10.1.2.3'), undefined);
    assert.equal(geo.lookup('not an address'), undefined);
  });

  test('the built-in database: no address of a private, documentation or reserved range has a country', () => {
    const geo = GeoCountry.builtin();
    // The database itself places each of these in a country (a LAN in Australia, 2001:db8:: in Japan).
    for (const address of [
      '192.168.1.1',
      '172.16.1.1',
      '198.51.100.7',
      '203.0.113.9',
      '2001:db8::1',
      '::ffff:192.168.0.9',
      '::192.168.1.1',
      '2001:2::1',
      '2001:10::1',
    ])
      assert.equal(geo.lookup(address), undefined, address);
    // Their public neighbours keep theirs.
    for (const address of ['172.32.0.1', '203.0.114.1', '2001:db9::1', '1.1.1.1'])
      assert.notEqual(geo.lookup(address), undefined, address);
    assert.equal(geo.lookup(undefined), undefined);
  });
});
