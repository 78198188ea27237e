import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type CliNode, runCli, startCli } from './helpers/cli.ts';

// The README's quick tour and money loop, request for request, on a node started as the README
// starts one (development defaults, the bootstrap admin, `sluice demo`). The outputs the README
// shows after `#  {` are read from it and compared with what the node answers, so the tour cannot
// drift from the product (a review found it had: curl's own user agent made the tour's first
// request a bot, and the counts it showed were not what a reader got).
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The README's shell variable `name='…'`. */
function readmeVar(name: string): string {
  const m = README.match(new RegExp(`^${name}='([^']+)'`, 'm'));
  assert.ok(m, `README sets ${name}`);
  return m[1]!;
}

/** The JSON the README shows for the command on the line holding `after`: the `#  {…}` lines under it. */
function readmeOutputs(after: string): Record<string, unknown>[] {
  const lines = README.split('\n');
  const at = lines.findIndex((l) => l.includes(after));
  assert.ok(at >= 0, `README has ${after}`);
  const out: Record<string, unknown>[] = [];
  let i = at + 1;
  while (i < lines.length && lines[i]!.startsWith(' ')) i++; // the command's continuation lines
  for (; i < lines.length && lines[i]!.startsWith('#  {'); i++) {
    out.push(JSON.parse(lines[i]!.slice(3)) as Record<string, unknown>);
  }
  assert.ok(out.length > 0, `README shows outputs after ${after}`);
  return out;
}

const pick = (o: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.map((k) => [k, o[k]]));

describe('the README tour, as a reader runs it', () => {
  let dir: string;
  let node: CliNode;
  let auth: Record<string, string>;
  let postbackKey: string | undefined;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-tour-'));
    writeFileSync(
      join(dir, 'config.development.yml'),
      `app:\n  server:\n    host: 127.0.0.1\n    port: 0\nstorage:\n  sqlite:\n    path: ${join(dir, 'tour.db')}\n`,
    );
    const args = ['--config-dir', dir, '--mode', 'development'];
    node = await startCli(args, { cwd: dir });
    const token = node.stderr().match(/slc_[A-Za-z0-9_-]{43}/)?.[0];
    assert.ok(token, 'the bootstrap token is printed');
    postbackKey = node.stderr().match(/pbk_[A-Za-z0-9_-]{43}/)?.[0];
    assert.ok(postbackKey, 'the postback key is printed');
    auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const demo = await runCli(['demo', ...args], { cwd: dir });
    assert.equal(demo.code, 0, demo.stderr);
  });
  after(async () => {
    node.child.kill('SIGTERM');
    await node.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  const acp = async (path: string, body: unknown = {}) => {
    const res = await fetch(`${node.url}/acp/${path}`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200, `${path}: ${res.status}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const go = async (path: string, headers: Record<string, string>, method = 'GET') => {
    const res = await fetch(`${node.url}${path}`, { method, headers, redirect: 'manual' });
    await res.arrayBuffer();
    return res;
  };

  test('a visitor, a click with its id, a postback, the click and its conversion, the flows and the report', async () => {
    const de = await go('/go/demo', { 'user-agent': readmeVar('DESKTOP'), 'cf-ipcountry': 'DE' });
    assert.equal(de.status, 302);
    assert.match(de.headers.get('location')!, /^https:\/\/example\.com\/de\?country=DE&rid=/);
    assert.equal(de.headers.get('x-client-country-code'), 'DE');

    const fr = await go('/go/demo?sub1=adset42', { 'user-agent': readmeVar('UA'), 'cf-ipcountry': 'FR' });
    const click = fr.headers.get('x-click-id')!;
    assert.ok(click);
    assert.ok(fr.headers.get('location')!.includes(`aff_sub=${click}&s1=adset42`));

    const pb = await fetch(
      `${node.url}/postback?click_id=${click}&status=sale&payout=12.50&currency=USD&txid=order-1&key=${postbackKey}`,
    );
    assert.equal(pb.status, 200);
    const [shownPostback] = readmeOutputs('/postback?click_id=');
    assert.deepEqual(
      pick((await pb.json()) as Record<string, unknown>, ['ok', 'status']),
      pick(shownPostback!, ['ok', 'status']),
    );

    // A click is shown from the click log's buffer until it is stored (within a second).
    let got: Record<string, unknown> | undefined;
    for (let i = 0; i < 100 && got === undefined; i++) {
      const res = await fetch(`${node.url}/acp/clicks/get`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ click_id: click }),
      });
      if (res.status === 200) got = (await res.json()) as Record<string, unknown>;
      else {
        await res.arrayBuffer();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    assert.ok(got, 'the click is stored');
    const [shownClick, shownConversion] = readmeOutputs('/acp/clicks/get');
    const c = got.click as Record<string, unknown>;
    assert.deepEqual(pick(c, Object.keys(shownClick!)), shownClick);
    const [conversion] = got.conversions as Record<string, unknown>[];
    assert.deepEqual(pick(conversion!, Object.keys(shownConversion!)), shownConversion);

    const bot = await go('/go/demo', { 'user-agent': 'facebookexternalhit/1.1' }, 'HEAD');
    assert.equal(bot.status, 302);
    // Counters reach the flows list with the stats flush (every second).
    const [shownFlow] = readmeOutputs('/acp/traffic-flows/list');
    let flow: Record<string, unknown> | undefined;
    for (let i = 0; i < 200; i++) {
      const list = await acp('traffic-flows/list');
      const demo = (list.items as Record<string, unknown>[]).find((f) => f.slug === 'demo')!;
      flow = pick(demo, Object.keys(shownFlow!));
      if (JSON.stringify(flow) === JSON.stringify(shownFlow)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(flow, shownFlow);

    const day = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const shownRows = readmeOutputs('/acp/reports/query');
    const expected = shownRows.map((r) => ({ ...r, day }));
    let rows: Record<string, unknown>[] = [];
    // The report reads the hourly rollups, written with the click log's flush (within a second).
    for (let i = 0; i < 200; i++) {
      const report = await acp('reports/query', {
        from: day,
        to: tomorrow,
        group_by: ['day', 'country'],
        filter: { is_bot: false },
      });
      rows = (report.rows as Record<string, unknown>[]).map((r) => pick(r, Object.keys(shownRows[0]!)));
      if (JSON.stringify(rows) === JSON.stringify(expected)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(rows, expected);
    assert.match(
      README,
      /"group_by\\":\[\\"day\\",\\"country\\"\],\\"filter\\":\{\\"is_bot\\":false\}/,
      'the query above',
    );
  });
});
