import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { normaliseTargetUrl, targetUrlField, targetWithoutClick } from '../../src/routing/index.ts';

const targetUrlProblems = (url: string) => targetUrlField(url).problems;

describe('validation of routing input', () => {
  test('target URLs: absolute http(s), documented macros only', () => {
    for (const ok of [
      'https://example.com/',
      'http://example.com/p?q={country}',
      'https://example.com/{country}/{flow}/{stream}?r={request_id}#{flow}',
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

  test('an IDN target host is stored in punycode, a non-Latin-1 path percent-encoded, macros kept', () => {
    for (const [raw, stored] of [
      ['https://例え.jp/パス', 'https://xn--r8jz45g.jp/%E3%83%91%E3%82%B9'],
      [
        'https://пример.рф/путь/{flow}?q=ü&c={country}#{stream}é',
        'https://xn--e1afmkfd.xn--p1ai/%D0%BF%D1%83%D1%82%D1%8C/{flow}?q=%C3%BC&c={country}#{stream}%C3%A9',
      ],
      [
        'HTTPS://Example.COM:443/a b/{request_id}{country}',
        'https://example.com/a%20b/{request_id}{country}',
      ],
      ['https://x.test/sluicemacro0sluicemacro/{flow}', 'https://x.test/sluicemacro0sluicemacro/{flow}'],
      ['https://x.test', 'https://x.test/'],
      // An empty query or fragment is kept as WHATWG serialises it (it was refused as "a macro
      // stands before the path").
      ['https://t.example/p?', 'https://t.example/p?'],
      ['https://t.example/p?#f', 'https://t.example/p?#f'],
      ['https://t.example/?#', 'https://t.example/?#'],
      ['https://t.example/{flow}?#{stream}', 'https://t.example/{flow}?#{stream}'],
    ] as const) {
      assert.deepEqual(normaliseTargetUrl(raw), { url: stored }, raw);
      assert.deepEqual(normaliseTargetUrl(stored), { url: stored }, `${stored} is a fixed point`);
      assert.match(stored, /^[\x21-\x7e]+$/, 'plain visible ASCII: always a valid header value');
    }
  });

  test('control characters in a target URL are refused, naming the field', () => {
    for (const c of ['\r', '\n', '\r\n', '\0', '\t', '\x7f', '\x85', '\u2028', '\u2029', '\x1b']) {
      for (const raw of [
        `https://x.test/a${c}b`,
        `https://x.test/?q=${c}`,
        `https://x.test/#${c}`,
        `${c}https://x.test/`,
      ]) {
        const problems = targetUrlProblems(raw);
        assert.equal(problems.length, 1, JSON.stringify(raw));
        assert.equal(problems[0]!.path, '/target_url');
        assert.match(problems[0]!.message, /control characters \(U\+[0-9A-F]{4} at character \d+\)/);
      }
    }
    assert.match(targetUrlProblems('https://x.test/\ud800')[0]!.message, /lone surrogate/);
  });

  test('a macro in the scheme, user info, host or port is refused, naming the macro and where macros may stand', () => {
    for (const [raw, macro] of [
      ['https://example.com{request_id}/', '{request_id}'],
      ['https://{country}.example.com/', '{country}'],
      ['https://x.test:{flow}/', '{flow}'],
      ['https://{stream}@x.test/', '{stream}'],
      ['{flow}://x.test/', '{flow}'],
      ['https:{request_id}', '{request_id}'],
      ['https:\\\\evil{request_id}\\path', '{request_id}'],
    ] as const) {
      const problems = targetUrlProblems(raw);
      assert.equal(problems.length, 1, raw);
      assert.equal(problems[0]!.path, '/target_url');
      assert.ok(problems[0]!.message.includes(macro), `${raw}: ${problems[0]!.message}`);
      assert.match(problems[0]!.message, /macros may stand only in the path, query and fragment/);
    }
    assert.match(
      targetUrlProblems('https://x.test/{clickid}')[0]!.message,
      /allowed: \{country\}, \{flow\}, \{stream\}, \{request_id\}/,
    );
  });

  test('a target checked outside a click: flow, stream and request id filled, every click macro empty', () => {
    assert.equal(
      targetWithoutClick(
        'https://o.example/{flow}/{stream}?c={click_id}&s={sub1}&p={param:x}&r={request_id}&k={country}',
        {
          flow: 'demo',
          stream: 'st 1',
          request_id: 'run/7',
        },
      ),
      'https://o.example/demo/st%201?c=&s=&p=&r=run%2F7&k=',
    );
  });
});
