import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startServer } from '../../bench/http/load.ts';
import { BROWSER_UA, type SluiceScenario } from '../../bench/http/scenarios.ts';
import { pgAvailable } from '../helpers/postgres.ts';

/**
 * The hot-path benchmark's reference programs (bench/http/peers/) are real programs doing Sluice's
 * `/go` job: each started as the benchmark starts it answers a scenario's slugs with a 302 carrying
 * a click id, and writes every click to its database. Never a speed.
 */
describe('the reference programs of the hot-path benchmark', () => {
  const scenario: SluiceScenario = { flows: 3, streams: 4, macros: 'all', country: true };
  const CLICK_ID = /^[-0-9A-Za-z_]{22}$/;

  for (const variant of ['ref-ua', 'ref-ua-pg'] as const) {
    test(`${variant} answers 302s with a click id and writes every click`, async (t) => {
      if (variant === 'ref-ua-pg' && !(await pgAvailable())) return t.skip('PostgreSQL unreachable');
      const server = await startServer(variant, variant, { scenario });
      try {
        const ids = new Set<string>();
        for (let i = 0; i < 30; i++) {
          const res = await fetch(`${server.origin}/go/f${i % 3}${i % 2 === 0 ? `?sub1=c${i}` : ''}`, {
            redirect: 'manual',
            headers: { 'user-agent': BROWSER_UA, 'cf-ipcountry': i % 3 === 0 ? 'JP' : 'DE' },
          });
          assert.equal(res.status, 302);
          const location = new URL(res.headers.get('location')!);
          assert.equal(location.origin, 'https://example.com');
          // The target's macros filled in: country, flow slug, and the click id as {request_id}.
          assert.equal(location.searchParams.get('c'), i % 3 === 0 ? 'JP' : 'DE');
          assert.equal(location.searchParams.get('f'), `f${i % 3}`);
          const id = location.searchParams.get('r')!;
          assert.match(id, CLICK_ID);
          ids.add(id);
          // The forced stream takes JP (lp/0), never anyone else.
          assert.equal(location.pathname === '/lp/0', i % 3 === 0, location.href);
        }
        assert.equal(ids.size, 30, 'a click id of its own for each click');
        const unknown = await fetch(`${server.origin}/go/nope`, { redirect: 'manual' });
        assert.equal(unknown.status, 404);
        // Written within a flush or two; waited for, with a generous bound on a loaded machine.
        let rows = await server.clickRows();
        for (let i = 0; i < 300 && rows.all < 30; i++) {
          await new Promise((r) => setTimeout(r, 100));
          rows = await server.clickRows();
        }
        assert.deepEqual(rows, { all: 30, sub1: 15 });
        const stats = await server.stats();
        assert.equal(stats.requests, 31);
        assert.ok(stats.cpuUs > 0);
        if (variant === 'ref-ua-pg') assert.ok(stats.dbCpuUs !== undefined && stats.dbCpuUs >= 0);
      } finally {
        await server.stop();
      }
    });
  }
});
