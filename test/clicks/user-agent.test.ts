import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  parseUserAgent,
  USER_AGENT_MAX_CHARS,
  UserAgentClassifier,
  type UserAgentInfo,
} from '../../src/clicks/index.ts';
import { DEVICE_TYPES } from '../../src/storage/index.ts';
import { USER_AGENTS as UA, VISITOR_SECRET } from '../helpers/user-agents.ts';

/** What a click shows of a classification (the visitor seed has tests of its own). */
const shown = ({ visitor_seed: _, ...rest }: UserAgentInfo) => rest;

describe('user agent classification', () => {
  const cases: [keyof typeof UA, string, string | null, string | null, boolean][] = [
    // name, device_type, os, browser, is_bot
    ['chromeWindows', 'desktop', 'Windows', 'Chrome', false],
    ['edgeWindows', 'desktop', 'Windows', 'Microsoft Edge', false],
    ['chromeMac', 'desktop', 'macOS', 'Chrome', false],
    ['firefoxWindows', 'desktop', 'Windows', 'Firefox', false],
    ['firefoxLinux', 'desktop', 'Linux', 'Firefox', false],
    ['safariMac', 'desktop', 'macOS', 'Safari', false],
    ['safariIphone', 'mobile', 'iOS', 'Safari', false],
    ['chromeIphone', 'mobile', 'iOS', 'Chrome', false],
    ['safariIpad', 'tablet', 'iOS', 'Safari', false],
    ['chromeAndroidPhone', 'mobile', 'Android', 'Chrome', false],
    ['samsungAndroidPhone', 'mobile', 'Android', 'Samsung Internet for Android', false],
    ['chromeAndroidTablet', 'tablet', 'Android', 'Chrome', false],
    ['facebookexternalhit', 'other', null, 'FacebookExternalHit', true],
    ['googlebot', 'other', null, 'Googlebot', true],
    ['bingbot', 'other', null, 'BingCrawler', true],
    ['curl', 'other', null, null, true],
  ];
  for (const [name, device, os, browser, bot] of cases) {
    test(`${name}: ${device}, ${os}, ${browser}${bot ? ', bot' : ''}`, () => {
      const info = new UserAgentClassifier(100, VISITOR_SECRET).classify('GET', UA[name]);
      assert.deepEqual(
        shown(info),
        { device_type: device, os, browser, is_bot: bot },
        `${name}: ${JSON.stringify(info)}`,
      );
    });
  }

  test('an absent or empty user agent is a bot with nothing known', () => {
    const c = new UserAgentClassifier(100, VISITOR_SECRET);
    for (const ua of [undefined, '']) {
      assert.deepEqual(shown(c.classify('GET', ua)), {
        device_type: 'other',
        os: null,
        browser: null,
        is_bot: true,
      });
    }
    assert.equal(c.misses, 0, 'nothing to parse');
  });

  test('HEAD is a bot whatever the user agent says; the device is still read', () => {
    const c = new UserAgentClassifier(100, VISITOR_SECRET);
    const head = c.classify('HEAD', UA.safariIphone);
    assert.deepEqual(shown(head), { device_type: 'mobile', os: 'iOS', browser: 'Safari', is_bot: true });
    assert.equal(c.classify('GET', UA.safariIphone).is_bot, false, 'the cached entry is not changed by HEAD');
    assert.equal(c.classify('HEAD', UA.facebookexternalhit).is_bot, true);
  });

  test('parsed once per distinct user agent: repeats are answered from the cache, the same object', () => {
    const c = new UserAgentClassifier(100, VISITOR_SECRET);
    const first = c.classify('GET', UA.chromeWindows);
    for (let i = 0; i < 50; i++) {
      assert.equal(c.classify('GET', UA.chromeWindows), first);
      c.classify('GET', UA.safariIphone);
    }
    assert.equal(c.misses, 2);
    assert.equal(c.size, 2);
    assert.ok(Object.isFrozen(first), 'shared by every click: nobody may change it');
  });

  test('the cache is bounded: distinct user agents beyond its size evict the least recently used', () => {
    const c = new UserAgentClassifier(10, VISITOR_SECRET);
    for (let i = 0; i < 1000; i++) c.classify('GET', `${UA.chromeWindows} build/${i}`);
    assert.equal(c.size, 10);
    assert.equal(c.misses, 1000);
    c.classify('GET', `${UA.chromeWindows} build/999`);
    assert.equal(c.misses, 1000, 'the most recent is still there');
    c.classify('GET', `${UA.chromeWindows} build/0`);
    assert.equal(c.misses, 1001, 'the oldest was evicted');
  });

  test('a huge user agent is read up to its cap; one entry per distinct capped prefix', () => {
    const c = new UserAgentClassifier(10, VISITOR_SECRET);
    const long = `${UA.safariIphone} ${'x'.repeat(20_000)}`;
    assert.equal(c.classify('GET', long).device_type, 'mobile');
    assert.equal(c.classify('GET', `${long}yyy`).device_type, 'mobile');
    assert.equal(c.misses, 1, 'the same first characters: the same entry');
    assert.ok(USER_AGENT_MAX_CHARS < long.length);
  });

  test('names come out printable and short, whatever the user agent carries', () => {
    // Bowser's last resort names the browser after the first token of an unknown user agent.
    const info = parseUserAgent(`Weird\u0085${'A'.repeat(200)}/1.0 (thing)`, VISITOR_SECRET);
    assert.equal(info.browser, `Weird${'A'.repeat(59)}`, 'the C1 control removed, cut at 64 characters');
    for (const ua of ['/', ' ', '()', ';;;', '\t', 'Mozilla/5.0', '\u00ff\u00fe']) {
      const r = parseUserAgent(ua, VISITOR_SECRET);
      assert.ok(DEVICE_TYPES.includes(r.device_type), ua);
    }
  });
});
