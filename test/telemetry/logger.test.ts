import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import type { DestinationStream } from 'pino';
import { createLogger, unredacted } from '../../src/telemetry/index.ts';

test('a final flush gives up on a stdout that takes nothing more: the exit is not held forever', async () => {
  // The parent never reads the child's stdout: once the pipe is full, every write would block.
  // sonic-boom's flushSync retried such a write without end, so a forced exit (a second stop
  // signal, a stop past its deadline) behind a stalled log collector never came (a review).
  const child = spawn(process.execPath, [resolve(import.meta.dirname, '../helpers/flood-then-flush.ts')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.pause();
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  assert.match(stderr, /flushing/);
  assert.deepEqual([code, signal], [7, null], 'it exited by itself, not killed after 20 s');
  child.stdout.destroy();
});

test('unredacted writes a record of strings and numbers as the root logger does', () => {
  const lines: { root: string[]; plain: string[] } = { root: [], plain: [] };
  const into = (to: string[]) =>
    new Writable({
      write(chunk, _encoding, done) {
        to.push(String(chunk).replace(/"time":"[^"]*"/, '"time":"-"'));
        done();
      },
    }) as unknown as DestinationStream;
  const root = createLogger({ level: 'info', name: 'sluice', serverId: 's', destination: into(lines.root) });
  const rootForPlain = createLogger({
    level: 'info',
    name: 'sluice',
    serverId: 's',
    destination: into(lines.plain),
  });
  const plain = unredacted(rootForPlain);
  const record = { code: 'resource.not_found', http_status: 404, error: 'ApiError: x', request_id: 'r' };
  root.error(record, 'api error');
  plain.error(record, 'api error');
  assert.deepEqual(lines.plain, lines.root);
  // What it must never be given: a record with a secret under a redacted key.
  root.error({ token: 'secret' }, 'probe');
  assert.match(lines.root.at(-1)!, /"token":"\[redacted\]"/);
});
