import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CLICK_ID_RE, ClickDescriber, SUB_FIELDS } from '../../src/clicks/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { USER_AGENTS as UA, VISITOR_SECRET } from '../helpers/user-agents.ts';

const describer = (clock = new ManualClock()) =>
  new ClickDescriber({
    clock,
    userAgentCacheMax: 100,
    visitorSecret: VISITOR_SECRET,
    uniquenessTtlHours: 24,
    uniquenessMaxEntries: 1000,
    shareUniqueness: false,
  });

describe('describing a click', () => {
  test('a person on an iPhone: every fact the click record takes from the request', () => {
    const facts = describer().describe(
      'flow-1',
      'GET',
      {
        'user-agent': UA.safariIphone,
        'accept-language': 'de-CH,de;q=0.9,en;q=0.5',
        referer: 'https://m.Facebook.com/story.php?id=1',
      },
      '::ffff:198.51.100.23',
      { sub1: 'campaign-7', sub3: ['first', 'second'], sub10: 'x'.repeat(300), other: 'ignored' },
    );
    assert.match(facts.click_id, CLICK_ID_RE);
    assert.deepEqual(
      { ...facts, click_id: 'x' },
      {
        click_id: 'x',
        device_type: 'mobile',
        os: 'iOS',
        browser: 'Safari',
        language: 'de',
        referrer_host: 'm.facebook.com',
        sub1: 'campaign-7',
        sub2: null,
        sub3: 'first',
        sub4: null,
        sub5: null,
        sub6: null,
        sub7: null,
        sub8: null,
        sub9: null,
        sub10: 'x'.repeat(256),
        ip_prefix: '198.51.100.0/24',
        is_unique: true,
        is_bot: false,
      },
    );
    assert.deepEqual(
      SUB_FIELDS.filter((f) => facts[f] !== null),
      ['sub1', 'sub3', 'sub10'],
    );
  });

  test('five HEAD requests from facebookexternalhit: five bot clicks, none unique (the issue #14 report)', () => {
    const d = describer();
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const f = d.describe('flow-1', 'HEAD', { 'user-agent': UA.facebookexternalhit }, '31.13.115.1', {});
      assert.equal(f.is_bot, true);
      assert.equal(f.is_unique, false);
      ids.add(f.click_id);
    }
    assert.equal(ids.size, 5, 'each still a click with its own id');
    assert.equal(d.uniqueness.size, 0, 'bots open no uniqueness window');
  });

  test('bots: Googlebot, curl, no user agent, an empty one, a browser sending HEAD', () => {
    const d = describer();
    const bot = (method: string, ua: string | undefined) =>
      d.describe('f', method, ua === undefined ? {} : { 'user-agent': ua }, '203.0.113.9', undefined).is_bot;
    assert.equal(bot('GET', UA.googlebot), true);
    assert.equal(bot('GET', UA.curl), true);
    assert.equal(bot('GET', undefined), true);
    assert.equal(bot('GET', ''), true);
    assert.equal(bot('HEAD', UA.chromeWindows), true);
    assert.equal(bot('GET', UA.chromeWindows), false);
  });

  test('the same visitor again on the same flow is not unique; on another flow it is', () => {
    const d = describer();
    const click = (flow: string, address: string) =>
      d.describe(flow, 'GET', { 'user-agent': UA.chromeAndroidPhone }, address, undefined).is_unique;
    assert.equal(click('f', '203.0.113.9'), true);
    assert.equal(click('f', '203.0.113.9'), false);
    assert.equal(click('f', '::ffff:203.0.113.9'), false, 'the same client over a dual-stack socket');
    assert.equal(click('f', '203.0.113.10'), true);
    assert.equal(click('g', '203.0.113.9'), true);
  });

  test('record: false (the simulator) tells uniqueness without opening a window', () => {
    const d = describer();
    const headers = { 'user-agent': UA.firefoxLinux };
    assert.equal(d.describe('f', 'GET', headers, '192.0.2.1', undefined, false).is_unique, true);
    assert.equal(d.describe('f', 'GET', headers, '192.0.2.1', undefined, false).is_unique, true);
    assert.equal(d.describe('f', 'GET', headers, '192.0.2.1', undefined).is_unique, true);
    assert.equal(d.describe('f', 'GET', headers, '192.0.2.1', undefined, false).is_unique, false);
  });

  test('nothing known: no headers, no address, no query — a bot with nulls, never a throw', () => {
    const f = describer().describe('f', 'GET', {}, undefined, undefined);
    assert.equal(f.is_bot, true);
    assert.equal(f.device_type, 'other');
    assert.equal(f.language, null);
    assert.equal(f.referrer_host, null);
    assert.equal(f.ip_prefix, null);
    assert.equal(f.sub1, null);
  });
});
