import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  clickRecordOf,
  type NewClick,
  newBatchId,
  openSqlite,
  type Storage,
} from '../../src/storage/index.ts';
import { packClicks, unpackClicks } from '../../src/storage/packed-clicks.ts';
import { systemClock } from '../../src/time/index.ts';
import { newClick } from '../helpers/records.ts';

/** Clicks that differ in every way a packed field can: nulls, empty texts, sub-ids, flags, money. */
function varied(n: number): NewClick[] {
  return Array.from({ length: n }, (_, i) =>
    newClick({
      flow_id: `packed-${i % 7}`,
      stream_id: i % 5 === 0 ? null : `s${i % 3}`,
      at: Date.UTC(2026, 0, 2, 12) + i,
      outcome: i % 11 === 0 ? 'bot' : i % 13 === 0 ? 'no_match' : 'redirect',
      country: i % 4 === 0 ? null : ['DE', 'US', 'JP'][i % 3]!,
      language: i % 6 === 0 ? null : 'de',
      referrer_host: i % 2 === 0 ? null : `r${i % 9}.example`,
      ip_prefix: i % 8 === 0 ? null : `203.0.${i % 200}.0/24`,
      subs:
        i % 3 === 0
          ? null
          : i % 3 === 1
            ? [`c${i}`, '', null, 'Zürich 🌍']
            : Array.from({ length: 10 }, (_, k) => `v${k}-${i % 4}`),
      is_unique: i % 2 === 0,
      is_bot: i % 11 === 0,
      cost: i % 10 === 0 ? 0 : 0.000001 * i,
    }),
  );
}

describe('clicks packed for the SQLite writer thread', () => {
  test('unpacked, every click is the one packed (sub-ids past the last given read as null)', () => {
    const rows = varied(300);
    const back = unpackClicks(structuredClone(packClicks(rows)));
    const padded = rows.map((c) => ({
      ...c,
      subs: c.subs === null ? null : Array.from({ length: 10 }, (_, k) => c.subs![k] ?? null),
    }));
    assert.deepEqual(back, padded);
  });

  let dir: string;
  let storage: Storage;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-packed-'));
    storage = openSqlite(join(dir, 'p.db'), systemClock, { writeThread: true });
    await storage.migrate();
  });
  after(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a batch of several parts written through the writer thread stores each click as it was made', async () => {
    const rows = varied(2500);
    assert.deepEqual(await storage.clicks.insertBatch({ id: newBatchId(), server_id: 'n1', rows }), {
      applied: true,
      rows: 2500,
    });
    for (const c of rows) assert.deepEqual(await storage.clicks.get(c.click_id), clickRecordOf(c, 'n1'));
  });
});
