import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ERROR_CODES, isErrorCode } from '../../src/errors/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';

/** fast-check's seed: fixed by `FC_SEED` to replay a failure, else fresh each run (printed on failure). */
const SEED = process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined;
const RUNS = Number(process.env.FC_RUNS ?? 150);

interface Answer {
  status: number;
  requestId: string | null;
  body: { error?: { code: string; request_id: string } };
}

/** Sends raw bytes and reads the raw answer: for requests `fetch` refuses to send. */
function raw(port: number, request: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let out = '';
    socket.on('data', (d) => {
      out += d.toString('latin1');
    });
    socket.on('close', () => resolve(out));
    socket.on('error', () => resolve(out));
    socket.write(request);
    setTimeout(() => socket.end(), 300).unref();
  });
}

/**
 * Hostile input (issue #7): whatever arrives, the node never crashes, never answers 5xx, and every
 * rejection carries a contract code (with the status it is registered with), the request id of its
 * response, and exactly one `api error` record; no log line carries a raw CR/LF from the input.
 */
describe('hostile input', () => {
  let t: TestNode;
  let admin: string;
  let port: number;
  before(async () => {
    t = await startTestNode({
      yaml: 'app:\n  server:\n    body_limit_bytes: 65536\nacp:\n  auth_rate_limit:\n    max_failures: 0\n',
    });
    admin = await t.token('admin');
    port = Number(new URL(t.url).port);
    const flow = (await (
      await t.acp('/acp/traffic-flows/create', admin, { slug: 'fuzz', name: 'fuzz' })
    ).json()) as {
      id: string;
    };
    await t.acp('/acp/streams/create', admin, {
      flow_id: flow.id,
      name: 'd',
      type: 'default',
      target_url: 'https://example.com/{country}/{request_id}',
    });
  });
  after(async () => {
    await t.close();
  });

  /** The contract holds for one answer; returns a reason when it does not. */
  function violation(a: Answer): string | undefined {
    if (a.status >= 500) return `answered ${a.status}`;
    if (a.status < 400) return undefined;
    const code = a.body.error?.code;
    if (!isErrorCode(code)) return `unknown code ${code}`;
    if (ERROR_CODES[code].status !== a.status) return `${code} with status ${a.status}`;
    if (a.body.error?.request_id !== a.requestId) return 'request id of body and header differ';
    const records = t.logs.apiErrors(a.requestId ?? '');
    if (records.length !== 1) return `${records.length} api error records`;
    if (records[0]!.code !== code) return `record code ${records[0]!.code}`;
    return undefined;
  }

  async function post(
    path: string,
    body: string | Buffer,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const res = await fetch(t.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json', ...headers },
      body,
    });
    const text = await res.text();
    let parsed: Answer['body'] = {};
    try {
      parsed = JSON.parse(text);
    } catch {
      // a non-JSON answer is judged by its status alone
    }
    return { status: res.status, requestId: res.headers.get('x-request-id'), body: parsed };
  }

  test('every ACP route × arbitrary JSON bodies (schema keys with wrong values, pollution keys)', async () => {
    const routes = t.node.acp.routes.map((r) => r.path);
    const keys = [
      'id',
      'slug',
      'name',
      'status',
      'rotation',
      'flow_id',
      'type',
      'position',
      'weight',
      'filters',
    ];
    const pollution = ['__proto__', 'constructor', 'prototype'];
    const value = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.string({ unit: 'binary', maxLength: 64 }),
      fc.constantFrom('', 'a'.repeat(5000), '\u0000', '../../etc/passwd', "' OR 1=1 --", '{country}'),
    );
    const body = fc.oneof(
      fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
      fc
        .dictionary(fc.constantFrom(...keys, ...pollution), value, { maxKeys: 6 })
        .map((o) => JSON.stringify(o)),
      fc
        .tuple(fc.constantFrom(...pollution), fc.jsonValue({ maxDepth: 2 }))
        .map(([k, v]) => `{"${k}":${JSON.stringify(v) ?? 'null'}}`),
      fc.string({ unit: 'binary', maxLength: 200 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), body, async (path, payload) => {
        const a = await post(path, payload);
        const why = violation(a);
        assert.equal(why, undefined, `${path} ${payload.slice(0, 120)}: ${why}`);
      }),
      { numRuns: RUNS * 2, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
    // Nothing reached the prototypes of this process's objects.
    assert.equal(({} as Record<string, unknown>).x, undefined);
    assert.equal(Object.keys(Object.prototype).length, 0);
  });

  test('/go/:slug with arbitrary path segments answers a redirect or a contract 404/400', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'binary', minLength: 1, maxLength: 80 }), async (slug) => {
        const res = await fetch(`${t.url}/go/${encodeURIComponent(slug)}`, { redirect: 'manual' });
        const text = await res.text();
        const a: Answer = {
          status: res.status,
          requestId: res.headers.get('x-request-id'),
          body: res.status >= 400 ? JSON.parse(text) : {},
        };
        if (a.status !== 302)
          assert.equal(violation(a), undefined, `${JSON.stringify(slug)}: ${violation(a)}`);
        // A location never echoes a raw CR/LF (the macro values are encoded).
        assert.ok(!/[\r\n]/.test(res.headers.get('location') ?? ''));
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });

  test('X-Request-Id: only a well-formed value is echoed; CR/LF, 10 KB and unicode get a fresh id', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.constantFrom('a'.repeat(10_240), 'ok-id\r\nx-injected: 1', 'é', '\u202e', '😀'),
        ),
        async (candidate) => {
          // Raw bytes, as a hostile client would send them (fetch would refuse most of these).
          const head = `GET /go/fuzz HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${candidate}\r\nConnection: close\r\n\r\n`;
          const answer = await raw(port, Buffer.from(head, 'utf8'));
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
          assert.ok(
            status === 302 || (status >= 400 && status < 500),
            `status ${status} for ${JSON.stringify(candidate)}`,
          );
          const echoed = /\r\nx-request-id: ([^\r\n]*)\r\n/i.exec(answer)?.[1];
          assert.ok(echoed, 'every answer carries an X-Request-Id');
          const wellFormed = /^[A-Za-z0-9._:-]{1,128}$/.test(candidate);
          if (wellFormed && status === 302) assert.equal(echoed, candidate);
          else if (!wellFormed) assert.notEqual(echoed, candidate);
          assert.ok(!/x-injected/i.test(answer.split('\r\n\r\n')[0]!.replace(/^.*x-request-id.*$/im, '')));
        },
      ),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });

  test('requests the HTTP parser refuses still get the contract: code, ids and one record', async () => {
    const cases: [string, string, number][] = [
      ['a bare CR in a header', 'GET /go/fuzz HTTP/1.1\r\nHost: x\r\nX-Request-Id: ab\rcd\r\n\r\n', 400],
      ['a bare LF in a header value', 'GET /go/fuzz HTTP/1.1\r\nHost: x\r\nX-A: a\nb: c\r\n\r\n', 400],
      ['headers over 16 KB', `GET /go/fuzz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['garbage', 'NOT HTTP AT ALL\r\n\r\n', 400],
    ];
    for (const [label, request, expected] of cases) {
      const answer = await raw(port, request);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      assert.equal(status, expected, label);
      const id = /\r\nx-request-id: ([^\r\n]*)\r\n/.exec(answer)?.[1];
      assert.ok(id, `${label}: request id header`);
      assert.match(answer, new RegExp(`\\r\\nx-server-id: ${t.node.serverId}\\r\\n`));
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Answer['body'];
      assert.equal(
        violation({ status, requestId: id, body }),
        undefined,
        `${label}: ${violation({ status, requestId: id, body })}`,
      );
    }
  });

  test("a refused request's connection is closed by the node, even when the client keeps its end open", async () => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    socket.on('data', () => {});
    socket.on('error', () => {});
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write('GET /go/fuzz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n');
    const open = () => new Promise<number>((r) => t.node.app.server.getConnections((_e, n) => r(n)));
    await until(
      'the node to let go of the half-open connection',
      async () => (await open()) === 0,
      10_000,
      50,
    );
    socket.destroy();
  });

  test('a parse error after an answer gets its own answer: one record per error response', async () => {
    // A chunked POST refused at once (bad token), then a broken chunk: the garbage is answered as
    // the next message on the connection (as Node itself would), each answer with its one record.
    const before = t.logs.apiErrors().length;
    const answer = await raw(
      port,
      'POST /acp/system/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nZZ\r\n',
    );
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    assert.deepEqual(statuses, [401, 400], answer);
    assert.equal(t.logs.apiErrors().length - before, statuses.length);
  });

  test('bodies: too large, wrong type, invalid UTF-8, deep nesting, pollution keys', async () => {
    const cases: [string, string | Buffer, Record<string, string>, number][] = [
      ['10 MB', Buffer.alloc(10 * 1024 * 1024, 0x20), {}, 413],
      ['text/plain', '{}', { 'content-type': 'text/plain' }, 415],
      ['form data', 'a=1', { 'content-type': 'application/x-www-form-urlencoded' }, 415],
      [
        'invalid UTF-8',
        Buffer.concat([Buffer.from('{"filter":{"slug":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}}')]),
        {},
        400,
      ],
      ['deep arrays', `${'['.repeat(30_000)}${']'.repeat(30_000)}`, {}, 400],
      ['deep objects', `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`, {}, 400],
      ['__proto__', '{"__proto__":{"polluted":true}}', {}, 400],
      ['constructor.prototype', '{"constructor":{"prototype":{"polluted":true}}}', {}, 400],
      ['truncated JSON', '{"filter":', {}, 400],
      // Valid UTF-8 on the wire, but the escape makes a lone surrogate (stored as U+FFFD if let in).
      ['lone surrogate', '{"filter":{"slug":"a\\ud800b"}}', {}, 400],
      ['lone surrogate key', '{"\\udc00":1}', {}, 400],
    ];
    for (const [label, body, headers, expected] of cases) {
      const a = await post('/acp/traffic-flows/list', body, headers);
      assert.equal(a.status, expected, label);
      assert.equal(violation(a), undefined, `${label}: ${violation(a)}`);
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test('country: a client-sent X-Client-Country-Code is never believed; bad values from the proxy are unknown', async () => {
    const go = async (headers: Record<string, string>) => {
      const res = await fetch(`${t.url}/go/fuzz`, { redirect: 'manual', headers });
      await res.body?.cancel();
      return res;
    };
    const spoofed = await go({ 'x-client-country-code': 'DE' });
    assert.equal(spoofed.headers.get('x-client-country-code'), null);
    assert.match(spoofed.headers.get('location') ?? '', /^https:\/\/example\.com\/\//);
    for (const v of ['XX', 'T1', 'DEU', 'D\u00e9', '', 'US,DE']) {
      const res = await go({ 'cf-ipcountry': v });
      assert.equal(res.headers.get('x-client-country-code'), null, JSON.stringify(v));
    }
    assert.equal((await go({ 'cf-ipcountry': 'DE' })).headers.get('x-client-country-code'), 'DE');
    // Case is the proxy's business; the header Sluice sends is upper case.
    assert.equal((await go({ 'cf-ipcountry': 'de' })).headers.get('x-client-country-code'), 'DE');
  });

  test('the log: every line one JSON record, no raw CR/LF from input, no token', () => {
    for (const line of t.logs.raw.split('\n').filter(Boolean)) {
      assert.doesNotThrow(() => JSON.parse(line));
    }
    assert.ok(!t.logs.raw.includes('\r'), 'a raw CR reached the log');
    assert.ok(!t.logs.raw.includes(admin), 'a token reached the log');
  });
});
