import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { AUDIT_KEEP_MS, AuditTrail } from '../../src/audit/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { LogCapture } from '../helpers/node.ts';
import { BACKENDS, type Opened } from '../storage/backends.ts';

const sqlite = BACKENDS.find((b) => b.name === 'sqlite')!;

describe('audit trail', () => {
  const clock = new ManualClock(Date.UTC(2026, 2, 1));
  let db: Opened;
  let logs: LogCapture;
  let leader = true;
  let trail: AuditTrail;
  before(async () => {
    db = await sqlite.open(clock);
    logs = new LogCapture();
    const logger = pino({ messageKey: 'message', base: { server_id: 'node-a' } }, logs);
    trail = new AuditTrail({
      store: db.storage.audit,
      logger,
      clock,
      serverId: 'node-a',
      isLeader: () => leader,
    });
  });
  after(() => db.cleanup());

  test('one record: an info line named audit, and a row with the target type taken from the action', async () => {
    await trail.record({ operator: 'ada', action: 'stream.update', target_id: 's1', request_id: 'r1' });
    const lines = logs.lines.filter((l) => l.message === 'audit');
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.level, 30);
    assert.deepEqual(
      {
        operator: lines[0]!.operator,
        action: lines[0]!.action,
        target_type: lines[0]!.target_type,
        target_id: lines[0]!.target_id,
        request_id: lines[0]!.request_id,
      },
      { operator: 'ada', action: 'stream.update', target_type: 'stream', target_id: 's1', request_id: 'r1' },
    );
    const [row] = (await db.storage.audit.list({ filter: {}, limit: 10 })).items;
    assert.equal(row?.target_type, 'stream');
    assert.equal(row?.server_id, 'node-a');
  });

  test('only the leader prunes, and only rows older than a week', async () => {
    clock.advance(AUDIT_KEEP_MS - 1000);
    await trail.record({ operator: 'ada', action: 'flow.delete', target_id: 'f1', request_id: 'r2' });
    clock.advance(2000);
    leader = false;
    assert.equal(await trail.prune(), 0);
    assert.equal((await db.storage.audit.list({ filter: {}, limit: 10 })).total, 2);
    leader = true;
    assert.equal(await trail.prune(), 1);
    const left = (await db.storage.audit.list({ filter: {}, limit: 10 })).items;
    assert.deepEqual(
      left.map((r) => r.action),
      ['flow.delete'],
    );
  });

  test('a row that cannot be written is logged, and the caller is not failed', async () => {
    const closed = await sqlite.open(clock);
    await closed.storage.close();
    const logger = pino({ messageKey: 'message' }, logs);
    const broken = new AuditTrail({
      store: closed.storage.audit,
      logger,
      clock,
      serverId: 'n',
      isLeader: () => true,
    });
    await broken.record({ operator: 'ada', action: 'task.run', target_id: 'x', request_id: 'r3' });
    assert.equal(logs.lines.filter((l) => l.message === 'audit' && l.request_id === 'r3').length, 1);
    assert.equal(
      logs.lines.filter((l) => l.message === 'audit row not written' && l.request_id === 'r3').length,
      1,
    );
    assert.equal(await broken.prune(), 0, 'a failed prune is logged, not thrown');
    await closed.cleanup().catch(() => {});
  });
});
