import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from 'node:test';
import { newRequestId, requestIdFrom } from '../../src/http/index.ts';

/** RFC 9562: 8-4-4-4-12 lower-case hex, version nibble 8, variant bits 10. */
const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('request ids (§3)', () => {
  test('a new id is a version 8 UUID, and 100,000 of them are distinct', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 100_000; i++) {
      const id = newRequestId();
      if (i % 997 === 0) assert.match(id, UUID_V8);
      ids.add(id);
    }
    assert.equal(ids.size, 100_000);
  });

  test('ids differ between processes in their random part', async () => {
    const { execFileSync } = await import('node:child_process');
    const script = "import('./src/http/index.ts').then((m) => process.stdout.write(m.newRequestId()))";
    const other = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    assert.match(other, UUID_V8);
    assert.notEqual(other.slice(0, 23), newRequestId().slice(0, 23));
  });

  test('an inbound id in the alphabet is kept; anything else gets a new one', () => {
    assert.equal(requestIdFrom(req({ 'x-request-id': 'abc.DEF:1-2_3' })), 'abc.DEF:1-2_3');
    for (const bad of ['', 'a b', 'a/b', 'x'.repeat(129)])
      assert.match(requestIdFrom(req({ 'x-request-id': bad })), UUID_V8, JSON.stringify(bad));
    assert.match(requestIdFrom(req({})), UUID_V8);
  });
});
