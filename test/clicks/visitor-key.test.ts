import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UserAgentClassifier, userAgentSeed, visitorKey, visitorKeyOf } from '../../src/clicks/index.ts';
import { USER_AGENTS as UA } from '../helpers/user-agents.ts';

describe('visitor key (§11)', () => {
  test('the same address and user agent give the same key: a 52-bit integer, on any node', () => {
    const a = visitorKey('203.0.113.7', UA.safariIphone);
    assert.equal(visitorKey('203.0.113.7', UA.safariIphone), a);
    assert.ok(Number.isSafeInteger(a) && a >= 0 && a < 2 ** 52, String(a));
    assert.equal(
      visitorKey('::ffff:203.0.113.7', UA.safariIphone),
      a,
      'dual-stack sockets: the same visitor',
    );
    // Pinned values: nodes of two versions must agree on every visitor they share through storage,
    // so a change to the hash has to be deliberate (and release-noted), never a side effect.
    assert.equal(visitorKey('203.0.113.7', 'curl/8.5.0'), 1158569440671101);
    assert.equal(visitorKey('2001:db8::1', 'Mozilla/5.0'), 470779454510286);
  });

  test('the cached seed gives what the raw pair gives', () => {
    const c = new UserAgentClassifier(10);
    for (const ua of Object.values(UA)) {
      const seed = c.classify('GET', ua).visitor_seed;
      assert.equal(visitorKeyOf('198.51.100.4', seed), visitorKey('198.51.100.4', ua));
    }
  });

  test('a different address or user agent is a different visitor: 200,000 pairs, no collision', () => {
    const keys = new Set<number>();
    const agents = Object.values(UA).slice(0, 10);
    for (let i = 0; i < 10_000; i++) {
      for (const ua of agents) keys.add(visitorKey(`10.${i >> 8}.${i & 255}.1`, ua));
      keys.add(visitorKey(`2001:db8::${i.toString(16)}`, UA.curl));
      for (let j = 0; j < 9; j++) keys.add(visitorKey(`192.0.${j}.${i & 255}`, `${UA.googlebot} ${i >> 8}`));
    }
    assert.equal(keys.size, 200_000);
    keys.clear();
    keys.add(visitorKey(undefined, UA.safariIphone));
    keys.add(visitorKey('', UA.safariIphone));
    keys.add(visitorKey('203.0.113.1', undefined));
    keys.add(visitorKey('203.0.113.1', UA.safariIphone));
    assert.equal(keys.size, 3, 'no address and an empty one are the same; the others differ');
  });

  test('the key changes with every character of the address (no lane ignores a position)', () => {
    const seed = userAgentSeed(UA.chromeWindows);
    const base = '2001:db8:85a3:8d3:1319:8a2e:370:7348';
    const k = visitorKeyOf(base, seed);
    for (let i = 0; i < base.length; i++) {
      const changed = base.slice(0, i) + (base[i] === '1' ? '2' : '1') + base.slice(i + 1);
      assert.notEqual(visitorKeyOf(changed, seed), k, changed);
    }
  });
});
