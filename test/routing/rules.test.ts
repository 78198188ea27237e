import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  acceptsBots,
  compileRules,
  hourMask,
  localTime,
  ruleProblems,
  rulesPass,
  type Visitor,
} from '../../src/routing/index.ts';
import type { TargetingRule } from '../../src/storage/index.ts';
import { visitor } from '../helpers/records.ts';

/** Whether a stream with these rules takes this visitor. */
const takes = (rules: TargetingRule[], v: Visitor, logic: 'and' | 'or' = 'and', tz = 'UTC') =>
  rulesPass(compileRules({ rules, logic }, tz)!, v);
const is = (field: string, ...values: (string | boolean)[]): TargetingRule => ({ field, op: 'is', values });
const isNot = (field: string, ...values: (string | boolean)[]): TargetingRule => ({
  field,
  op: 'is_not',
  values,
});

describe('targeting rules', () => {
  test('country, device type, os, browser (case-insensitive) and language', () => {
    const v = visitor('DE', {
      facts: { device_type: 'mobile', os: 'iOS', browser: 'Mobile Safari', language: 'de' },
    });
    assert.equal(takes([is('country', 'DE', 'AT')], v), true);
    assert.equal(takes([is('country', 'FR')], v), false);
    assert.equal(takes([isNot('country', 'FR')], v), true);
    assert.equal(takes([is('device_type', 'mobile', 'tablet')], v), true);
    assert.equal(takes([is('os', 'ios')], v), true);
    assert.equal(takes([is('browser', 'MOBILE SAFARI')], v), true);
    assert.equal(takes([is('browser', 'Chrome')], v), false);
    assert.equal(takes([is('language', 'de')], v), true);
    assert.equal(takes([is('language', 'en')], v), false);
  });

  test('a field the click has no value for fails is and passes is_not', () => {
    const v = visitor(undefined);
    for (const field of ['country', 'language', 'os', 'browser', 'ip', 'referrer_host', 'param:src']) {
      const value = field === 'ip' ? '10.0.0.0/8' : field === 'country' ? 'DE' : 'x';
      assert.equal(takes([is(field, value)], v), false, `${field} is`);
      assert.equal(takes([isNot(field, value)], v), true, `${field} is_not`);
    }
  });

  test('ip: CIDR blocks, IPv4 and IPv6, and IPv4 clients on a dual-stack socket', () => {
    const rules = [is('ip', '203.0.113.0/24', '2001:db8::/32', '198.51.100.7')];
    assert.equal(takes(rules, visitor(undefined, { client: '203.0.113.200' })), true);
    assert.equal(takes(rules, visitor(undefined, { client: '203.0.114.1' })), false);
    assert.equal(takes(rules, visitor(undefined, { client: '::ffff:203.0.113.9' })), true);
    assert.equal(takes(rules, visitor(undefined, { client: '2001:db8:1::5' })), true);
    assert.equal(takes(rules, visitor(undefined, { client: '2001:db9::5' })), false);
    assert.equal(takes(rules, visitor(undefined, { client: '198.51.100.7' })), true);
    assert.equal(takes(rules, visitor(undefined, { client: '198.51.100.8' })), false);
    assert.equal(takes([isNot('ip', '10.0.0.0/8')], visitor(undefined, { client: '10.1.2.3' })), false);
  });

  test('referrer_host: a long list of *.suffix values matches as a short one does', () => {
    const many = Array.from({ length: 40 }, (_, i) => `*.site${i}.test`);
    const from = (h: string | null) => visitor(undefined, { facts: { referrer_host: h } });
    for (const rules of [
      [is('referrer_host', ...many, '*.example.com')],
      [is('referrer_host', '*.example.com')],
    ]) {
      assert.equal(takes(rules, from('a.b.example.com')), true);
      assert.equal(takes(rules, from('example.com')), true);
      assert.equal(takes(rules, from('badexample.com')), false);
      assert.equal(takes(rules, from('example.com.evil.test')), false);
      assert.equal(takes(rules, from('com')), false);
    }
    assert.equal(takes([is('referrer_host', ...many)], from('x.site39.test')), true);
    assert.equal(takes([is('referrer_host', ...many)], from('site40.test')), false);
  });

  test('referrer_host: exact hosts and *.suffix (which takes the bare domain too)', () => {
    const rules = [is('referrer_host', '*.example.com', 'news.test')];
    const from = (h: string | null) => visitor(undefined, { facts: { referrer_host: h } });
    assert.equal(takes(rules, from('a.b.example.com')), true);
    assert.equal(takes(rules, from('example.com')), true);
    assert.equal(takes(rules, from('badexample.com')), false);
    assert.equal(takes(rules, from('news.test')), true);
    assert.equal(takes(rules, from('sub.news.test')), false);
  });

  test('param:NAME matches any of the values of a repeated parameter', () => {
    assert.equal(takes([is('param:src', 'fb')], visitor(undefined, { query: { src: 'fb' } })), true);
    assert.equal(takes([is('param:src', 'fb')], visitor(undefined, { query: { src: ['tt', 'fb'] } })), true);
    assert.equal(takes([is('param:src', 'fb')], visitor(undefined, { query: { src: 'tt' } })), false);
  });

  test('hour ranges include both ends and may wrap midnight; weekday and hour are in the flow time zone', () => {
    assert.equal(hourMask('9-17'), 0b111111111 << 9);
    assert.equal(hourMask('22-3'), (1 << 22) | (1 << 23) | 0b1111);
    assert.equal(hourMask('5'), 1 << 5);
    assert.equal(hourMask('24'), undefined);
    assert.equal(hourMask('9-'), undefined);
    // Monday 2026-01-05 23:30 UTC is Tuesday 00:30 in Berlin (UTC+1 in winter).
    const at = Date.UTC(2026, 0, 5, 23, 30);
    assert.deepEqual(localTime(at, 'UTC'), {
      minute: Math.floor(at / 60_000),
      weekday: 1,
      hour: 23,
      day: '2026-01-05',
    });
    assert.equal(localTime(at, 'Europe/Berlin').day, '2026-01-06');
    assert.equal(localTime(at, 'Europe/Berlin').weekday, 2);
    assert.equal(localTime(at, 'Europe/Berlin').hour, 0);
    const v = visitor(undefined, { at });
    assert.equal(takes([is('weekday', 'mon')], v, 'and', 'UTC'), true);
    assert.equal(takes([is('weekday', 'mon')], v, 'and', 'Europe/Berlin'), false);
    assert.equal(takes([is('hour', '22-3')], v, 'and', 'UTC'), true);
    assert.equal(takes([is('hour', '22-3')], v, 'and', 'Europe/Berlin'), true);
    assert.equal(takes([is('hour', '9-17')], v, 'and', 'Europe/Berlin'), false);
  });

  test('is_unique and is_bot take booleans; bots are accepted only by a rule that says so', () => {
    const bot = visitor(undefined, { facts: { is_bot: true } });
    assert.equal(takes([is('is_bot', true)], bot), true);
    assert.equal(takes([is('is_bot', true)], visitor(undefined)), false);
    assert.equal(takes([isNot('is_unique', true)], bot), true);
    assert.equal(acceptsBots({ rules: [is('is_bot', true)] }), true);
    assert.equal(acceptsBots({ rules: [isNot('is_bot', false)] }), true);
    assert.equal(acceptsBots({ rules: [is('is_bot', false)] }), false);
    assert.equal(acceptsBots({}), false);
  });

  test('logic and needs every rule, or needs one', () => {
    const v = visitor('DE', { facts: { device_type: 'desktop' } });
    const rules = [is('country', 'DE'), is('device_type', 'mobile')];
    assert.equal(takes(rules, v, 'and'), false);
    assert.equal(takes(rules, v, 'or'), true);
    assert.equal(takes([is('country', 'FR'), is('device_type', 'mobile')], v, 'or'), false);
  });

  test('validation names the rule, the field and the value, with what is allowed', () => {
    const problems = ruleProblems({
      rules: [
        is('colour', 'red'),
        is('country', 'DE', 'XY'),
        is('ip', '10.0.0.0/33', 'not-an-ip'),
        is('hour', '25-3'),
        is('weekday', 'funday'),
        is('is_bot', 'yes'),
        is('device_type', 'phone'),
        is('referrer_host', 'bad host'),
        is('language', 'english'),
      ],
    });
    const at = (path: string) => problems.find((p) => p.path === path)?.message ?? '(none)';
    assert.match(
      at('/filters/rules/0/field'),
      /"colour" is not a rule field; expected one of country, .*param:NAME/,
    );
    assert.match(at('/filters/rules/1/values/1'), /"XY" is not an ISO 3166-1 alpha-2 country code/);
    assert.equal(at('/filters/rules/1/values/0'), '(none)');
    assert.match(at('/filters/rules/2/values/0'), /prefix length outside 0–32/);
    assert.match(at('/filters/rules/2/values/1'), /not an IPv4 or IPv6 address/);
    assert.match(at('/filters/rules/3/values/0'), /"25-3" is not an hour range/);
    assert.match(at('/filters/rules/4/values/0'), /expected one of mon, tue/);
    assert.match(at('/filters/rules/5/values/0'), /takes true or false/);
    assert.match(at('/filters/rules/6/values/0'), /expected one of desktop, mobile, tablet, other/);
    assert.match(at('/filters/rules/7/values/0'), /host name or \*\.suffix/);
    assert.match(at('/filters/rules/8/values/0'), /primary language subtag/);
    assert.equal(problems.length, 10);
    assert.deepEqual(
      ruleProblems({ rules: [is('ip', '2001:db8::/48'), is('hour', '0-23'), is('param:utm_source', 'x')] }),
      [],
    );
  });
});
