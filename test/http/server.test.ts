import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../../src/config/index.ts';
import { ApiError } from '../../src/errors/index.ts';
import { createServer } from '../../src/http/index.ts';
import { createLogger, Telemetry } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';

/** The server alone, with routes of the test's own that fail in ways real routes should not. */
describe('server error path for failures inside handlers', () => {
  const logs = new LogCapture();
  let app: FastifyInstance;
  let telemetry: Telemetry;
  let url: string;
  before(async () => {
    const { config } = loadConfig({ configDir: 'config', mode: 'test', env: {} });
    telemetry = new Telemetry({
      clock: systemClock,
      serverId: 'srv-1',
      version: undefined,
      commit: 'abc',
      prefix: 'sluice',
      controllerBucketsMs: [1, 10],
      httpBucketsMs: [10],
      taskBucketsMs: [10],
      isLeader: () => true,
      processMetrics: false,
    });
    const logger = createLogger({ level: 'info', name: 'sluice', serverId: 'srv-1', destination: logs });
    app = createServer({ config, logger, telemetry, serverId: 'srv-1' });
    app.get('/bug', async () => {
      const secretPath = '/etc/internal/path';
      throw new TypeError(`cannot read property of undefined at ${secretPath}`);
    });
    app.get('/conflict', async () => {
      throw new ApiError('resource.conflict', 'slug taken', { details: { field: 'slug' } });
    });
    // A handler that got as far as a redirect (status, Location) before failing.
    app.get('/half-redirect', async (_request, reply) => {
      reply.code(302).header('location', 'https://example.com/next').header('cache-control', 'max-age=60');
      throw new Error('failed after the redirect was set up');
    });
    // A header value Node refuses: the answer itself throws when fastify writes its head.
    app.get('/bad-header', (_request, reply) => {
      reply.code(302).header('location', 'https://例え.jp/パス').send();
    });
    app.get('/bad-header-thrown', async (_request, reply) => {
      reply.code(307).header('location', 'https://x.test/\r\nset-cookie: a=b');
      throw new TypeError('bad state');
    });
    app.get('/logs-info', async (request) => {
      request.log.info({ step: 1 }, 'handler says hello');
      return { ok: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const addr = app.server.address();
    url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  });
  after(async () => {
    await app.close();
    telemetry.stop();
  });

  test('a thrown bug is 500 internal.error with no internals in the body, the cause in the log', async () => {
    const res = await fetch(`${url}/bug`);
    const text = await res.text();
    assert.equal(res.status, 500);
    const body = JSON.parse(text) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'internal.error');
    assert.ok(!text.includes('/etc/internal/path'));
    assert.ok(!text.includes('TypeError'));
    const [record, ...more] = logs.apiErrors(res.headers.get('x-request-id')!);
    assert.equal(more.length, 0);
    assert.equal(record?.http_status, 500);
    assert.match(
      String(record?.error),
      /TypeError: cannot read property of undefined at \/etc\/internal\/path/,
    );
  });

  test('an ApiError keeps its code, message and details', async () => {
    const res = await fetch(`${url}/conflict`);
    const body = (await res.json()) as { error: { code: string; message: string; details: unknown } };
    assert.equal(res.status, 409);
    assert.deepEqual(body.error, {
      code: 'resource.conflict',
      message: 'slug taken',
      request_id: res.headers.get('x-request-id'),
      details: { field: 'slug' },
    });
    assert.deepEqual(logs.apiErrors(res.headers.get('x-request-id')!)[0]?.details, { field: 'slug' });
  });

  test('an error after a handler set a redirect status, a Location or a bad header value still answers by the contract', async () => {
    for (const path of ['/half-redirect', '/bad-header', '/bad-header-thrown']) {
      const res = await fetch(`${url}${path}`, { redirect: 'manual', headers: { 'cf-ipcountry': 'de' } });
      const text = await res.text();
      assert.equal(res.status, 500, path);
      assert.equal(res.statusText, 'Internal Server Error', path);
      const id = res.headers.get('x-request-id');
      assert.ok(id, `${path}: X-Request-Id`);
      assert.equal(res.headers.get('x-server-id'), 'srv-1', path);
      assert.equal(res.headers.get('x-client-country-code'), 'DE', path);
      assert.equal(res.headers.get('location'), null, path);
      assert.equal(res.headers.get('cache-control'), null, path);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/, path);
      assert.deepEqual(JSON.parse(text), {
        error: { code: 'internal.error', message: 'Internal error.', request_id: id },
      });
      const records = logs.apiErrors(id!);
      assert.equal(records.length, 1, `${path}: exactly one api error record`);
      assert.equal(records[0]?.http_status, 500);
      assert.equal(records[0]?.code, 'internal.error');
    }
  });

  test('other log lines of a request carry request_id and trace_id', async () => {
    const res = await fetch(`${url}/logs-info`, { headers: { 'x-request-id': 'req-77' } });
    await res.json();
    const line = logs.lines.find((l) => l.message === 'handler says hello');
    assert.equal(line?.request_id, 'req-77');
    assert.equal(line?.trace_id, 'req-77');
    assert.equal(line?.server_id, 'srv-1');
    assert.equal(line?.step, 1);
  });

  test('durations land in the route recorder: count, errors, buckets', async () => {
    const r = telemetry.controllers.get('/bug');
    const before = r.count;
    await (await fetch(`${url}/bug`)).arrayBuffer();
    assert.equal(r.count, before + 1);
    assert.equal(r.errors, r.count);
    assert.equal(r.cumulative().at(-1), r.count);
  });
});
