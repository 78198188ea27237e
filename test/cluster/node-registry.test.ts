import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openSqlite } from '../../src/storage/index.ts';
import { ManualClock, systemClock } from '../../src/time/index.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { until } from '../helpers/until.ts';

interface NodesAnswer {
  items: { server_id: string; is_leader: boolean; alive: boolean; last_seen: string }[];
  leader_id: string | null;
}

const MINUTE = 60_000;
const DAY = 86_400_000;

/**
 * One node with local election on SQLite, on a database file earlier runs left rows in (a node
 * restarted without `app.server.id` gets a new id each time). Those rows are written through the
 * store with a clock set back, before the node starts: no waiting on real time.
 */
describe('the node registry of a single node on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-registry-'));
  const path = join(dir, 'sluice.db');
  let n: TestNode;
  let token: string;
  const list = async () => (await (await n.acp('/acp/cluster/nodes', token, {})).json()) as NodesAnswer;

  before(async () => {
    const past = (agoMs: number) => {
      const store = openSqlite(path, new ManualClock(Date.now() - agoMs));
      return store;
    };
    for (const [id, ago] of [
      ['earlier-run', 10 * MINUTE],
      ['long-gone-run', 2 * DAY],
    ] as const) {
      const store = past(ago);
      await store.migrate();
      // As the earlier runs wrote it: each was the (local) leader when it last beat.
      await store.cluster.heartbeat({
        server_id: id,
        started_at: new Date(Date.now() - ago - MINUTE).toISOString(),
        version: undefined,
        commit: 'old',
        is_leader: true,
      });
      await store.close();
    }
    n = await startTestNode({
      yaml: `app:\n  server:\n    id: this-run\nstorage:\n  sqlite:\n    path: ${path}\ncluster:\n  renew_interval_ms: 1000\n`,
    });
    token = await n.token('viewer');
  });
  after(async () => {
    await n.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('only the running node is is_leader; an earlier run is listed not alive, a run unseen for a day is gone', async () => {
    const nodes = await list();
    assert.equal(nodes.leader_id, 'this-run');
    assert.deepEqual(
      nodes.items.map((x) => [x.server_id, x.is_leader, x.alive]),
      [
        ['earlier-run', false, false],
        ['this-run', true, true],
      ],
    );
  });

  test('a local node keeps beating: its last_seen moves on, so it stays alive past three renew intervals', async () => {
    const first = (await list()).items.find((x) => x.server_id === 'this-run')!.last_seen;
    await until(
      'a later heartbeat',
      async () => (await list()).items.find((x) => x.server_id === 'this-run')!.last_seen > first,
      5000,
      20,
    );
  });

  test('the leader deletes the nodes unseen for cluster.forget_after_ms; a graceful stop leaves the registry', async () => {
    // Everything stored, with cuts wide enough to show rows however old.
    const everything = { aliveWithinMs: DAY, forgetAfterMs: 30 * DAY };
    const stored = await n.node.storage.cluster.nodes(everything);
    assert.deepEqual(
      stored.map((x) => x.server_id),
      ['earlier-run', 'this-run'],
    );
    await n.node.stop();
    const after = openSqlite(path, systemClock);
    try {
      assert.deepEqual(
        (await after.cluster.nodes(everything)).map((x) => x.server_id),
        ['earlier-run'],
        'the stopped node took itself out; the crashed earlier run stays until forgotten',
      );
    } finally {
      await after.close();
    }
  });
});
