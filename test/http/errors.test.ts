import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ERROR_CODES } from '../../src/errors/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface ErrorBody {
  error: { code: string; message: string; request_id: string; details?: unknown };
}

/**
 * Each error path of docs/errors.md: the status, the contract code in the body, and exactly one
 * `api error` record with the same request id, the real status and the underlying cause.
 */
describe('API errors: body and exactly one log record each', () => {
  let t: TestNode;
  let viewer: string;
  before(async () => {
    t = await startTestNode({ yaml: 'app:\n  server:\n    body_limit_bytes: 2048\n' });
    viewer = await t.token('viewer');
  });
  after(() => t.close());

  async function expectApiError(res: Response, status: number, code: keyof typeof ERROR_CODES) {
    const body = (await res.json()) as ErrorBody;
    assert.equal(res.status, status);
    assert.equal(ERROR_CODES[code].status, status, 'registry and answer agree');
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(body.error.code, code);
    assert.equal(typeof body.error.message, 'string');
    const id = res.headers.get('x-request-id')!;
    assert.equal(body.error.request_id, id);
    const records = t.logs.apiErrors(id);
    assert.equal(records.length, 1, `one api error record for ${id}`);
    const r = records[0]!;
    assert.equal(r.level, 'error');
    assert.equal(r.code, code);
    assert.equal(r.http_status, status);
    assert.equal(r.trace_id, id);
    assert.equal(r.server_id, t.node.serverId);
    assert.equal(typeof r.error, 'string');
    assert.ok((r.error as string).length > 0);
    assert.match(String(r.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    return { body, record: r };
  }

  test('malformed JSON is 400 validation.invalid_input', async () => {
    const { record } = await expectApiError(
      await t.acp('/acp/system/metrics', viewer, '{"a":'),
      400,
      'validation.invalid_input',
    );
    assert.match(String(record.error), /JSON/);
  });

  test('a body that fails the schema is 400 with details in body and record', async () => {
    const { body, record } = await expectApiError(
      await t.acp('/acp/system/metrics', viewer, { unexpected: true }),
      400,
      'validation.invalid_input',
    );
    assert.ok(Array.isArray(body.error.details));
    assert.deepEqual(record.details, body.error.details);
  });

  test('a schema error names the field in its message: an unknown key, a missing one, a choice with what is allowed', async () => {
    for (const [body, path, message] of [
      [{ unexpected: true }, '/unexpected', 'is not a known field'],
      [{ filter: { running: 'yes' } }, '/filter/running', 'must be boolean'],
      [{ sort: { by: 'nope' } }, '/sort/by', 'must be one of "name", "runs", "failures", "p95"'],
      [{ sort: {} }, '/sort/by', 'is required'],
    ] as const) {
      const { body: answer } = await expectApiError(
        await t.acp('/acp/cron-tasks/list', viewer, body),
        400,
        'validation.invalid_input',
      );
      assert.deepEqual(answer.error.details, [{ path, message }]);
      assert.equal(answer.error.message, `The request body does not match the schema: ${path} ${message}.`);
    }
  });

  test('a JSON array where an object is expected is 400', async () => {
    await expectApiError(await t.acp('/acp/system/metrics', viewer, '[]'), 400, 'validation.invalid_input');
  });

  test('a JSON null body is 400 like [], not taken as {} (only an empty body is)', async () => {
    for (const path of ['/acp/system/metrics', '/acp/cron-tasks/list']) {
      const refused = await t.acp(path, viewer, '[]');
      const { body: asArray } = await expectApiError(refused, 400, 'validation.invalid_input');
      for (const body of ['null', ' null\n']) {
        const { body: answer } = await expectApiError(
          await t.acp(path, viewer, body),
          400,
          'validation.invalid_input',
        );
        assert.deepEqual(answer.error.details, asArray.error.details, `${path} ${JSON.stringify(body)}`);
        assert.equal(answer.error.message, asArray.error.message);
      }
    }
  });

  test('a __proto__ key is refused with 400, for the key (the JSON is valid)', async () => {
    for (const body of ['{"__proto__":{"polluted":1}}', '{"constructor":{"prototype":{"polluted":1}}}']) {
      const res = await t.acp('/acp/system/metrics', viewer, body);
      const copy = res.clone();
      await expectApiError(res, 400, 'validation.invalid_input');
      const { error } = (await copy.json()) as ErrorBody;
      assert.match(error.message, /a key that is never accepted/, body);
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test('an empty body counts as {}', async () => {
    const res = await t.acp('/acp/system/metrics', viewer, '');
    assert.equal(res.status, 200);
    await res.json();
    const noType = await fetch(`${t.url}/acp/system/metrics`, {
      method: 'POST',
      headers: { authorization: `Bearer ${viewer}` },
    });
    assert.equal(noType.status, 200);
    await noType.json();
  });

  test('a body over app.server.body_limit_bytes is 413 request.too_large', async () => {
    await expectApiError(
      await t.acp('/acp/system/metrics', viewer, JSON.stringify({ pad: 'x'.repeat(4096) })),
      413,
      'request.too_large',
    );
  });

  test('a non-JSON media type is 415 request.unsupported_media_type', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      await expectApiError(
        await t.acp('/acp/system/metrics', viewer, 'a=1', { 'content-type': type }),
        415,
        'request.unsupported_media_type',
      );
    }
  });

  test('an empty body is {} whatever media type it names (fetch sends an empty string as text/plain)', async () => {
    for (const type of ['text/plain;charset=UTF-8', 'application/octet-stream', 'application/json']) {
      const res = await t.acp('/acp/auth/whoami', viewer, '', { 'content-type': type });
      assert.equal(res.status, 200, type);
      await res.json();
    }
    const res = await fetch(`${t.url}/acp/auth/whoami`, {
      method: 'POST',
      headers: { authorization: `Bearer ${viewer}` },
      body: '',
    });
    assert.equal(res.status, 200);
    await res.json();
  });

  test('a body of another media type on a wrong method or an unknown path is still 405 or 404', async () => {
    for (const [method, path, status] of [
      ['DELETE', '/acp/auth/whoami', 405],
      ['PUT', '/acp/auth/whoami', 405],
      ['POST', '/go/any', 405],
      ['POST', '/nowhere', 404],
    ] as const) {
      const res = await fetch(`${t.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${viewer}`, 'content-type': 'text/plain' },
        body: 'x',
      });
      assert.equal(res.status, status, `${method} ${path}`);
      await res.arrayBuffer();
    }
  });

  test('an empty chunked body of another media type is {} too', async () => {
    const { port } = new URL(t.url);
    const answer = await new Promise<string>((resolve) => {
      const s = connect(Number(port), '127.0.0.1');
      let out = '';
      s.on('data', (d) => {
        out += d;
      });
      s.on('close', () => resolve(out));
      s.write(
        `POST /acp/auth/whoami HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${viewer}\r\n` +
          'content-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n0\r\n\r\n',
      );
    });
    assert.equal(answer.split('\r\n')[0], 'HTTP/1.1 200 OK');
  });

  test('a wrong method on an ACP path is 405 with Allow', async () => {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const res = await fetch(`${t.url}/acp/system/metrics`, { method });
      assert.equal(res.headers.get('allow'), 'POST');
      await expectApiError(res, 405, 'request.method_not_allowed');
    }
  });

  test('an unknown path is 404 resource.not_found, counted under __unmatched__', async () => {
    const before = t.node.telemetry.controllers.get('__unmatched__').count;
    for (const path of ['/nope', '/acp/nope', '/acp/system/metrics/extra', `/${'x'.repeat(2000)}`]) {
      await expectApiError(await fetch(t.url + path), 404, 'resource.not_found');
    }
    const m = t.node.telemetry.controllers.snapshot();
    assert.equal(m.__unmatched__!.count - before, 4);
    assert.equal(Object.keys(m).filter((k) => k.startsWith('/nope')).length, 0, 'no key per scanned path');
  });

  test('a wrong method on a path with a parameter is 405 with Allow, counted under that route', async () => {
    const before = t.node.telemetry.controllers.get('/go/:slug').errors;
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) {
      const res = await fetch(`${t.url}/go/some-slug`, { method });
      assert.equal(res.headers.get('allow'), 'GET, HEAD');
      await expectApiError(res, 405, 'request.method_not_allowed');
    }
    assert.equal(t.node.telemetry.controllers.get('/go/:slug').errors - before, 4);
    // No slug at all is not that route.
    await expectApiError(await fetch(`${t.url}/go/`, { method: 'POST' }), 404, 'resource.not_found');
  });

  test('HEAD /postback is 405: only GET and POST record conversions', async () => {
    const res = await fetch(`${t.url}/postback?click_id=x&txid=head`, { method: 'HEAD' });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET, POST');
    assert.equal(t.logs.apiErrors(res.headers.get('x-request-id')!).length, 1);
  });

  test("the router's refusals are counted under __unmatched__ and their record keeps no query string", async () => {
    const unmatched = t.node.telemetry.controllers.get('__unmatched__');
    const before = { count: unmatched.count, errors: unmatched.errors };
    const secret = 'pbkey-never-logged-7f3a';
    // A malformed %-escape in the path (fetch would not send it as is) and an over-long parameter.
    const paths = [`/postback%3?key=${secret}&click_id=x`, `/go/${'a'.repeat(5000)}?token=${secret}`];
    for (const path of paths) {
      const text = await rawGet(path);
      const status = Number(text.split(' ')[1]);
      assert.ok(status === 400 || status === 414, `answered ${status}`);
      const id = /x-request-id: (\S+)/i.exec(text)?.[1];
      assert.ok(id !== undefined, 'the answer carries its request id');
      assert.equal(t.logs.apiErrors(id).length, 1, 'one api error record');
    }
    assert.equal(unmatched.count - before.count, paths.length);
    assert.equal(unmatched.errors - before.errors, paths.length);
    assert.ok(!t.logs.raw.includes(secret), 'the query string reached the log');
  });

  /** A GET sent as raw bytes (for paths `fetch` would rewrite); the whole answer as text. */
  function rawGet(path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(Number(new URL(t.url).port), '127.0.0.1');
      let out = '';
      socket.on('data', (d) => {
        out += d.toString('latin1');
        if (out.includes('\r\n\r\n') && out.endsWith('}')) socket.end();
      });
      socket.on('close', () => resolve(out));
      socket.on('error', reject);
      socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    });
  }

  test('an unknown path whose body is refused before the 404 handler is still counted under __unmatched__', async () => {
    // The JSON body parser answers this 400 before the not-found handler runs.
    const before = t.node.telemetry.controllers.get('__unmatched__').errors;
    const res = await fetch(`${t.url}/nope`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":',
    });
    await expectApiError(res, 400, 'validation.invalid_input');
    assert.equal(t.node.telemetry.controllers.get('__unmatched__').errors - before, 1);
  });

  test('a missing or bad token is 401 auth.unauthorized', async () => {
    await expectApiError(await t.acp('/acp/system/metrics', undefined), 401, 'auth.unauthorized');
    await expectApiError(
      await t.acp('/acp/system/metrics', 'slc_not-a-real-token'),
      401,
      'auth.unauthorized',
    );
    await expectApiError(
      await t.acp('/acp/system/metrics', undefined, undefined, { authorization: 'Basic YWRtaW46YWRtaW4=' }),
      401,
      'auth.unauthorized',
    );
  });

  test('the controllers entry counts errors as API errors', async () => {
    const before = t.node.telemetry.controllers.get('/acp/system/config').entry();
    await (await t.acp('/acp/system/config', undefined)).arrayBuffer();
    await (await t.acp('/acp/system/config', viewer)).arrayBuffer();
    const now = t.node.telemetry.controllers.get('/acp/system/config').entry();
    assert.equal(now.count - before.count, 2);
    assert.equal(now.errors - before.errors, 1);
  });

  test('tokens, Authorization and Cookie values never reach the log', async () => {
    const secret = 'slc_SuperSecretValue123';
    await (
      await t.acp('/acp/system/metrics', secret, '{bad', { cookie: 'session=CookieSecret456' })
    ).arrayBuffer();
    await (
      await t.acp('/acp/system/metrics', viewer, '{bad', { cookie: 'session=CookieSecret456' })
    ).arrayBuffer();
    assert.ok(!t.logs.raw.includes('SuperSecretValue123'));
    assert.ok(!t.logs.raw.includes('CookieSecret456'));
    assert.ok(!t.logs.raw.includes(viewer));
  });
});
