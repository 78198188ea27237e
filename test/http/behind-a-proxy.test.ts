import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TSchema } from '@sinclair/typebox';
import { ConfigSchema } from '../../src/config/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** A default of the schema, read where it is defined once. */
function schemaDefault(path: string): unknown {
  let s = ConfigSchema as TSchema;
  for (const k of path.split('.')) s = (s.properties as Record<string, TSchema>)[k]!;
  return s.default;
}
const HEADER = schemaDefault('app.server.country_header') as string;
const PROXIES = schemaDefault('app.server.trusted_proxies') as string[];

/** The lines of a config file that are not comments, trimmed. */
const directives = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));

describe('the shipped reverse-proxy examples set or clear what the node believes (docs/deployment.md)', () => {
  const doc = read('docs/deployment.md');
  const nginx = directives(read('examples/nginx.conf'));
  const caddy = directives(read('examples/Caddyfile'));

  test('nginx: X-Forwarded-For set to the peer, the default country header cleared; the docs quote both lines', () => {
    const xff = 'proxy_set_header X-Forwarded-For $remote_addr;';
    const country = `proxy_set_header ${HEADER} "";`;
    assert.ok(nginx.includes(xff), xff);
    assert.ok(nginx.includes(country), country);
    // Nothing else sends the country header on: no second line for it, no pass-through of every header.
    assert.deepEqual(
      nginx.filter((l) => l.toLowerCase().includes(HEADER)),
      [country],
    );
    assert.ok(doc.includes(`\`${xff}\``) && doc.includes(`\`${country}\``), 'docs/deployment.md quotes them');
  });

  test('Caddy: X-Forwarded-For set to the peer, the default country header removed; the docs quote both lines', () => {
    const xff = 'header_up X-Forwarded-For {remote_host}';
    const country = `header_up -${HEADER}`;
    assert.ok(caddy.includes(xff), xff);
    assert.ok(caddy.includes(country), country);
    assert.deepEqual(
      caddy.filter((l) => l.toLowerCase().includes(HEADER)),
      [country],
    );
    assert.ok(doc.includes(`\`${xff}\``) && doc.includes(`\`${country}\``), 'docs/deployment.md quotes them');
  });
});

describe('a node says at start whom it believes about a client', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  test('one info record names the trusted proxies and the country header', () => {
    const records = t.logs.lines.filter((l) => 'trusted_proxies' in l);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.level, 'info');
    assert.deepEqual(records[0]!.trusted_proxies, PROXIES);
    assert.equal(records[0]!.country_header, HEADER);
  });
});

/** nginx (Debian: `apt-get install nginx-light`) when installed; else why the test is skipped. */
function nginxMissing(): string | false {
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  if (r.error === undefined && r.status === 0) return false;
  const why = `nginx not found (${r.error?.message ?? `exit ${r.status}`}); install it (apt-get install nginx-light) to run the shipped example`;
  process.stderr.write(`# ${why}\n`);
  return why;
}

const freePort = () =>
  new Promise<number>((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });

describe('examples/nginx.conf in front of a real node', { skip: nginxMissing() }, () => {
  let t: TestNode;
  let dir: string;
  let nginx: ChildProcess;
  let shipped: string;
  let minimal: string;

  before(async () => {
    t = await startTestNode();
    dir = mkdtempSync(join(tmpdir(), 'sluice-nginx-'));
    mkdirSync(join(dir, 'logs'));
    const nodePort = new URL(t.url).port;
    const [a, b] = [await freePort(), await freePort()];
    shipped = `http://127.0.0.1:${a}`;
    minimal = `http://127.0.0.1:${b}`;
    // The example as shipped, but for the ports; and beside it the minimal proxy_pass the docs warn of.
    const example = read('examples/nginx.conf')
      .replace('server 127.0.0.1:8080;', `server 127.0.0.1:${nodePort};`)
      .replace('listen 80;', `listen 127.0.0.1:${a};`);
    assert.ok(example.includes(`listen 127.0.0.1:${a};`) && example.includes(`:${nodePort};`));
    writeFileSync(
      join(dir, 'nginx.conf'),
      `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${example}
  server {
    listen 127.0.0.1:${b};
    location / { proxy_pass http://127.0.0.1:${nodePort}; }
  }
}
`,
    );
    nginx = spawn('nginx', ['-p', dir, '-e', `${dir}/logs/error.log`, '-c', join(dir, 'nginx.conf')], {
      stdio: 'ignore',
    });
    await until(
      'nginx to answer',
      async () => {
        try {
          await (await fetch(`${shipped}/healthz`)).arrayBuffer();
          await (await fetch(`${minimal}/healthz`)).arrayBuffer();
          return true;
        } catch {
          return false;
        }
      },
      30_000,
    );
  });
  after(async () => {
    nginx?.kill();
    await t?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const countryVia = async (origin: string) => {
    const res = await fetch(`${origin}/healthz`, {
      headers: { [HEADER]: 'US', 'x-forwarded-for': '8.8.8.8' },
    });
    await res.arrayBuffer();
    return res.headers.get('x-client-country-code');
  };

  test("a client's own country header: believed through a minimal proxy_pass, not through the example", async () => {
    assert.equal(await countryVia(minimal), 'US', 'the risk the docs describe');
    assert.equal(await countryVia(shipped), null, 'cleared by the example: the address (loopback) has none');
  });
});
