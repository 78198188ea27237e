import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { CLICK_ID_RE, ClickDescriber, ClickLog } from '../../src/clicks/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { createServer } from '../../src/http/index.ts';
import { RoutingLedger, RoutingService, registerGoRoute } from '../../src/routing/index.ts';
import { openSqlite, type Storage } from '../../src/storage/index.ts';
import { createLogger, Telemetry } from '../../src/telemetry/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { LogCapture, UUID } from '../helpers/node.ts';
import { seeded } from '../helpers/random.ts';
import { VISITOR_SECRET } from '../helpers/user-agents.ts';

/** Sends one raw request and returns the raw answer (head and body) as the server wrote it. */
function raw(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const text = got.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, end));
      if (length && got.length < end + 4 + Number(length[1])) return;
      socket.destroy();
      resolve(text);
    });
    socket.on('end', () => resolve(got.toString('latin1')));
    socket.write(request);
  });
}

function makeTelemetry() {
  return new Telemetry({
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
}

/**
 * The same requests to two servers over one routing service: one with the fast path (cache hits,
 * and 404s decided from the cache, answered from Node's request), one where fastify answers
 * everything. Their answers must be the
 * same bytes (but for `Date`), and they must count the same.
 */
describe('the fast path answers exactly what the fastify route answers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-fast-'));
  let storage: Storage;
  let routing: RoutingService;
  let ledger: RoutingLedger;
  const sides = {
    fast: {
      app: undefined as unknown as FastifyInstance,
      port: 0,
      logs: new LogCapture(),
      telemetry: makeTelemetry(),
      fastifySaw: 0,
      clickLog: undefined as unknown as ClickLog,
    },
    plain: {
      app: undefined as unknown as FastifyInstance,
      port: 0,
      logs: new LogCapture(),
      telemetry: makeTelemetry(),
      fastifySaw: 0,
      clickLog: undefined as unknown as ClickLog,
    },
  };

  before(async () => {
    const { config } = loadConfig({ configDir: 'config', mode: 'test', env: {} });
    storage = openSqlite(join(dir, 's.db'), systemClock);
    await storage.migrate();
    const flow = (slug: string, status: 'active' | 'paused' = 'active', forward_query = false) =>
      storage.flows.create({ slug, name: slug, status, rotation: 'weight', forward_query });
    const stream = (flow_id: string, i: number, over: Record<string, unknown>) =>
      storage.streams.create({
        flow_id,
        name: `s${i}`,
        type: 'regular',
        position: i,
        weight: 100 * (i + 1),
        status: 'active',
        filters: {},
        target_url: `https://example.com/${i}?c={country}&f={flow}&s={stream}&r={request_id}&k={click_id}&s1={sub1}&p={param:utm}&d={device_type}&o={os}&b={browser}&l={language}`,
        redirect_code: 302,
        ...over,
      });
    const alpha = await flow('alpha');
    await stream(alpha.id, 0, { type: 'forced', filters: { countries_include: ['JP'] }, redirect_code: 307 });
    await stream(alpha.id, 1, { filters: { countries_include: ['US', 'DE'] }, redirect_code: 301 });
    await stream(alpha.id, 2, { filters: { countries_exclude: ['FR'] } });
    await stream(alpha.id, 3, { type: 'default', target_url: 'https://example.com/default' });
    const beta = await flow('beta', 'paused');
    await stream(beta.id, 0, { type: 'default' });
    const gamma = await flow('gamma');
    await stream(gamma.id, 0, { type: 'forced', filters: { countries_include: ['JP'] } });
    const delta = await flow('delta', 'active', true);
    await stream(delta.id, 0, { type: 'default', target_url: 'https://example.com/d?aff={click_id}#top' });

    const logger = createLogger({
      level: 'info',
      name: 'sluice',
      serverId: 'srv-1',
      destination: new LogCapture(),
    });
    ledger = new RoutingLedger({ storage, logger, capsIntervalMs: 0 });
    routing = new RoutingService({ storage, logger, ledger, cacheMaxEntries: 100, cacheTtlMs: 600_000 });
    for (const [name, side] of Object.entries(sides)) {
      const logger = createLogger({
        level: 'info',
        name: 'sluice',
        serverId: 'srv-1',
        destination: side.logs,
      });
      side.app = createServer({
        config,
        logger,
        telemetry: side.telemetry,
        serverId: 'srv-1',
        fastPath: name === 'fast',
      });
      // Runs only for what fastify answers: the proof of which path answered.
      side.app.addHook('onResponse', (_request, _reply, done) => {
        side.fastifySaw++;
        done();
      });
      side.clickLog = new ClickLog({
        store: storage.clicks,
        logger,
        serverId: 'srv-1',
        bufferMax: 10_000,
        flushIntervalMs: 0,
      });
      const describer = new ClickDescriber({
        clock: systemClock,
        userAgentCacheMax: 100,
        visitorSecret: VISITOR_SECRET,
        uniquenessTtlHours: 24,
        uniquenessMaxEntries: 1000,
        shareUniqueness: false,
      });
      registerGoRoute(
        side.app,
        { cache: routing.cache, ledger },
        { describer, log: side.clickLog },
        systemClock,
        seeded(11),
      );
      await side.app.listen({ port: 0, host: '127.0.0.1' });
      side.port = (side.app.server.address() as { port: number }).port;
    }
  });
  after(async () => {
    for (const side of Object.values(sides)) await side.app.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** What a request to both sides is expected to be: answered by the fast path or by fastify. */
  const cases: [what: string, request: string, fast: boolean][] = [
    [
      'a cold slug (loaded by the route)',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-1\r\ncf-ipcountry: US\r\n\r\n',
      false,
    ],
    [
      'a cached slug, forced stream (307)',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-2\r\ncf-ipcountry: JP\r\n\r\n',
      true,
    ],
    [
      'a cached slug, 301, lower-case country',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-3\r\ncf-ipcountry: de\r\n\r\n',
      true,
    ],
    [
      'an unknown-country marker',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-4\r\ncf-ipcountry: XX\r\n\r\n',
      true,
    ],
    [
      'no country header, weighted rotation',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-5\r\n\r\n',
      true,
    ],
    [
      'excluded country, weighted rotation',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-6\r\ncf-ipcountry: FR\r\n\r\n',
      true,
    ],
    [
      'a query string',
      'GET /go/alpha?utm=a%20b&x=1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-7\r\ncf-ipcountry: BR\r\n\r\n',
      true,
    ],
    [
      'a client-sent X-Client-Country-Code',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-8\r\nX-Client-Country-Code: JP\r\n\r\n',
      true,
    ],
    ['no X-Request-Id (a new one)', 'GET /go/alpha HTTP/1.1\r\nHost: x\r\ncf-ipcountry: US\r\n\r\n', true],
    [
      'an X-Request-Id not to be believed',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: a/b\r\n\r\n',
      true,
    ],
    [
      'Connection: close',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-9\r\nConnection: close\r\n\r\n',
      true,
    ],
    ['HTTP/1.0', 'GET /go/alpha HTTP/1.0\r\nHost: x\r\nX-Request-Id: r-10\r\n\r\n', true],
    ['HTTP/1.0 without Host', 'GET /go/alpha HTTP/1.0\r\nX-Request-Id: r-11\r\n\r\n', false],
    ['HTTP/1.1 without Host (400)', 'GET /go/alpha HTTP/1.1\r\nX-Request-Id: r-12\r\n\r\n', false],
    ['HEAD', 'HEAD /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-13\r\n\r\n', false],
    [
      'a GET with Content-Length: 0',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-14\r\nContent-Length: 0\r\n\r\n',
      false,
    ],
    ['a percent-encoded slug', 'GET /go/al%70ha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-15\r\n\r\n', false],
    [
      'a trailing slash (no route)',
      'GET /go/alpha/ HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-16\r\n\r\n',
      false,
    ],
    ['not a slug', 'GET /go/ALPHA HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-17\r\n\r\n', false],
    ['a paused flow, cold (404)', 'GET /go/beta HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-18\r\n\r\n', false],
    ['a paused flow, cached (404)', 'GET /go/beta HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-19\r\n\r\n', true],
    ['an unknown slug, cold (404)', 'GET /go/nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-20\r\n\r\n', false],
    ['an unknown slug, cached (404)', 'GET /go/nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-21\r\n\r\n', true],
    [
      'no stream matches, cold (404)',
      'GET /go/gamma HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-22\r\ncf-ipcountry: US\r\n\r\n',
      false,
    ],
    [
      'no stream matches, cached (404)',
      'GET /go/gamma HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-23\r\ncf-ipcountry: US\r\n\r\n',
      true,
    ],
    [
      'a cached slug with a forced match',
      'GET /go/gamma HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-24\r\ncf-ipcountry: JP\r\n\r\n',
      true,
    ],
    [
      'a person with sub-ids, a parameter, a user agent and a language',
      'GET /go/alpha?sub1=a%20b&utm=x%2Fy&sub1=second HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-25\r\ncf-ipcountry: US\r\n' +
        'User-Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36\r\n' +
        'Accept-Language: de-CH,de;q=0.9\r\nReferer: https://News.example/a\r\n\r\n',
      true,
    ],
    [
      'the same person again (not unique)',
      'GET /go/alpha?sub1=a%20b HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-26\r\ncf-ipcountry: US\r\n' +
        'User-Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36\r\n\r\n',
      true,
    ],
    [
      'a link previewer (a bot, routed)',
      'GET /go/alpha HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-27\r\nUser-Agent: facebookexternalhit/1.1\r\n\r\n',
      true,
    ],
    [
      'a bot no stream takes, cached (404)',
      'GET /go/gamma HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-28\r\ncf-ipcountry: US\r\n\r\n',
      true,
    ],
    [
      'forward_query, cold',
      'GET /go/delta?a=1&b=%C3%A9 HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-29\r\n\r\n',
      false,
    ],
    [
      'forward_query, cached, an empty query',
      'GET /go/delta? HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-30\r\n\r\n',
      true,
    ],
  ];

  for (const [what, request, fast] of cases) {
    // A cold slug is cold for each side: the two share one routing cache.
    const cold = what.includes('cold') ? /GET \/go\/([a-z]+)/.exec(request)![1] : undefined;
    test(`${what}: ${fast ? 'the fast path' : 'fastify'} answers, the same bytes, counted once`, async () => {
      const counted = () => ({
        hits: ledger.counters.totalHits,
        noMatch: ledger.counters.totalNoMatch,
        bots: ledger.counters.totalBots,
        uniques: ledger.counters.totalUniques,
        cacheHits: routing.cache.hits,
        cacheMisses: routing.cache.misses,
      });
      const answers: string[] = [];
      const ids: (string | undefined)[] = [];
      const deltas: ReturnType<typeof counted>[] = [];
      const logged: unknown[] = [];
      for (const side of [sides.fast, sides.plain]) {
        const saw = side.fastifySaw;
        if (cold !== undefined) routing.cache.invalidate(cold);
        const before = counted();
        const answer = await raw(side.port, request);
        const now = counted();
        // A click has an id of the one shape, on the answer and (when it was a click) in the log.
        const clickId = /\r\nx-click-id: ([^\r]*)/.exec(answer)?.[1];
        const record = clickId === undefined ? undefined : side.clickLog.find(clickId);
        if (clickId !== undefined) {
          assert.match(clickId, CLICK_ID_RE);
          assert.equal(clickId.length, 22);
          assert.ok(record, 'the click is in the log');
        }
        const { click_id: _c, created_at: _t, ...rest } = record ?? { click_id: '', created_at: '' };
        logged.push(clickId === undefined ? undefined : rest);
        deltas.push({
          bots: now.bots - before.bots,
          uniques: now.uniques - before.uniques,
          hits: now.hits - before.hits,
          noMatch: now.noMatch - before.noMatch,
          cacheHits: now.cacheHits - before.cacheHits,
          cacheMisses: now.cacheMisses - before.cacheMisses,
        });
        if (side === sides.fast) assert.equal(side.fastifySaw - saw, fast ? 0 : 1, 'which path answered');
        const id = /\r\nx-request-id: ([^\r]*)/.exec(answer)?.[1];
        ids.push(id);
        // Date is the only header that may differ; a generated id differs by design.
        answers.push(
          answer
            .replace(/\r\ndate: [^\r]*/i, '')
            .replaceAll(id ?? '\0', '<id>')
            .replaceAll(clickId ?? '\0', '<click>'),
        );
      }
      assert.equal(answers[0], answers[1]);
      assert.deepEqual(logged[0], logged[1], 'logged alike');
      assert.deepEqual(deltas[0], deltas[1], 'counted alike');
      assert.ok(deltas[0]!.hits <= 1 && deltas[0]!.noMatch <= 1 && deltas[0]!.cacheHits <= 1, 'once');
      if (!/X-Request-Id: r-/.test(request)) for (const id of ids) assert.match(id ?? '', UUID);
      else assert.equal(ids[0], /X-Request-Id: (r-\d+)/.exec(request)![1]);
    });
  }

  test('both record the same requests and errors, and write the same api error records', () => {
    for (const route of ['/go/:slug', '__unmatched__']) {
      const fast = sides.fast.telemetry.controllers.get(route).entry();
      const plain = sides.plain.telemetry.controllers.get(route).entry();
      assert.deepEqual([fast.count, fast.errors], [plain.count, plain.errors], route);
    }
    const routed = cases.filter(([what]) => !what.includes('no route')).length;
    assert.equal(sides.fast.telemetry.controllers.get('/go/:slug').count, routed);
    const records = (logs: LogCapture) =>
      logs
        .apiErrors()
        .map(({ time: _t, request_id, trace_id, ...r }) => ({ ...r, same: request_id === trace_id }));
    assert.ok(sides.fast.logs.apiErrors().length >= 7);
    assert.deepEqual(records(sides.fast.logs), records(sides.plain.logs));
  });
});
