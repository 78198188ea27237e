import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { runDoctor } from '../../src/doctor/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

/** An address of this machine that is not loopback: a client there is no trusted proxy by default. */
const outside = Object.values(networkInterfaces())
  .flat()
  .find((a) => a !== undefined && !a.internal && a.family === 'IPv4')?.address;

/**
 * A same-host reverse proxy, as a minimal nginx `proxy_pass` is: it listens where clients reach it
 * and forwards to the node on loopback (a trusted proxy by default), passing every header on, or
 * with the country header cleared as docs/deployment.md says to.
 */
async function proxy(host: string, target: string, clear?: string): Promise<{ server: Server; url: string }> {
  const to = new URL(target);
  const server = createServer((req, res) => {
    const headers = { ...req.headers };
    if (clear !== undefined) delete headers[clear];
    const up = request(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, url: `http://${host}:${(server.address() as AddressInfo).port}` };
}

describe('sluice doctor tells when a client picks its own country behind a proxy', {
  skip: outside === undefined ? 'this machine has no non-loopback IPv4 address' : false,
}, () => {
  let t: TestNode;
  let viewer: string;
  let open: { server: Server; url: string };
  let cleared: { server: Server; url: string };
  before(async () => {
    t = await startTestNode();
    viewer = await t.token('viewer');
    open = await proxy(outside!, t.url);
    cleared = await proxy(outside!, t.url, 'cf-ipcountry');
  });
  after(async () => {
    open.server.close();
    cleared.server.close();
    await t.close();
  });

  const countryItem = async (url: string) => {
    const report = await runDoctor({
      urls: [url],
      token: viewer,
      taskP95Ms: 60_000,
      clientErrorRate: 1,
      discover: false,
    });
    const node = report.nodes[0]!;
    assert.ok(node.reachable, JSON.stringify(node));
    const p6 = node.procedures.find((p) => p.key === 'acp_health')!;
    return p6.items.find((i) => i.subject === 'client country');
  };

  test('a proxy that passes the header on: a warning naming the header and the fix', async () => {
    const item = await countryItem(open.url);
    assert.ok(item, 'procedure 6 has a client country item');
    assert.equal(item.finding, false);
    assert.match(item.message, /^warning: a cf-ipcountry header the doctor sent as a client was believed/);
    assert.match(item.message, /docs\/deployment\.md/);
    assert.deepEqual(item.data, { header: 'cf-ipcountry', believed: true, direct: false });
  });

  test('a proxy that clears it, as the shipped examples do: not believed, no warning', async () => {
    const item = await countryItem(cleared.url);
    assert.ok(item);
    assert.equal(item.finding, false);
    assert.equal(item.message, 'a cf-ipcountry header sent by a client is not believed');
  });

  test('the node reached directly on loopback (trusted by default): nothing judged', async () => {
    assert.equal(await countryItem(t.url), undefined);
  });
});
