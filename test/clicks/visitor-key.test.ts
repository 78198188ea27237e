import assert from 'node:assert/strict';
import { hash } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  UserAgentClassifier,
  userAgentSeed,
  VISITOR_SECRET_NAME,
  visitorKey,
  visitorKeyOf,
} from '../../src/clicks/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { USER_AGENTS as UA, VISITOR_SECRET } from '../helpers/user-agents.ts';

describe('visitor key', () => {
  test('the same address and user agent give the same key: a 52-bit integer, on any node', () => {
    const a = visitorKey('203.0.113.7', UA.safariIphone, VISITOR_SECRET);
    assert.equal(visitorKey('203.0.113.7', UA.safariIphone, VISITOR_SECRET), a);
    assert.ok(Number.isSafeInteger(a) && a >= 0 && a < 2 ** 52, String(a));
    assert.equal(
      visitorKey('::ffff:203.0.113.7', UA.safariIphone, VISITOR_SECRET),
      a,
      'dual-stack sockets: the same visitor',
    );
    // Pinned values: nodes of two versions must agree on every visitor they share through storage,
    // so a change to the hash has to be deliberate (and release-noted), never a side effect.
    assert.equal(visitorKey('203.0.113.7', 'curl/8.5.0', VISITOR_SECRET), 559562896874070);
    assert.equal(visitorKey('2001:db8::1', 'Mozilla/5.0', VISITOR_SECRET), 3518583854666384);
  });

  test('keyed by the deployment secret: without it, a stored key does not give the address back', () => {
    const key = visitorKey('203.0.113.77', UA.chromeWindows, VISITOR_SECRET);
    assert.notEqual(visitorKey('203.0.113.77', UA.chromeWindows, 'another-deployment-secret'), key);
    // The review's attack: the click beside the sighting gives the /24 and the browser, so 256
    // guesses with an unkeyed hash (SHA-256 of the user agent, as before) found the address.
    const unkeyed = (address: string, ua: string) => {
      const d = hash('sha256', ua, 'buffer') as Buffer;
      return visitorKeyOf(address, d.readUIntBE(0, 6) * 16 + (d[6]! >> 4));
    };
    assert.equal(unkeyed('203.0.113.7', 'curl/8.5.0'), 1158569440671101, 'the key of versions before');
    const found = [];
    for (let last = 0; last < 256; last++)
      if (unkeyed(`203.0.113.${last}`, UA.chromeWindows) === key) found.push(last);
    assert.deepEqual(found, []);
  });

  test('the cached seed gives what the raw pair gives', () => {
    const c = new UserAgentClassifier(10, VISITOR_SECRET);
    for (const ua of Object.values(UA)) {
      const seed = c.classify('GET', ua).visitor_seed;
      assert.equal(visitorKeyOf('198.51.100.4', seed), visitorKey('198.51.100.4', ua, VISITOR_SECRET));
    }
  });

  test('a different address or user agent is a different visitor: 200,000 pairs, no collision', () => {
    const keys = new Set<number>();
    const agents = Object.values(UA).slice(0, 10);
    for (let i = 0; i < 10_000; i++) {
      for (const ua of agents) keys.add(visitorKey(`10.${i >> 8}.${i & 255}.1`, ua, VISITOR_SECRET));
      keys.add(visitorKey(`2001:db8::${i.toString(16)}`, UA.curl, VISITOR_SECRET));
      for (let j = 0; j < 9; j++)
        keys.add(visitorKey(`192.0.${j}.${i & 255}`, `${UA.googlebot} ${i >> 8}`, VISITOR_SECRET));
    }
    assert.equal(keys.size, 200_000);
    keys.clear();
    keys.add(visitorKey(undefined, UA.safariIphone, VISITOR_SECRET));
    keys.add(visitorKey('', UA.safariIphone, VISITOR_SECRET));
    keys.add(visitorKey('203.0.113.1', undefined, VISITOR_SECRET));
    keys.add(visitorKey('203.0.113.1', UA.safariIphone, VISITOR_SECRET));
    assert.equal(keys.size, 3, 'no address and an empty one are the same; the others differ');
  });

  test('the key changes with every character of the address (no lane ignores a position)', () => {
    const seed = userAgentSeed(UA.chromeWindows, VISITOR_SECRET);
    const base = '2001:db8:85a3:8d3:1319:8a2e:370:7348';
    const k = visitorKeyOf(base, seed);
    for (let i = 0; i < base.length; i++) {
      const changed = base.slice(0, i) + (base[i] === '1' ? '2' : '1') + base.slice(i + 1);
      assert.notEqual(visitorKeyOf(changed, seed), k, changed);
    }
  });
});

describe('the visitor-key secret of a node', () => {
  test('from the configuration when set (never stored), else made once and kept in the database', async () => {
    const ua = UA.chromeWindows;
    const sighted = async (node: TestNode) => {
      node.node.clickDescriber.describe('flow-s', 'GET', { 'user-agent': ua }, '203.0.113.77', undefined);
      return node.node.clickDescriber.uniqueness.takeNew().map((s) => s.visitor_key);
    };
    const configured = await startTestNode({
      yaml: 'clicks:\n  visitor_key_secret: a-secret-of-this-test\n',
    });
    try {
      assert.deepEqual(await sighted(configured), [visitorKey('203.0.113.77', ua, 'a-secret-of-this-test')]);
      const stored = await configured.node.storage.secret(VISITOR_SECRET_NAME, () => 'none yet');
      assert.equal(stored, 'none yet', 'the configured secret never reached the database');
    } finally {
      await configured.close();
    }
    const made = await startTestNode();
    try {
      const secret = await made.node.storage.secret(VISITOR_SECRET_NAME, () => 'not this one');
      assert.match(secret, /^[A-Za-z0-9_-]{43}$/, '32 random bytes');
      assert.deepEqual(await sighted(made), [visitorKey('203.0.113.77', ua, secret)]);
    } finally {
      await made.close();
    }
  });
});
