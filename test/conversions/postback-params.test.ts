import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { PostbackKeys, parsePostback, postbackKey } from '../../src/conversions/index.ts';
import { ApiError } from '../../src/errors/index.ts';
import { ManualClock } from '../../src/time/index.ts';

/** The problems one refused postback lists, by path (a JSON pointer: `/click_id`). */
function problems(query: unknown, body?: unknown): Record<string, string> {
  try {
    parsePostback(query, body);
  } catch (err) {
    assert.ok(err instanceof ApiError);
    assert.equal(err.code, 'validation.invalid_input');
    const out: Record<string, string> = {};
    for (const p of err.details as { path: string; message: string }[]) out[p.path] = p.message;
    return out;
  }
  assert.fail('postback was accepted');
}

describe('postback parameters', () => {
  test('defaults: status sale, payout 0, currency USD, no txid', () => {
    assert.deepEqual(parsePostback({ click_id: 'abc_DEF-123' }, undefined), {
      click_id: 'abc_DEF-123',
      status: 'sale',
      payout_micros: 0,
      currency: 'USD',
      txid: null,
    });
  });

  test('payouts are exact decimals kept in micro-units', () => {
    const micros = (payout: string) => parsePostback({ click_id: 'c', payout }, undefined).payout_micros;
    assert.equal(micros('12.5'), 12_500_000);
    assert.equal(micros('0.000001'), 1);
    assert.equal(micros('0.1'), 100_000);
    assert.equal(micros(' 7 '), 7_000_000);
    assert.equal(micros('999999999.999999'), 999_999_999_999_999);
    for (const bad of ['-1', '1e3', '0x10', '1,5', '1.1234567', 'NaN', 'Infinity', '1.', '.5', '1000000000'])
      assert.match(problems({ click_id: 'c', payout: bad })['/payout'] ?? '', /decimal number/, bad);
  });

  test('status and currency are case-insensitive, checked against the known values', () => {
    const p = parsePostback({ click_id: 'c', status: 'LEAD', currency: 'eur' }, undefined);
    assert.equal(p.status, 'lead');
    assert.equal(p.currency, 'EUR');
    assert.match(problems({ click_id: 'c', status: 'paid' })['/status'] ?? '', /lead, sale, rejected/);
    assert.match(problems({ click_id: 'c', currency: 'XYZ' })['/currency'] ?? '', /ISO 4217/);
    assert.match(problems({ click_id: 'c', currency: 'US' })['/currency'] ?? '', /ISO 4217/);
    // Upper-casing is for ASCII letters only: a dotless i would otherwise make IDR.
    assert.match(problems({ click_id: 'c', currency: '\u0131dr' })['/currency'] ?? '', /ISO 4217/);
  });

  test('click_id is required and held to the click id alphabet', () => {
    assert.match(problems({})['/click_id'] ?? '', /required/);
    assert.match(problems({ click_id: '' })['/click_id'] ?? '', /required/);
    assert.match(problems({ click_id: 'a b' })['/click_id'] ?? '', /1–64/);
    assert.match(problems({ click_id: 'x'.repeat(65) })['/click_id'] ?? '', /1–64/);
  });

  test('txid: up to 128 characters, no control characters', () => {
    assert.equal(parsePostback({ click_id: 'c', txid: 't'.repeat(128) }, undefined).txid, 't'.repeat(128));
    assert.match(problems({ click_id: 'c', txid: 't'.repeat(129) })['/txid'] ?? '', /128/);
    assert.match(problems({ click_id: 'c', txid: 'a\u0000b' })['/txid'] ?? '', /control/);
    assert.match(problems({ click_id: 'c', txid: '\ud800' })['/txid'] ?? '', /surrogate/);
  });

  test('every problem is listed at once', () => {
    const p = problems({ status: 'x', payout: '-1', currency: 'zz' });
    assert.deepEqual(Object.keys(p).sort(), ['/click_id', '/currency', '/payout', '/status']);
  });

  test('details name each parameter by a JSON pointer, as every endpoint does; the message too', () => {
    // They were bare names ("click_id"), unlike the ACP's "/click_id" that docs/errors.md promises.
    assert.throws(
      () => parsePostback({ click_id: 'a b', txid: 't'.repeat(129) }, undefined),
      (err) => {
        assert.ok(err instanceof ApiError);
        assert.deepEqual(err.details, [
          { path: '/click_id', message: 'must be 1–64 characters of A–Z, a–z, 0–9, _ and -' },
          { path: '/txid', message: 'must be at most 128 characters' },
        ]);
        assert.equal(
          err.message,
          '/click_id: must be 1–64 characters of A–Z, a–z, 0–9, _ and -; /txid: must be at most 128 characters',
        );
        return true;
      },
    );
  });

  test('the body wins over the query string; repeated parameters take the first value', () => {
    const p = parsePostback(
      { click_id: 'fromquery', payout: ['1', '2'] },
      { click_id: 'frombody', status: 'lead' },
    );
    assert.equal(p.click_id, 'frombody');
    assert.equal(p.payout_micros, 1_000_000);
    assert.equal(p.status, 'lead');
    // A JSON body's numbers are values too; objects are not.
    assert.equal(parsePostback({}, { click_id: 'c', payout: 3.25 }).payout_micros, 3_250_000);
    assert.match(problems({}, { click_id: { $ne: 1 } })['/click_id'] ?? '', /string/);
  });

  test('a JSON null is refused for every parameter, not read as absent (`"status": null` was a sale)', () => {
    for (const param of ['click_id', 'status', 'payout', 'currency', 'txid']) {
      for (const value of [null, [null], []]) {
        const body = { click_id: 'c', [param]: value };
        assert.match(
          problems({}, body)[`/${param}`] ?? '(accepted)',
          /must not be null/,
          `${param}: ${JSON.stringify(value)}`,
        );
      }
    }
    // Not even when the query string names it: the body's null is what was sent.
    assert.match(
      problems({ status: 'lead' }, { click_id: 'c', status: null })['/status'] ?? '',
      /must not be null/,
    );
    // Left out or empty, a parameter takes its default.
    assert.equal(parsePostback({}, { click_id: 'c', status: '' }).status, 'sale');
    // A null key is no key (the caller is then refused 401 where one is required).
    assert.equal(postbackKey({}, { key: null }), undefined);
  });

  test('the key is compared with its configured SHA-256, in any case of hex; none sent or another is refused', async () => {
    const hash = createHash('sha256').update('s3cret').digest('hex');
    // A configured key never reads the database: a store that throws shows it.
    const store = {
      readSecret: () => Promise.reject(new Error('read')),
      replaceSecret: () => Promise.reject(new Error('write')),
    };
    const keys = (configured: string, requireKey = true) =>
      new PostbackKeys({
        requireKey,
        configuredSha256: configured,
        graceHours: 24,
        store,
        clock: new ManualClock(),
      });
    assert.equal(await keys(hash).accepts('s3cret'), true);
    assert.equal(await keys(hash.toUpperCase()).accepts('s3cret'), true);
    assert.equal(await keys(hash).accepts('s3cret '), false);
    assert.equal(await keys(hash).accepts(undefined), false);
    // A configured key is required whatever postback.require_key says.
    assert.equal(await keys(hash, false).accepts(undefined), false);
    assert.equal(postbackKey({ key: 'q' }, { key: 'b' }), 'b');
    assert.equal(postbackKey({ key: ['q', 'r'] }, undefined), 'q');
    assert.equal(postbackKey({}, { key: 5 }), undefined);
  });
});
