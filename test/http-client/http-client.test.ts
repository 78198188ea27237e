import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Redactor } from '../../src/config/index.ts';
import {
  HttpCallError,
  HttpClient,
  type HttpClientOptions,
  parseRetryAfter,
} from '../../src/http-client/index.ts';
import { createLogger, runWithContext, Telemetry } from '../../src/telemetry/index.ts';
import { ManualClock, systemClock } from '../../src/time/index.ts';
import { LogCapture, startTestNode } from '../helpers/node.ts';

type Route = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A real HTTP server on port 0 whose behaviour each test scripts per path. */
async function upstream(
  routes: Record<string, Route>,
): Promise<{ url: string; server: Server; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      seen.push(req);
      const route = routes[new URL(req.url ?? '/', 'http://x').pathname];
      if (route) route(req, res, body);
      else res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

function makeClient(over: Partial<HttpClientOptions> = {}, buckets = [50, 250, 1000]) {
  const telemetry = new Telemetry({
    clock: systemClock,
    serverId: 'n1',
    version: undefined,
    commit: 'c',
    prefix: 'sluice',
    controllerBucketsMs: [1],
    httpBucketsMs: buckets,
    taskBucketsMs: [1],
    isLeader: () => true,
    processMetrics: false,
  });
  const logs = new LogCapture();
  const logger = createLogger({ level: 'debug', name: 'sluice', serverId: 'n1', destination: logs });
  const client = new HttpClient({
    telemetry,
    logger,
    clock: systemClock,
    timeoutMs: 2000,
    totalTimeoutMs: 10_000,
    retries: 0,
    backoffMs: 10,
    maxBackoffMs: 50,
    captureBodyBytes: 16,
    redactor: new Redactor({ secretQueryParams: ['token', 'sig'], secretHeaders: ['x-custom-secret'] }),
    recentFailures: 3,
    propagateRequestId: true,
    ...over,
  });
  return { client, telemetry, logs };
}

describe('instrumented HTTP client against real local servers', () => {
  let up: Awaited<ReturnType<typeof upstream>>;
  let flaky = 0;
  let throttled = 0;
  before(async () => {
    up = await upstream({
      '/ok': (_q, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('fine'),
      '/boom': (_q, res) => res.writeHead(500).end('no'),
      '/flaky': (_q, res) => {
        flaky++;
        if (flaky % 2 === 1) res.writeHead(500).end('first fails');
        else res.writeHead(200).end('then works');
      },
      '/throttled': (_q, res) => {
        throttled++;
        if (throttled === 1) res.writeHead(503, { 'retry-after': '1' }).end();
        else res.writeHead(200).end('ok');
      },
      '/slow': (req, res) => {
        const ms = Number(new URL(req.url!, 'http://x').searchParams.get('ms') ?? 500);
        setTimeout(() => res.writeHead(200).end('late'), ms);
      },
      '/echo': (req, res, body) => res.writeHead(200).end(JSON.stringify({ headers: req.headers, body })),
    });
  });
  after(() => new Promise<void>((r) => up.server.close(() => r())));

  test('a success counts one request, no error, its duration in the buckets', async () => {
    const { client, telemetry } = makeClient();
    const res = await client.request({ url: `${up.url}/ok` });
    assert.equal(res.status, 200);
    assert.equal(res.body, 'fine');
    assert.equal(res.attempts, 1);
    const h = telemetry.httpSection();
    assert.equal(h.total_requests, 1);
    assert.equal(h.errors, 0);
    assert.equal(h.retries, 0);
    assert.equal(h.buckets['+Inf'], 1);
    assert.ok(h.duration_ms_sum > 0);
    await client.close();
  });

  test("fetch-style calls through the client's dispatcher are counted too", async () => {
    const { client, telemetry } = makeClient();
    const { fetch: undiciFetch } = await import('undici');
    const res = await undiciFetch(`${up.url}/ok`, { dispatcher: client.dispatcher });
    assert.equal(await res.text(), 'fine');
    const plain = await fetch(`${up.url}/ok`); // not through Sluice's client: not counted
    await plain.text();
    assert.equal(telemetry.httpSection().total_requests, 1);
    await client.close();
  });

  test('500 then success, retried: total_requests counts both attempts, errors 1, retries 1', async () => {
    const { client, telemetry } = makeClient({ retries: 2 });
    flaky = 0;
    const res = await client.request({ url: `${up.url}/flaky` });
    assert.equal(res.status, 200);
    assert.equal(res.attempts, 2);
    const h = telemetry.httpSection();
    assert.equal(h.total_requests, 2);
    assert.equal(h.errors, 1);
    assert.equal(h.retries, 1);
    await client.close();
  });

  test('a status ≥ 500 that stays is returned after the retries, every attempt an error', async () => {
    const { client, telemetry } = makeClient({ retries: 2 });
    const res = await client.request({ url: `${up.url}/boom` });
    assert.equal(res.status, 500);
    assert.equal(res.attempts, 3);
    assert.deepEqual([telemetry.httpSection().total_requests, telemetry.httpSection().errors], [3, 3]);
    await client.close();
  });

  test('POST is not retried unless told', async () => {
    const { client, telemetry } = makeClient({ retries: 2 });
    flaky = 0;
    assert.equal((await client.request({ url: `${up.url}/flaky`, method: 'POST', body: 'x' })).status, 500);
    assert.equal(telemetry.httpSection().total_requests, 1);
    flaky = 0;
    assert.equal(
      (await client.request({ url: `${up.url}/flaky`, method: 'POST', body: 'x', retryNonIdempotent: true }))
        .status,
      200,
    );
    assert.equal(telemetry.httpSection().total_requests, 3);
    await client.close();
  });

  test('connection refused is a network error, counted, retried', async () => {
    const dead = await upstream({});
    const url = dead.url;
    await new Promise<void>((r) => dead.server.close(() => r()));
    const { client, telemetry } = makeClient({ retries: 1 });
    await assert.rejects(client.request({ url: `${url}/x` }), (err: unknown) => {
      assert.ok(err instanceof HttpCallError);
      assert.equal(err.kind, 'network');
      assert.equal(err.code, 'ECONNREFUSED');
      assert.equal(err.attempts, 2);
      return true;
    });
    const h = telemetry.httpSection();
    assert.deepEqual([h.total_requests, h.errors, h.retries], [2, 2, 1]);
    await client.close();
  });

  test('a per-attempt timeout aborts the attempt and counts as an error', async () => {
    const { client, telemetry } = makeClient();
    await assert.rejects(
      client.request({ url: `${up.url}/slow?ms=1000`, timeoutMs: 100 }),
      (err: unknown) => {
        assert.ok(err instanceof HttpCallError);
        assert.equal(err.kind, 'timeout');
        return true;
      },
    );
    assert.equal(telemetry.httpSection().errors, 1);
    await client.close();
  });

  test('Retry-After is honoured before the next attempt', async () => {
    const { client, telemetry } = makeClient({ retries: 1, maxBackoffMs: 10 });
    throttled = 0;
    const t0 = performance.now();
    const res = await client.request({ url: `${up.url}/throttled` });
    const waited = performance.now() - t0;
    assert.equal(res.status, 200);
    assert.equal(res.attempts, 2);
    assert.ok(waited >= 950, `waited ${waited} ms for Retry-After: 1`);
    assert.equal(telemetry.httpSection().retries, 1);
    await client.close();
  });

  test('bucket counts are exact for controlled delays, and the exposition agrees with the JSON', async () => {
    // The client's clock moves only when the upstream says how long it took: a real delay would be
    // that delay plus however slow the machine is at the moment, and could land in the next bucket.
    const clock = new ManualClock();
    const timed = await upstream({
      '/took': (req, res) => {
        clock.advance(Number(new URL(req.url!, 'http://x').searchParams.get('ms')));
        res.writeHead(200).end('done');
      },
    });
    const { client, telemetry } = makeClient({ clock }, [50, 250, 1000]);
    for (const ms of [0, 120, 500]) await client.request({ url: `${timed.url}/took?ms=${ms}` });
    await new Promise<void>((r) => timed.server.close(() => r()));
    const h = telemetry.httpSection();
    assert.equal(h.duration_ms_sum, 620);
    assert.deepEqual(h.buckets, { '50': 1, '250': 2, '1000': 3, '+Inf': 3 });
    const { body } = await telemetry.exposition('text');
    const sample = (name: string) =>
      Number(
        body
          .split('\n')
          .find((l) => l.startsWith(`${name} `))
          ?.split(' ')[1],
      );
    assert.equal(sample('sluice_http_client_requests_total'), h.total_requests);
    assert.equal(sample('sluice_http_client_errors_total'), h.errors);
    assert.equal(sample('sluice_http_client_retries_total'), h.retries);
    assert.equal(sample('sluice_http_client_duration_milliseconds_count'), h.total_requests);
    assert.equal(sample('sluice_http_client_duration_milliseconds_sum'), telemetry.http.recorder.sum);
    for (const [le, n] of Object.entries(h.buckets)) {
      assert.ok(body.includes(`sluice_http_client_duration_milliseconds_bucket{le="${le}"} ${n}\n`), le);
    }
    await client.close();
  });

  test('duration_ms_sum is the exposition _sum exactly when durations are fractional (no float drift in either)', async () => {
    // Fractional milliseconds do not add exactly in binary (0.1 + 0.2 is 0.30000000000000004): the
    // JSON once rounded the sum and the exposition printed it raw, so the two views disagreed.
    const clock = new ManualClock();
    const timed = await upstream({
      '/took': (req, res) => {
        clock.advance(Number(new URL(req.url!, 'http://x').searchParams.get('ms')));
        res.writeHead(200).end('done');
      },
    });
    const { client, telemetry } = makeClient({ clock }, [50, 250, 1000]);
    const sample = async (format: 'text' | 'openmetrics') => {
      const { body } = await telemetry.exposition(format);
      const line = body
        .split('\n')
        .find((l) => l.startsWith('sluice_http_client_duration_milliseconds_sum '));
      return line!.split(' ')[1]!;
    };
    let expected = 0;
    try {
      for (const ms of [0.1, 0.2, 0.7, 12.345678, 1234.5671, 0.003, 3326.43]) {
        await client.request({ url: `${timed.url}/took?ms=${ms}` });
        expected += Math.round(ms * 1000);
        const json = telemetry.httpSection().duration_ms_sum;
        for (const format of ['text', 'openmetrics'] as const) {
          const text = await sample(format);
          assert.equal(Number(text), json, `${format} after ${ms}`);
          assert.equal(text, String(json), format);
        }
        // To the microsecond, as each duration was measured; never a float tail.
        assert.equal(json, expected / 1000);
        assert.match(String(json), /^\d+(\.\d{1,3})?$/);
      }
    } finally {
      await client.close();
      await new Promise<void>((r) => timed.server.close(() => r()));
    }
  });

  test('captured lines mask secrets: credentials, secret query params, secret headers; payload truncated', async () => {
    const { client, logs } = makeClient();
    const url = `${up.url.replace('http://', 'http://alice:pa55word@')}/boom?token=tok-123&sig=s1g&page=2`;
    await client.request({
      url,
      method: 'POST',
      body: 'a long payload that goes past sixteen bytes',
      headers: {
        Authorization: 'Bearer very-secret',
        Cookie: 'sid=cookie-secret',
        'X-Api-Key': 'probe-secret',
        'X-Custom-Secret': 'config-secret',
        'X-Plain': 'visible',
      },
      secretHeaders: ['x-api-key'],
      client: 'probe:test',
    });
    for (const secret of [
      'pa55word',
      'tok-123',
      's1g',
      'very-secret',
      'cookie-secret',
      'probe-secret',
      'config-secret',
      'past sixteen',
    ]) {
      assert.ok(!logs.raw.includes(secret), `${secret} leaked`);
    }
    const warn = logs.lines.find((l) => l.message === 'http call failed');
    assert.ok(warn);
    assert.equal(warn.level, 'warn');
    assert.equal(warn.method, 'POST');
    assert.equal(warn.status, 500);
    assert.equal(warn.attempt, 1);
    assert.equal(warn.client, 'probe:test');
    assert.equal(
      String(warn.url),
      `${up.url.replace('http://', 'http://[redacted]@')}/boom?token=[redacted]&sig=[redacted]&page=2`,
    );
    assert.equal((warn.request_headers as Record<string, string>)['X-Plain'], 'visible');
    assert.match(String(warn.request_body), /^a long payload t…\[truncated, 43 bytes\]$/);
    const [failure] = client.failures.list({ limit: 10 });
    assert.equal(failure?.client, 'probe:test');
    assert.equal(failure?.url, warn.url);
    await client.close();
  });

  test("a URL's user:password is sent as Basic authorization, never logged; a caller's own header wins", async () => {
    const { client, logs } = makeClient();
    const withCredentials = (path: string) =>
      `${up.url.replace('http://', 'http://probe%40ops:p%3Ass@')}${path}`;
    const echoed = async (headers?: Record<string, string>) => {
      const res = await client.request({ url: withCredentials('/echo'), ...(headers ? { headers } : {}) });
      return (JSON.parse(res.body) as { headers: Record<string, string> }).headers;
    };
    const basic = `Basic ${Buffer.from('probe@ops:p:ss').toString('base64')}`;
    assert.equal((await echoed()).authorization, basic);
    assert.equal((await echoed({ Authorization: 'Bearer mine' })).authorization, 'Bearer mine');
    // Escapes that are not UTF-8, or not escapes at all, are sent as bytes (curl's way), never thrown.
    const odd = await client.request({ url: `${up.url.replace('http://', 'http://a%ZZ:p%C3@')}/echo` });
    const oddBytes = Buffer.concat([Buffer.from('a%ZZ:p'), Buffer.from([0xc3])]);
    assert.equal(
      (JSON.parse(odd.body) as { headers: Record<string, string> }).headers.authorization,
      `Basic ${oddBytes.toString('base64')}`,
    );
    assert.equal((await client.request({ url: `${up.url}/echo` })).body.includes('authorization'), false);
    await client.request({ url: withCredentials('/boom') });
    const warn = logs.lines.find((l) => l.message === 'http call failed');
    assert.ok(warn);
    assert.equal((warn.request_headers as Record<string, string>).authorization, '[redacted]');
    assert.ok(!logs.raw.includes(basic.slice(6)), 'the credentials leaked');
    await client.close();
  });

  test('X-Request-Id of the current context is propagated (unless told not to), and logged', async () => {
    const { client, logs } = makeClient();
    const res = await runWithContext({ request_id: 'req-42' }, () =>
      client.request({ url: `${up.url}/echo` }),
    );
    assert.equal(
      (JSON.parse(res.body) as { headers: Record<string, string> }).headers['x-request-id'],
      'req-42',
    );
    const line = logs.lines.find((l) => l.message === 'http call');
    assert.equal(line?.request_id, 'req-42');
    assert.equal(line?.trace_id, 'req-42');
    const quiet = await runWithContext({ request_id: 'req-43' }, () =>
      client.request({ url: `${up.url}/echo`, propagateRequestId: false }),
    );
    assert.equal(
      (JSON.parse(quiet.body) as { headers: Record<string, string> }).headers['x-request-id'],
      undefined,
    );
    const task = await runWithContext({ task: 'probe', run_id: 'run-7' }, () =>
      client.request({ url: `${up.url}/echo` }),
    );
    assert.equal(
      (JSON.parse(task.body) as { headers: Record<string, string> }).headers['x-request-id'],
      'run-7',
    );
    assert.ok(logs.lines.some((l) => l.task === 'probe' && l.run_id === 'run-7'));
    await client.close();
  });

  test('the recent-failures ring keeps the last N per client, newest first', async () => {
    const { client } = makeClient();
    for (let i = 0; i < 5; i++) await client.request({ url: `${up.url}/boom?i=${i}`, client: 'a' });
    await client.request({ url: `${up.url}/boom?i=b`, client: 'b' });
    const a = client.failures.list({ client: 'a', limit: 10 });
    assert.deepEqual(
      a.map((f) => new URL(f.url).searchParams.get('i')),
      ['4', '3', '2'],
    );
    assert.equal(client.failures.list({ limit: 10 }).length, 4);
    await client.close();
  });
});

describe('helpers', () => {
  test('parseRetryAfter: seconds and HTTP dates', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.equal(parseRetryAfter('3', now), 3000);
    assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now), 5000);
    assert.equal(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now), 0);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });
  test('Redactor.url leaves ordinary URLs alone and says when one is invalid', () => {
    const r = new Redactor({ secretQueryParams: ['token'] });
    assert.equal(r.url('https://example.com/a?b=c'), 'https://example.com/a?b=c');
    assert.equal(r.url('not a url'), '[invalid url]');
  });
});

describe('node wiring', () => {
  test('custom buckets from config reach the JSON; recent failures are an operator endpoint', async () => {
    const t = await startTestNode({ yaml: 'observability:\n  metrics:\n    http_buckets_ms: [1, 2, 3]\n' });
    try {
      const viewer = await t.token('viewer');
      const operator = await t.token('operator');
      const m = (await (await t.acp('/acp/system/metrics', viewer)).json()) as {
        http: { buckets: Record<string, number> };
      };
      assert.deepEqual(Object.keys(m.http.buckets), ['1', '2', '3', '+Inf']);
      assert.equal((await t.acp('/acp/http-client/recent-failures', viewer, {})).status, 403);
      await t.node.httpClient
        .request({ url: 'http://127.0.0.1:9/unreachable', client: 'probe:x' })
        .catch(() => {});
      const res = await t.acp('/acp/http-client/recent-failures', operator, { client: 'probe:x' });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { items: { client: string; error: string }[]; total: number };
      assert.equal(body.total, 1);
      assert.equal(body.items[0]?.client, 'probe:x');
      assert.match(body.items[0]!.error, /ECONNREFUSED/);
    } finally {
      await t.close();
    }
  });
});
