import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/auth/index.ts';
import { newBatchId } from '../../src/storage/index.ts';
import { startTestNode, type TestNode, withPostbackKey } from '../helpers/node.ts';
import { newClick } from '../helpers/records.ts';

interface Answer {
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string } };
  requestId: string;
}

/** A call to `path` with the node's own postback key (the default: one is required), unless it names one. */
async function call(t: TestNode, path: string, init?: RequestInit): Promise<Answer> {
  const res = await fetch(`${t.url}${withPostbackKey(t, path)}`, init);
  return {
    status: res.status,
    body: (await res.json()) as Answer['body'],
    requestId: res.headers.get('x-request-id')!,
  };
}

/** A test node (with `yaml` as its mode file) whose click log already holds clicks of these ids. */
async function nodeWithClicks(yaml: string | undefined, clickIds: string[]): Promise<TestNode> {
  const t = await startTestNode(yaml === undefined ? {} : { yaml });
  await t.node.storage.clicks.insertBatch({
    id: newBatchId(),
    server_id: 'n1',
    rows: clickIds.map((click_id) => newClick({ click_id })),
  });
  return t;
}

describe('postbacks on a node', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
    await t.node.storage.clicks.insertBatch({
      id: newBatchId(),
      server_id: 'n1',
      rows: [
        newClick({
          click_id: 'stored-1',
          flow_id: 'f1',
          stream_id: 's1',
          country: 'DE',
          subs: ['campaign-7'],
        }),
        newClick({ click_id: 'stored-2', flow_id: 'f1', stream_id: 's1' }),
        newClick({ click_id: 'stored-3', flow_id: 'f1', stream_id: 's1' }),
      ],
    });
  });
  after(() => t.close());

  test('GET: the first postback makes the conversion, attributed to its click; the same txid updates it', async () => {
    const first = await call(t, '/postback?click_id=stored-1&payout=12.50&currency=eur&txid=T-1&status=lead');
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, {
      ok: true,
      conversion_id: first.body.conversion_id,
      click_id: 'stored-1',
      status: 'lead',
    });
    assert.equal(typeof first.body.conversion_id, 'string');
    const again = await call(t, '/postback?click_id=stored-1&payout=20&txid=T-1');
    assert.equal(again.body.conversion_id, first.body.conversion_id);
    assert.equal(again.body.status, 'sale');
    const [conv, ...rest] = await t.node.storage.conversions.ofClick('stored-1');
    assert.deepEqual(rest, []);
    assert.deepEqual(
      [conv!.status, conv!.payout, conv!.currency, conv!.postbacks, conv!.flow_id, conv!.country, conv!.sub1],
      ['sale', 20, 'USD', 2, 'f1', 'DE', 'campaign-7'],
    );
    // Another txid is another conversion of the same click.
    const other = await call(t, '/postback?click_id=stored-1&txid=T-2');
    assert.notEqual(other.body.conversion_id, first.body.conversion_id);
    assert.equal((await t.node.storage.conversions.ofClick('stored-1')).length, 2);
  });

  test('POST: a form body and a JSON body; the body wins over the query string', async () => {
    const form = await call(t, '/postback?click_id=nope', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'click_id=stored-2&payout=3.25&status=sale',
    });
    assert.equal(form.status, 200, JSON.stringify(form.body));
    const json = await call(t, '/postback', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ click_id: 'stored-3', payout: 1.5, txid: 'J' }),
    });
    assert.equal(json.status, 200, JSON.stringify(json.body));
    assert.equal((await t.node.storage.conversions.ofClick('stored-2'))[0]!.payout, 3.25);
    assert.equal((await t.node.storage.conversions.ofClick('stored-3'))[0]!.payout, 1.5);
  });

  test('a click still in the buffer (the postback beat the flush) converts too', async () => {
    assert.equal(t.node.clickLog.append(newClick({ click_id: 'buffered-1', flow_id: 'f2' })), true);
    const answer = await call(t, '/postback?click_id=buffered-1&payout=1');
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal((await t.node.storage.conversions.ofClick('buffered-1'))[0]!.flow_id, 'f2');
  });

  test('errors are the contract: 404 unknown click, 400 bad values, 415 other media; one record each', async () => {
    for (const [path, init, status, code] of [
      ['/postback?click_id=never-seen', undefined, 404, 'resource.not_found'],
      ['/postback?click_id=stored-1&payout=-1&currency=XX', undefined, 400, 'validation.invalid_input'],
      ['/postback', undefined, 400, 'validation.invalid_input'],
      [
        '/postback',
        { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'click_id=stored-1' },
        415,
        'request.unsupported_media_type',
      ],
    ] as const) {
      const a = await call(t, path, init);
      assert.equal(a.status, status, path);
      assert.equal(a.body.error?.code, code, path);
      assert.equal(t.logs.apiErrors(a.requestId).length, 1, path);
    }
    const bad = await call(t, '/postback?click_id=stored-1&payout=-1&currency=XX');
    assert.match(bad.body.error!.message, /^\/payout: .*; \/currency: /);
    assert.deepEqual(
      (bad.body.error as { details?: { path: string }[] }).details?.map((d) => d.path),
      ['/payout', '/currency'],
    );
  });

  test('a 415 names both media types a postback takes, not JSON alone', async () => {
    // The registry's message ("must be application/json") told networks their forms were refused.
    const a = await call(t, '/postback', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'click_id=stored-1',
    });
    assert.equal(a.status, 415);
    assert.equal(a.body.error?.code, 'request.unsupported_media_type');
    assert.equal(
      a.body.error?.message,
      'The request body must be application/json or application/x-www-form-urlencoded.',
    );
    assert.equal(t.logs.apiErrors(a.requestId).length, 1);
    // Other routes take JSON alone and still say so.
    const acp = await t.acp('/acp/system/metrics', await t.token('viewer'), 'a=1', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    const other = (await acp.json()) as { error: { code: string; message: string } };
    assert.equal(acp.status, 415);
    assert.equal(other.error.message, 'The request body must be application/json.');
  });

  test('a form body or query string that is not UTF-8 is refused as a JSON body is, not stored as U+FFFD', async () => {
    // Forms were decoded lossily (`txid=%FF` and `txid=%FE` both became U+FFFD, one conversion);
    // the query string kept such an escape undecoded (`%FF` and `%25FF` both became "%FF").
    const form = (body: string | Buffer) => ({
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    const bytes = (...parts: (string | number[])[]) =>
      Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
    const body = 'The request body is not valid UTF-8.';
    for (const [label, path, init, message] of [
      ['a %-escape in a form', '/postback', form('click_id=stored-1&txid=bad%FF'), body],
      ['an encoded surrogate in a form', '/postback', form('click_id=stored-1&txid=bad%ED%A0%80'), body],
      ['a truncated sequence in a name', '/postback', form('click_id=stored-1&t%E2%82=1'), body],
      ['a raw byte in a form', '/postback', form(bytes('click_id=stored-1&txid=bad', [0xff])), body],
      [
        'a raw byte in JSON',
        '/postback',
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: bytes('{"click_id":"stored-1","txid":"bad', [0xff], '"}'),
        },
        body,
      ],
      [
        'a %-escape in the query',
        '/postback?click_id=stored-1&txid=bad%FF',
        undefined,
        'The query string is not valid UTF-8.',
      ],
      [
        'a %-escape in the query of a POST',
        '/postback?txid=bad%C0%80',
        form('click_id=stored-1'),
        'The query string is not valid UTF-8.',
      ],
    ] as const) {
      const a = await call(t, path, init);
      assert.equal(a.status, 400, label);
      assert.equal(a.body.error?.code, 'validation.invalid_input', label);
      assert.equal(a.body.error?.message, message, label);
      assert.equal(t.logs.apiErrors(a.requestId).length, 1, label);
    }
    const txids = async () => (await t.node.storage.conversions.ofClick('stored-1')).map((c) => c.txid);
    assert.ok(!(await txids()).some((x) => x?.startsWith('bad')), 'nothing stored');
    // What is UTF-8 still converts, and a `%` that starts no escape stays as it is (as before).
    const ok = await call(
      t,
      '/postback?click_id=stored-1&txid=q%25FF%zz',
      form('txid=caf%C3%A9+%F0%9F%98%80%'),
    );
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const fromQuery = await call(t, '/postback?click_id=stored-1&txid=q%25FF%zz+x');
    assert.equal(fromQuery.status, 200, JSON.stringify(fromQuery.body));
    const stored = await txids();
    assert.ok(stored.includes('café 😀%'), JSON.stringify(stored));
    assert.ok(stored.includes('q%FF%zz x'), JSON.stringify(stored));
  });

  test('each postback is counted like any route', () => {
    const entry = t.node.telemetry.systemMetrics().controllers['/postback']!;
    assert.ok(entry.count >= 8);
    assert.ok(entry.client_errors >= 4);
    assert.equal(entry.server_errors, 0);
  });
});

describe('postbacks with a key', () => {
  const key = 'network-shared-secret';
  let t: TestNode;
  before(async () => {
    t = await nodeWithClicks(
      `postback:\n  key_sha256: ${sha256Hex(key)}\nacp:\n  auth_rate_limit:\n    max_failures: 3\n`,
      ['keyed-1'],
    );
  });
  after(() => t.close());

  test('no key or a wrong one is 401 before anything else is judged; the right one converts; the key is never logged', async () => {
    // The right key first: this address has then shown it has the key, and its three wrong ones
    // below (the limit here) do not lock it out of the form postback after them.
    const ok = await call(t, `/postback?click_id=keyed-1&key=${key}`);
    assert.equal(ok.status, 200);
    for (const path of [
      '/postback?click_id=keyed-1',
      '/postback?click_id=keyed-1&key=guess',
      '/postback?payout=bad',
    ]) {
      const a = await call(t, path);
      assert.equal(a.status, 401, path);
      assert.equal(a.body.error?.code, 'auth.unauthorized', path);
    }
    const form = await call(t, '/postback', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `click_id=keyed-1&txid=2&key=${key}`,
    });
    assert.equal(form.status, 200);
    assert.ok(!t.logs.raw.includes(key));
  });

  test('wrong keys from one address are limited (429 once over the limit, whatever key comes next); an address that sent the right key before is not', async () => {
    // They were not limited at all: a guesser could try keys at line rate.
    const from = async (ip: string, path: string, init: RequestInit = {}) => {
      const res = await fetch(`${t.url}${path}`, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), 'x-forwarded-for': ip },
      });
      return { res, body: (await res.json()) as Answer['body'] };
    };
    const guesser = '198.51.100.20';
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const [path, init] of [
      ['/postback?click_id=keyed-1', undefined],
      ['/postback?click_id=keyed-1&key=guess-1', undefined],
      ['/postback', { method: 'POST', headers: form, body: 'click_id=keyed-1&key=guess-2' }],
    ] as const) {
      const { res, body } = await from(guesser, path, init);
      assert.equal(res.status, 401, path);
      assert.equal(body.error?.code, 'auth.unauthorized');
    }
    for (const path of ['/postback?click_id=keyed-1&key=guess-3', '/postback?click_id=keyed-1']) {
      const { res, body } = await from(guesser, path);
      assert.equal(res.status, 429, path);
      assert.equal(body.error?.code, 'rate.limited');
      assert.ok(Number(res.headers.get('retry-after')) > 0, 'Retry-After');
      assert.equal(t.logs.apiErrors(res.headers.get('x-request-id')!).length, 1, 'one api error record');
    }
    // The right key from the locked-out address is refused too: a 200 would tell a guesser which
    // of its tries was the key. Another address is not locked out.
    const right = await from(guesser, `/postback?click_id=keyed-1&txid=limited&key=${key}`);
    assert.equal(right.res.status, 429, JSON.stringify(right.body));
    assert.equal((await from('198.51.100.21', '/postback?click_id=keyed-1&key=guess')).res.status, 401);
    // A network that has sent the right key keeps converting after a run of wrong ones, which are
    // limited like anyone's (a proven address is no place to guess from).
    const network = '198.51.100.30';
    assert.equal((await from(network, `/postback?click_id=keyed-1&txid=n1&key=${key}`)).res.status, 200);
    const wrong: number[] = [];
    for (let i = 0; i < 4; i++)
      wrong.push((await from(network, `/postback?click_id=keyed-1&key=old-${i}`)).res.status);
    assert.deepEqual(wrong, [401, 401, 401, 429]);
    assert.equal((await from(network, `/postback?click_id=keyed-1&txid=n2&key=${key}`)).res.status, 200);
    // The postback count is its own: the ACP answers the locked-out address's token as usual (401
    // for a bad one, not 429).
    const acp = await fetch(`${t.url}/acp/system/metrics`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer not-a-token',
        'content-type': 'application/json',
        'x-forwarded-for': guesser,
      },
      body: '{}',
    });
    assert.equal(acp.status, 401);
    assert.ok(!t.logs.raw.includes(key));
  });
});

describe('postbacks while the key is being replaced', () => {
  let t: TestNode;
  before(async () => {
    t = await nodeWithClicks(
      `postback:\n  key_sha256: ${sha256Hex('new-key')}\n  previous_key_sha256: ${sha256Hex('old-key')}\n` +
        'acp:\n  auth_rate_limit:\n    max_failures: 2\n',
      ['rotating-1'],
    );
  });
  after(() => t.close());

  test('the new key and the previous one convert, however many old-key postbacks come first; anything else is 401', async () => {
    // Without the previous key a network on the old one failed every postback after the change
    // and, past the limit, locked its own address out of the new key too (a restart forgets
    // which addresses had sent the right key).
    for (let i = 0; i < 5; i++) {
      const old = await call(t, `/postback?click_id=rotating-1&txid=old-${i}&key=old-key`);
      assert.equal(old.status, 200, JSON.stringify(old.body));
    }
    assert.equal((await call(t, '/postback?click_id=rotating-1&txid=new&key=new-key')).status, 200);
    const wrong = await call(t, '/postback?click_id=rotating-1&key=older-key');
    assert.equal(wrong.status, 401);
    assert.ok(!t.logs.raw.includes('old-key') && !t.logs.raw.includes('new-key'));
  });
});

describe("postbacks in a network's own words (postback.aliases, postback.statuses)", () => {
  const key = 'dialect-key';
  let t: TestNode;
  before(async () => {
    t = await nodeWithClicks(
      [
        'postback:',
        `  key_sha256: ${sha256Hex(key)}`,
        '  aliases: { subid: click_id, sum: payout, tid: txid, secret: key }',
        '  statuses: { Approved: sale, pending: lead, declined: rejected }',
        '',
      ].join('\n'),
      ['dialect-1', 'dialect-2'],
    );
  });
  after(() => t.close());

  test("Keitaro's subid and a network's status values read as the standard names, which still win", async () => {
    const approved = await call(t, `/postback?subid=dialect-1&status=APPROVED&sum=12.5&tid=T1&secret=${key}`);
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.deepEqual([approved.body.click_id, approved.body.status], ['dialect-1', 'sale']);
    const declined = await call(t, `/postback?subid=dialect-1&status=declined&tid=T1&key=${key}`);
    assert.equal(declined.body.status, 'rejected');
    const [conv, ...rest] = await t.node.storage.conversions.ofClick('dialect-1');
    assert.deepEqual(rest, []);
    assert.deepEqual([conv?.status, conv?.payout, conv?.txid, conv?.postbacks], ['rejected', 0, 'T1', 2]);
    // Both names sent: the standard one is read.
    const both = await call(t, `/postback?click_id=dialect-2&subid=dialect-1&status=pending&key=${key}`);
    assert.deepEqual([both.body.click_id, both.body.status], ['dialect-2', 'lead']);
    // A value the map does not know is refused, naming what is accepted.
    const unknown = await call(t, `/postback?subid=dialect-2&status=hold&key=${key}`);
    assert.equal(unknown.status, 400);
    assert.match(
      unknown.body.error!.message,
      /\/status: must be one of lead, sale, rejected, approved, pending, declined/,
    );
  });
});

describe('postbacks without a dialect keep the standard parameters as written', () => {
  let t: TestNode;
  before(async () => {
    t = await nodeWithClicks(undefined, ['plain-1']);
  });
  after(() => t.close());

  test('status=approved is a bad value and subid is no click id', async () => {
    const approved = await call(t, '/postback?click_id=plain-1&status=approved');
    assert.equal(approved.status, 400);
    assert.match(
      approved.body.error!.message,
      /must be one of lead, sale, rejected \(postback\.statuses maps/,
    );
    const subid = await call(t, '/postback?subid=plain-1');
    assert.equal(subid.status, 400);
    assert.match(subid.body.error!.message, /\/click_id: is required/);
  });
});
