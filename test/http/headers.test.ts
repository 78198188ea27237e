import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestNode, type TestNode, UUID } from '../helpers/node.ts';

describe('tracing headers on every response', () => {
  let t: TestNode;
  let viewer: string;
  before(async () => {
    t = await startTestNode({ yaml: 'app:\n  server:\n    id: node-a.1\n' });
    viewer = await t.token('viewer');
  });
  after(() => t.close());

  const cases: [string, () => Promise<Response>, number][] = [
    ['a 200', () => fetch(`${t.url}/healthz`), 200],
    ['a 404', () => fetch(`${t.url}/no/such/path`), 404],
    ['a 405', () => fetch(`${t.url}/acp/system/metrics`), 405],
    ['a 401', () => t.acp('/acp/system/metrics', undefined), 401],
    ['a 400', () => t.acp('/acp/system/metrics', viewer, '{oops'), 400],
    ['the ACP', () => t.acp('/acp/system/metrics', viewer), 200],
  ];
  for (const [name, call, status] of cases) {
    test(`${name} carries X-Request-Id and X-Server-Id`, async () => {
      const res = await call();
      await res.arrayBuffer();
      assert.equal(res.status, status);
      assert.match(res.headers.get('x-request-id') ?? '', UUID);
      assert.equal(res.headers.get('x-server-id'), 'node-a.1');
    });
  }

  test('a valid inbound X-Request-Id is reused, in the header, the body and the log record', async () => {
    const id = 'abc.DEF_1:2-3';
    const res = await fetch(`${t.url}/nowhere`, { headers: { 'x-request-id': id } });
    const body = (await res.json()) as { error: { request_id: string } };
    assert.equal(res.headers.get('x-request-id'), id);
    assert.equal(body.error.request_id, id);
    const [record, ...more] = t.logs.apiErrors(id);
    assert.equal(more.length, 0);
    assert.equal(record?.request_id, id);
    assert.equal(record?.trace_id, id);
  });

  for (const [what, value] of [
    ['too long', 'a'.repeat(129)],
    ['with a space', 'a b'],
    ['with a slash', 'a/b'],
    ['with unicode', 'idé'],
    ['with a comma (two headers joined)', 'a,b'],
  ] as const) {
    test(`an inbound X-Request-Id ${what} is replaced by a UUID`, async () => {
      const res = await fetch(`${t.url}/healthz`, { headers: { 'x-request-id': value } });
      await res.arrayBuffer();
      assert.match(res.headers.get('x-request-id') ?? '', UUID);
    });
  }

  test('128 characters is still accepted', async () => {
    const id = 'x'.repeat(128);
    const res = await fetch(`${t.url}/healthz`, { headers: { 'x-request-id': id } });
    await res.arrayBuffer();
    assert.equal(res.headers.get('x-request-id'), id);
  });

  test('each request without one gets a distinct id', async () => {
    const ids = new Set<string | null>();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${t.url}/healthz`);
      await res.arrayBuffer();
      ids.add(res.headers.get('x-request-id'));
    }
    assert.equal(ids.size, 20);
  });

  describe('X-Client-Country-Code from a trusted proxy', () => {
    const country = async (headers: Record<string, string>) => {
      const res = await fetch(`${t.url}/healthz`, { headers });
      await res.arrayBuffer();
      return res.headers.get('x-client-country-code');
    };
    test('is the upper-cased country header', async () => {
      assert.equal(await country({ 'cf-ipcountry': 'de' }), 'DE');
      assert.equal(await country({ 'cf-ipcountry': ' FR ' }), 'FR');
    });
    test('is absent for the unknown markers', async () => {
      for (const v of ['XX', 'T1', 'ZZ', 'A1', 'A2', 'O1', 'xx'])
        assert.equal(await country({ 'cf-ipcountry': v }), null, v);
    });
    test('is absent for malformed values and when the header is missing', async () => {
      for (const v of ['D', 'DEU', 'D1', '12', 'é'])
        assert.equal(await country({ 'cf-ipcountry': v }), null, v);
      assert.equal(await country({}), null);
    });
    test('a client-sent X-Client-Country-Code is never believed', async () => {
      assert.equal(await country({ 'x-client-country-code': 'US' }), null);
      assert.equal(await country({ 'x-client-country-code': 'US', 'cf-ipcountry': 'JP' }), 'JP');
    });
  });
});

describe('X-Client-Country-Code from an untrusted peer or another header', () => {
  test('an untrusted peer is not believed', async () => {
    const t = await startTestNode({ yaml: 'app:\n  server:\n    trusted_proxies: [10.0.0.0/8]\n' });
    try {
      const res = await fetch(`${t.url}/healthz`, { headers: { 'cf-ipcountry': 'DE' } });
      await res.arrayBuffer();
      assert.equal(res.headers.get('x-client-country-code'), null);
    } finally {
      await t.close();
    }
  });

  test('app.server.country_header names the header to read', async () => {
    const t = await startTestNode({ yaml: 'app:\n  server:\n    country_header: X-Geo-Country\n' });
    try {
      const a = await fetch(`${t.url}/healthz`, { headers: { 'x-geo-country': 'br', 'cf-ipcountry': 'DE' } });
      await a.arrayBuffer();
      assert.equal(a.headers.get('x-client-country-code'), 'BR');
    } finally {
      await t.close();
    }
  });

  test('without app.server.id the node generates one, stable for the process', async () => {
    const t = await startTestNode();
    try {
      const ids = new Set<string | null>();
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${t.url}/healthz`);
        await res.arrayBuffer();
        ids.add(res.headers.get('x-server-id'));
      }
      assert.equal(ids.size, 1);
      const [id] = ids;
      assert.match(id ?? '', /^[A-Za-z0-9._:-]+-[0-9a-f]{8}$/);
      assert.equal(id, t.node.serverId);
    } finally {
      await t.close();
    }
  });
});
