import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isCountryCode, targetUrlProblems } from '../../src/routing/index.ts';

describe('validation of routing input', () => {
  test('country codes: assigned ISO 3166-1 alpha-2 only', () => {
    for (const c of ['DE', 'US', 'GB', 'JP', 'BR', 'XK']) assert.equal(isCountryCode(c), true, c);
    for (const c of ['de', 'XX', 'ZZ', 'T1', 'A1', 'O1', 'UK', 'EU', 'QQ', 'DEU', 'D', ''])
      assert.equal(isCountryCode(c), false, c);
  });

  test('target URLs: absolute http(s), documented macros only', () => {
    for (const ok of [
      'https://example.com/',
      'http://example.com/p?q={country}',
      'https://{country}.example.com/{flow}/{stream}?r={request_id}',
    ]) {
      assert.deepEqual(targetUrlProblems(ok), [], ok);
    }
    for (const [bad, why] of [
      ['/relative', /absolute/],
      ['ftp://example.com/', /http or https/],
      ['javascript:alert(1)', /http or https/],
      ['https://example.com/{clickid}', /unknown macro \{clickid\}/],
      ['https://example.com/{country', /unbalanced/],
      ['https://user:pw@example.com/', /credentials/],
      [`https://example.com/${'a'.repeat(2048)}`, /2048/],
    ] as const) {
      const problems = targetUrlProblems(bad);
      assert.equal(problems.length, 1, bad);
      assert.match(problems[0]!.message, why);
      assert.equal(problems[0]!.path, '/target_url');
    }
  });
});
