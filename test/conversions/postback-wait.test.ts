// Postbacks that wait for a click another node took a moment ago (src/conversions/postback-route.ts):
// the stop, the order of one conversion's postbacks, and clients that leave.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_WAITING } from '../../src/http/fast-path.ts';
import { newBatchId } from '../../src/storage/index.ts';
import { flowWithDefault, startTestNode, type TestNode } from '../helpers/node.ts';
import { dropSchema, pgAvailable, testSchema } from '../helpers/postgres.ts';
import { newClick } from '../helpers/records.ts';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
const ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
const enc = (v: number, n: number) => {
  let o = '';
  for (let i = n - 1; i >= 0; i--) o += ALPHABET[Math.floor(v / 2 ** (6 * i)) % 64];
  return o;
};
/** A made-up click id whose embedded time is `ms`. */
const madeUp = (ms: number, tag: string) => enc(ms, 8) + `${tag}zzzzzzzzzzzzzz`.slice(0, 14);

describe('a postback waiting for its click when the node stops (SQLite)', () => {
  test('is answered 503 node.stopping at once (to be sent again), before the storage closes, and never queries it after', async () => {
    const t: TestNode = await startTestNode({
      yaml: 'app:\n  server:\n    shutdown_timeout_ms: 1500\nclicks:\n  flush_interval_ms: 20000\n',
    });
    const id = madeUp(Date.now(), 'shutdown');
    const answer = fetch(`${t.url}/postback?key=${t.postbackKey}&click_id=${id}&txid=x`).then(
      async (r) => `${r.status} ${((await r.json()) as { error: { code: string } }).error.code}`,
      (e: Error) => `no answer: ${(e.cause as NodeJS.ErrnoException | undefined)?.code ?? e.message}`,
    );
    await sleep(300); // the postback is waiting (were it still in flight, the stop answers 503)
    await t.close();
    const status = await answer;
    await sleep(800); // time for a wait that outlived the stop to query the closed storage
    const late = t.logs.apiErrors().filter((l) => l.code === 'db.unavailable');
    // A 404 would tell the network the click does not exist; another node may well have it.
    assert.equal(status, '503 node.stopping', 'answered at the stop, not cut, to be sent again');
    assert.equal(late.length, 0, 'no query after the storage closed');
  });
});

const skipPg = !(await pgAvailable()) && 'PostgreSQL unavailable';

describe('postbacks waiting on another node (two nodes, PostgreSQL)', { skip: skipPg }, () => {
  const schema = testSchema();
  let a: TestNode;
  let b: TestNode;
  // A flush interval long enough that node a only writes when the test says so.
  const yaml = (id: string) => `app:\n  server:\n    id: ${id}\nclicks:\n  flush_interval_ms: 10000\n`;
  before(async () => {
    a = await startTestNode({ postgres: { schema }, yaml: yaml('rb-a') });
    b = await startTestNode({ postgres: { schema }, yaml: yaml('rb-b') });
    const token = await a.token('admin');
    await flowWithDefault(a, token, 'rbw', 'https://x.test/');
  });
  after(async () => {
    await b.close();
    await a.close();
    await dropSchema(schema);
  });

  const click = async () => {
    const res = await fetch(`${a.url}/go/rbw`, {
      redirect: 'manual',
      headers: { 'user-agent': CHROME, 'cf-ipcountry': 'NL' },
    });
    assert.equal(res.status, 302);
    return res.headers.get('x-click-id')!;
  };

  test('two postbacks of one conversion while its click is on the way: the later one sent stays', async () => {
    let inverted = 0;
    const runs = 4;
    for (let i = 0; i < runs; i++) {
      const id = await click();
      const t0 = performance.now();
      const first = fetch(
        `${b.url}/postback?key=${a.postbackKey}&click_id=${id}&txid=tx&status=lead&payout=1`,
      );
      await sleep(150);
      const second = fetch(
        `${b.url}/postback?key=${a.postbackKey}&click_id=${id}&txid=tx&status=rejected&payout=0`,
      );
      // Node a writes the click after the first postback's poll at ~200 ms, before the second's at ~350.
      await sleep(Math.max(0, 260 - (performance.now() - t0)));
      await a.node.clickLog.persist();
      const answers = [await (await first).json(), await (await second).json()];
      const [stored] = await b.node.storage.conversions.ofClick(id);
      if (stored?.status !== 'rejected') inverted++;
      assert.deepEqual(
        answers.map((a) => (a as { status: string }).status),
        ['lead', 'rejected'],
      );
    }
    assert.equal(
      inverted,
      0,
      `${inverted} of ${runs}: the earlier postback (lead) overwrote the later (rejected)`,
    );
  });

  test('a client that leaves frees its place: 256 gone, a real postback still waits and finds its click', async () => {
    const controllers: AbortController[] = [];
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < 256; i++) {
      const c = new AbortController();
      controllers.push(c);
      pending.push(
        fetch(`${b.url}/postback?key=${a.postbackKey}&click_id=${madeUp(Date.now(), `f${i}`)}`, {
          signal: c.signal,
        }).catch(() => undefined),
      );
    }
    await sleep(500);
    for (const c of controllers) c.abort(); // every client is gone: their places are free
    await Promise.all(pending);
    await sleep(200); // the node sees the 256 connections close
    const id = await click();
    const t0 = performance.now();
    const pb = fetch(`${b.url}/postback?key=${a.postbackKey}&click_id=${id}&txid=real&status=sale&payout=5`);
    await sleep(100);
    await a.node.clickLog.persist();
    const res = await pb;
    const took = Math.round(performance.now() - t0);
    const body = await res.text();
    assert.equal(res.status, 200, `after ${took} ms: ${body}`);
  });
});

describe('a waiting postback and its client connection (SQLite)', () => {
  let t: TestNode;
  let port: number;
  before(async () => {
    t = await startTestNode({ yaml: 'clicks:\n  flush_interval_ms: 2000\n' }); // a 3 s wait
    port = Number(new URL(t.url).port);
  });
  after(() => t.close());

  test('a client that half-closes after its request (served since httpAllowHalfOpen) still waits for its click', async () => {
    const id = madeUp(Date.now(), 'half');
    const answer = new Promise<string>((resolve) => {
      const s = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      let o = '';
      s.on('data', (d) => (o += d));
      s.on('close', () => resolve(o.split('\r\n')[0]!));
      s.end(`GET /postback?key=${t.postbackKey}&click_id=${id}&txid=h HTTP/1.1\r\nhost: x\r\n\r\n`);
    });
    await sleep(600); // the click arrives from another node's flush
    await t.node.storage.clicks.insertBatch({
      id: newBatchId(),
      server_id: 'n2',
      rows: [newClick({ click_id: id })],
    });
    assert.equal(await answer, 'HTTP/1.1 200 OK');
  });

  test('requests pipelined behind a waiting postback: a few wait their turn, a flood closes the connection', async () => {
    // Waiting requests write nothing, so Node kept reading: 200k behind one waiting postback held
    // ~1 GB and froze the node for tens of seconds clearing its queues.
    const pipeline = (behind: number) =>
      new Promise<{ statuses: string[]; closedByNode: boolean }>((resolve) => {
        const s = connect(port, '127.0.0.1');
        let out = '';
        let closedByNode = false;
        s.on('data', (d) => (out += d));
        s.on('end', () => (closedByNode = true));
        s.on('error', () => {});
        s.on('close', () =>
          resolve({ statuses: [...out.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]!), closedByNode }),
        );
        let req = `GET /postback?key=${t.postbackKey}&click_id=${madeUp(Date.now(), `deep${behind}`)}&txid=d HTTP/1.1\r\nhost: x\r\n\r\n`;
        for (let i = 0; i < behind; i++) req += 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n';
        s.write(req);
        setTimeout(() => s.end(), 4500).unref();
      });
    const few = await pipeline(5);
    assert.deepEqual(
      few.statuses,
      ['404', '200', '200', '200', '200', '200'],
      'answered in order after the wait',
    );
    const flood = await pipeline(MAX_WAITING + 200);
    assert.ok(flood.closedByNode, 'the node closed the connection');
    assert.deepEqual(flood.statuses, [], 'nothing was answered on it');
    const started = Date.now();
    const res = await fetch(`${t.url}/healthz`);
    assert.equal(res.status, 200);
    assert.ok(Date.now() - started < 2000, 'and the node answers others at once');
  });

  test('many pipelined waiting postbacks on one keep-alive socket leave no listener warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const s = connect(port, '127.0.0.1');
    s.on('error', () => {});
    let req = '';
    for (let i = 0; i < 12; i++)
      req += `GET /postback?key=${t.postbackKey}&click_id=${madeUp(Date.now(), `pipe${i}`)}&txid=p HTTP/1.1\r\nhost: x\r\n\r\n`;
    s.write(req);
    await sleep(500);
    s.destroy();
    await sleep(100);
    process.off('warning', onWarning);
    assert.deepEqual(warnings, []);
  });
});

describe('postbacks waiting on another node whose clicks a clicks.flush task writes (PostgreSQL)', {
  skip: skipPg,
}, () => {
  const schema = testSchema();
  let a: TestNode;
  let b: TestNode;
  // The task's schedule never comes by itself: node a writes its clicks when the test runs it. The
  // postback's wait follows the task (capped at 30 s), not the click log's idle 1 s timer.
  const yaml = (id: string) =>
    `app:\n  server:\n    id: ${id}\ncron:\n  tasks:\n    click_writer:\n      kind: clicks.flush\n      schedule: '0 0 1 1 *'\n`;
  before(async () => {
    a = await startTestNode({ postgres: { schema }, yaml: yaml('cf-a') });
    b = await startTestNode({ postgres: { schema }, yaml: yaml('cf-b') });
    const token = await a.token('admin');
    await flowWithDefault(a, token, 'cfw', 'https://x.test/');
  });
  after(async () => {
    await b.close();
    await a.close();
    await dropSchema(schema);
  });

  test("waits past flush_interval_ms + 1 s for the task's run, and finds its click", async () => {
    const res = await fetch(`${a.url}/go/cfw`, { redirect: 'manual', headers: { 'user-agent': CHROME } });
    assert.equal(res.status, 302);
    const id = res.headers.get('x-click-id')!;
    const pb = fetch(`${b.url}/postback?key=${a.postbackKey}&click_id=${id}&status=sale&payout=3`);
    // Past the 2 s a postback waited before (flush_interval_ms + 1 s), then the task runs on node a.
    await sleep(3000);
    await a.node.scheduler.runNow('click_writer').done;
    const answer = await pb;
    assert.equal(answer.status, 200, await answer.clone().text());
    assert.equal(((await answer.json()) as { status: string }).status, 'sale');
  });
});
