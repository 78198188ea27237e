import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { openSqlite } from '../../src/storage/index.ts';
import { systemClock } from '../../src/time/index.ts';

const STORAGE = resolve(import.meta.dirname, '../../src/storage/index.ts');

describe('the SQLite reader thread (#12)', () => {
  test('a read under way keeps the process alive; an idle reader does not hold it open', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-reader-'));
    try {
      const path = join(dir, 's.db');
      const s = openSqlite(path, systemClock);
      await s.migrate();
      await s.close();
      // A script whose only pending work is a report read on the reader thread: it must finish
      // the read (and print it) before exiting, then exit on its own, the reader idle.
      const script = `
        import { openSqlite } from ${JSON.stringify(STORAGE)};
        const s = openSqlite(${JSON.stringify(path)}, { now: () => Date.now(), monotonic: () => performance.now() });
        const spec = { from: '2026-01-01T00:00:00.000Z', to: '2026-01-02T00:00:00.000Z', columns: [], bucketSeconds: 0, filter: {}, source: 'clicks' };
        const out = await s.reports.aggregate(spec, { order: [], limit: 10 });
        console.log('read', out.groups.length);
      `;
      const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        timeout: 20_000,
      });
      assert.equal(stdout.trim(), 'read 0');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
