import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { newBatchId, openSqlite } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';

const mode = (path: string) => statSync(path).mode & 0o777;
const octal = (m: number) => m.toString(8).padStart(4, '0');

describe('SQLite files are private to their owner (a security review)', () => {
  let base: string;
  let umask: number;
  before(() => {
    base = mkdtempSync(join(tmpdir(), 'sluice-modes-'));
    // The usual umask, under which the files came out world-readable.
    umask = process.umask(0o022);
  });
  after(() => {
    process.umask(umask);
    rmSync(base, { recursive: true, force: true });
  });

  for (const node of [false, true]) {
    test(`a new data folder is 0700, the database and its -wal and -shm 0600 (${node ? 'a node' : 'a command'})`, async () => {
      const dir = join(base, `fresh-${node}`, 'data');
      const path = join(dir, 'sluice.db');
      const s = openSqlite(path, systemClock, { checkpointThread: node, writeThread: node });
      try {
        await s.migrate();
        await s.clicks.insertBatch({
          id: newBatchId(),
          server_id: 'n1',
          rows: [newClick({ click_id: 'k1' })],
        });
        assert.ok(existsSync(`${path}-wal`), 'a write left a -wal file');
        assert.equal(octal(mode(join(base, `fresh-${node}`))), '0700', 'each folder made for it');
        assert.equal(octal(mode(dir)), '0700', 'the data folder');
        for (const f of [path, `${path}-wal`, `${path}-shm`]) assert.equal(octal(mode(f)), '0600', f);
      } finally {
        await s.close();
      }
    });
  }

  test('an existing folder and file keep the modes an operator gave them', async () => {
    const dir = join(base, 'chosen');
    mkdirSync(dir);
    chmodSync(dir, 0o750);
    const path = join(dir, 'sluice.db');
    writeFileSync(path, '');
    chmodSync(path, 0o640);
    const s = openSqlite(path, systemClock);
    try {
      await s.migrate();
    } finally {
      await s.close();
    }
    assert.equal(octal(mode(dir)), '0750');
    assert.equal(octal(mode(path)), '0640');
  });
});
