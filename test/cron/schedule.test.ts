import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Schedule, TaskRuntime } from '../../src/cron/index.ts';
import { Recorder } from '../../src/telemetry/index.ts';

const at = (iso: string) => Date.parse(iso);
const isoList = (xs: number[]) => xs.map((x) => new Date(x).toISOString());

describe('schedule maths (pure, UTC)', () => {
  test('6 fields: seconds first', () => {
    const s = new Schedule('*/15 * * * * *');
    assert.deepEqual(isoList(s.nextRuns(3, at('2026-03-01T10:00:07Z'))), [
      '2026-03-01T10:00:15.000Z',
      '2026-03-01T10:00:30.000Z',
      '2026-03-01T10:00:45.000Z',
    ]);
  });
  test('5 fields: minutes first, next strictly after the given moment', () => {
    const s = new Schedule('0 3 * * *');
    assert.equal(new Date(s.next(at('2026-03-01T03:00:00Z'))!).toISOString(), '2026-03-02T03:00:00.000Z');
    assert.equal(new Date(s.next(at('2026-03-01T02:59:59Z'))!).toISOString(), '2026-03-01T03:00:00.000Z');
  });
  test('other field counts are refused', () => {
    assert.throws(() => new Schedule('* * * *'), /5 fields, or 6/);
    assert.throws(() => new Schedule('* * * * * * *'), /5 fields, or 6/);
  });
});

describe('task runtime failure windows', () => {
  test('failures in the last 60 minutes versus the 60 before, rolling', () => {
    const rt = new TaskRuntime(new Recorder([]));
    const t0 = at('2026-03-01T10:00:00Z');
    const min = 60_000;
    rt.finish(t0, 5, 'boom'); // 10:00
    rt.finish(t0 + 30 * min, 5, 'boom'); // 10:30
    rt.finish(t0 + 30 * min, 5, null); // a success is not a failure
    rt.finish(t0 + 70 * min, 5, 'boom'); // 11:10
    assert.deepEqual(rt.failuresByHour(t0 + 75 * min), { last: 2, previous: 1 });
    assert.deepEqual(rt.failuresByHour(t0 + 125 * min), { last: 1, previous: 1 });
    assert.deepEqual(rt.failuresByHour(t0 + 150 * min), { last: 0, previous: 1 });
    assert.deepEqual(rt.failuresByHour(t0 + 200 * min), { last: 0, previous: 0 });
    assert.equal(rt.runs, 4);
    assert.equal(rt.failures, 3);
    assert.equal(rt.lastError, 'boom');
  });
});
