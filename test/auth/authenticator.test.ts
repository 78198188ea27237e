import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Authenticator, createOperator, LAST_KNOWN_MS, OperatorDirectory } from '../../src/auth/index.ts';
import { ApiError } from '../../src/errors/index.ts';
import { openPostgres, type Storage } from '../../src/storage/index.ts';
import { ManualClock } from '../../src/time/index.ts';
import { dropSchema, pgAvailable, pgBehindProxy, testSchema } from '../helpers/postgres.ts';
import type { TcpProxy } from '../helpers/tcp-proxy.ts';

const skip = !(await pgAvailable()) && 'PostgreSQL unavailable';

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'let in',
    (err: unknown) => (err instanceof ApiError ? err.code : String(err)),
  );

describe('stored operators while the database cannot be reached', { skip }, () => {
  // An operator diagnosing a database outage must still see the node's state (db.status: down):
  // every ACP call was 503 because its token could not be looked up.
  const schema = testSchema();
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
  let proxy: TcpProxy;
  let storage: Storage;
  let auth: Authenticator;
  before(async () => {
    let url: string;
    ({ proxy, url } = await pgBehindProxy());
    storage = openPostgres({ url, poolMax: 2, schema, queryTimeoutMs: 2000, clock });
    await storage.migrate();
    auth = new Authenticator([], storage.operators, clock);
  });
  after(async () => {
    await storage.close();
    await proxy.down();
    await dropSchema(schema);
  });

  test('a token let in lately is let in during an outage as a viewer, for a while; others are db.unavailable', async () => {
    const kept = await createOperator(storage.operators, 'kept', 'admin');
    const revoked = await createOperator(storage.operators, 'gone', 'admin');
    const revokedHere = await createOperator(storage.operators, 'gone-here', 'operator');
    const unseen = await createOperator(storage.operators, 'unseen', 'admin');
    for (const op of [kept, revoked, revokedHere]) await auth.authenticate(`Bearer ${op.token}`);
    // Revoked elsewhere and checked since: forgotten. Revoked on this node: forgotten at once.
    await storage.operators.revoke('gone');
    assert.equal(await codeOf(auth.authenticate(`Bearer ${revoked.token}`)), 'auth.unauthorized');
    const directory = new OperatorDirectory([], storage.operators, (name) => auth.forget(name));
    await directory.revoke('gone-here', { name: 'kept', role: 'admin', source: 'storage' });

    // A look-up under way when a revocation is made here lets its request in but is not remembered.
    const racing = await createOperator(storage.operators, 'racing', 'admin');
    const underWay = auth.authenticate(`Bearer ${racing.token}`);
    auth.forget('racing');
    assert.equal((await underWay).name, 'racing');

    await proxy.down();
    try {
      // A viewer, whatever its role: a revocation on another node cannot be known meanwhile.
      assert.deepEqual(await auth.authenticate(`Bearer ${kept.token}`), {
        name: 'kept',
        role: 'viewer',
        source: 'storage',
      });
      for (const [op, why] of [
        [revoked, 'revoked and checked since'],
        [revokedHere, 'revoked on this node'],
        [unseen, 'never seen'],
        [racing, 'revoked while its look-up was under way'],
      ] as const)
        assert.equal(await codeOf(auth.authenticate(`Bearer ${op.token}`)), 'db.unavailable', why);
      clock.advance(LAST_KNOWN_MS + 1);
      assert.equal(await codeOf(auth.authenticate(`Bearer ${kept.token}`)), 'db.unavailable', 'too long ago');
    } finally {
      await proxy.up();
    }
  });
});
