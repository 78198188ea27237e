import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ROLES } from '../../src/config/index.ts';
import { DIMENSIONS } from '../../src/reports/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

describe('GET /acp/: the console is served by the node itself', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  test('the page, with the tracing headers, a strict policy that admits exactly its import map', async () => {
    const res = await fetch(`${t.url}/acp/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(res.headers.get('x-server-id'), t.node.serverId);
    assert.ok(res.headers.get('x-request-id'));
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    const html = await res.text();
    const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)![1]!;
    const hash = createHash('sha256').update(importMap).digest('base64');
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, new RegExp(`script-src 'self' 'sha256-${hash.replace(/[+/]/g, '\\$&')}'`));
    assert.match(csp, /frame-ancestors 'none'/);
    // Every module the import map names is served.
    for (const path of Object.values(JSON.parse(importMap).imports) as string[]) {
      const mod = await fetch(t.url + path);
      assert.equal(mod.status, 200, path);
      assert.match(mod.headers.get('content-type') ?? '', /^text\/javascript/);
    }
  });

  test('/acp redirects to /acp/; assets revalidate with their ETag (304)', async () => {
    const r = await fetch(`${t.url}/acp`, { redirect: 'manual' });
    assert.equal(r.status, 308);
    assert.equal(r.headers.get('location'), '/acp/');
    const first = await fetch(`${t.url}/acp/assets/app.js`);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('cache-control'), 'no-cache');
    const etag = first.headers.get('etag')!;
    const again = await fetch(`${t.url}/acp/assets/app.js`, { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(await again.text(), '');
  });

  test('the console takes the server’s roles and report dimensions from vocabulary.js, never retyped', async () => {
    const res = await fetch(`${t.url}/acp/assets/vocabulary.js`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/javascript/);
    const mod = await import(`data:text/javascript,${encodeURIComponent(await res.text())}`);
    assert.deepEqual(mod.ROLES, ROLES);
    assert.deepEqual(mod.DIMENSIONS, DIMENSIONS);
    const dir = new URL('../../src/console/static/', import.meta.url);
    for (const name of readdirSync(dir).filter((n) => n.endsWith('.js'))) {
      const js = readFileSync(new URL(name, dir), 'utf8');
      assert.doesNotMatch(
        js,
        /'viewer',\s*'operator'|viewer:\s*0|'device_type',\s*'os'/,
        `${name} retypes a server list`,
      );
    }
  });

  test('only known asset names are served: anything else is a contract 404 with one api error record', async () => {
    for (const name of ['nope.js', '..%2Fconsole.ts', '..%2F..%2Fpackage.json', 'index.html']) {
      const res = await fetch(`${t.url}/acp/assets/${name}`);
      assert.equal(res.status, 404, name);
      const body = (await res.json()) as { error: { code: string; request_id: string } };
      assert.equal(body.error.code, 'resource.not_found');
      assert.equal(t.logs.apiErrors(body.error.request_id).length, 1);
    }
    const metrics = t.node.telemetry.systemMetrics().controllers as Record<string, { count: number }>;
    assert.ok(metrics['/acp/assets/:file']!.count >= 4, 'asset requests share one route entry');
  });
});
