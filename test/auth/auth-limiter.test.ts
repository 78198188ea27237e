import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AuthLimiter, addressKey } from '../../src/auth/index.ts';
import { ApiError } from '../../src/errors/index.ts';
import { ManualClock } from '../../src/time/index.ts';

const limited = (l: AuthLimiter, address: string) => {
  try {
    l.check(address);
    return false;
  } catch (err) {
    assert.ok(err instanceof ApiError && err.code === 'rate.limited');
    return true;
  }
};

describe('AuthLimiter', () => {
  test('locks an address after max failures within the window, and only until the window ends', () => {
    const clock = new ManualClock();
    const l = new AuthLimiter({ maxFailures: 2, windowMs: 10_000, clock });
    l.failed('a');
    assert.equal(limited(l, 'a'), false);
    l.failed('a');
    assert.equal(limited(l, 'a'), true);
    assert.equal(limited(l, 'b'), false);
    clock.advance(9_999);
    assert.equal(limited(l, 'a'), true);
    clock.advance(1);
    assert.equal(limited(l, 'a'), false);
  });

  test('failures spread over windows never lock', () => {
    const clock = new ManualClock();
    const l = new AuthLimiter({ maxFailures: 2, windowMs: 1000, clock });
    for (let i = 0; i < 10; i++) {
      l.failed('a');
      clock.advance(1000);
      assert.equal(limited(l, 'a'), false);
    }
  });

  test('the wait is in the error: seconds, rounded up', () => {
    const clock = new ManualClock();
    const l = new AuthLimiter({ maxFailures: 1, windowMs: 2500, clock });
    l.failed('a');
    clock.advance(100);
    assert.throws(
      () => l.check('a'),
      (err: ApiError) => (err.details as { retry_after_seconds: number }).retry_after_seconds === 3,
    );
  });

  test('max_failures 0 turns it off; memory is bounded by maxAddresses', () => {
    const clock = new ManualClock();
    const off = new AuthLimiter({ maxFailures: 0, windowMs: 1000, clock });
    for (let i = 0; i < 100; i++) off.failed('a');
    assert.equal(limited(off, 'a'), false);
    assert.equal(off.size, 0);
    const bounded = new AuthLimiter({ maxFailures: 1, windowMs: 1000, clock, maxAddresses: 100 });
    for (let i = 0; i < 10_000; i++) bounded.failed(`10.0.${i >> 8}.${i & 255}`);
    assert.equal(bounded.size, 100);
  });

  test('an address that is not known (the client left) is neither refused nor counted, and nothing throws', async () => {
    // A request whose socket closed has `request.ip` undefined: it made addressKey throw, and a
    // public /postback answered 500.
    const clock = new ManualClock();
    const l = new AuthLimiter({ maxFailures: 1, windowMs: 1000, clock });
    l.failed(undefined);
    l.check(undefined);
    l.prove(undefined, 'k');
    assert.equal(l.proven(undefined, 'k'), false);
    assert.equal(l.size, 0);
    const unauthorized = () => {
      throw new ApiError('auth.unauthorized', 'no');
    };
    await assert.rejects(
      l.guard(undefined, unauthorized),
      (err: ApiError) => err.code === 'auth.unauthorized',
    );
  });

  test('a proven address is remembered by its key (an IPv6 host by its /64), bounded', () => {
    const clock = new ManualClock();
    const l = new AuthLimiter({ maxFailures: 1, windowMs: 1000, clock, maxAddresses: 2 });
    l.prove('2001:db8::1', 'k');
    assert.equal(l.proven('2001:db8::2', 'k'), true);
    assert.equal(l.proven('2001:db8::2', 'other'), false, 'only the credential that was proven');
    assert.equal(l.proven('2001:db8:0:1::1', 'k'), false);
    l.prove('10.0.0.1', 'k');
    l.prove('10.0.0.2', 'k');
    assert.equal(l.proven('2001:db8::1', 'k'), false, 'the least recently seen is forgotten');
  });
});

describe('addressKey', () => {
  test('IPv4 as is, IPv4-mapped as IPv4, IPv6 by its /64', () => {
    const cases: [string, string][] = [
      ['198.51.100.7', '198.51.100.7'],
      ['::ffff:198.51.100.7', '198.51.100.7'],
      ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
      ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
      ['2001:0db8:0001:0002::ffff', '2001:db8:1:2::/64'],
      ['2001:db8::1', '2001:db8:0:0::/64'],
      ['::1', '0:0:0:0::/64'],
      ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ];
    for (const [address, key] of cases) assert.equal(addressKey(address), key, address);
  });

  test('one IPv6 host walking its /64 shares one budget', () => {
    const clock = new ManualClock();
    const l = new AuthLimiter({ maxFailures: 3, windowMs: 60_000, clock });
    for (let i = 1; i <= 3; i++) l.failed(`2001:db8:1:2::${i.toString(16)}`);
    assert.equal(limited(l, '2001:db8:1:2::ffff'), true);
    assert.equal(limited(l, '2001:db8:1:3::1'), false);
  });
});
