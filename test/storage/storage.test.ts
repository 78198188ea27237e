import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { ApiError } from '../../src/errors/index.ts';
import {
  type FlowRecord,
  newBatchId,
  SchemaTooNew,
  type Storage,
  type StreamRecord,
} from '../../src/storage/index.ts';
import { flowInput, streamInput } from '../helpers/records.ts';
import { BACKENDS, type Opened, storeSuite } from './backends.ts';

const stream = streamInput;

const isCode = (code: string) => (err: unknown) => err instanceof ApiError && err.code === code;

for (const backend of BACKENDS) {
  describe(`storage on ${backend.name}`, async () => {
    let storage: Storage;
    let reopen: () => Storage;
    let opened: Opened;
    const { it } = await storeSuite(backend, {
      onOpen: (o) => {
        opened = o;
        ({ storage, reopen } = o);
      },
    });

    it('migrations are idempotent, also from a second connection', async () => {
      await storage.migrate();
      const other = reopen();
      // Two nodes racing on one PostgreSQL; SQLite has one node per file (a second in-process
      // connection would only block on the file lock), so there it runs after.
      if (backend.name === 'postgres') await Promise.all([other.migrate(), storage.migrate()]);
      else await other.migrate();
      await other.close();
      await storage.ping();
    });

    it('a deployment secret is made by the first caller and then the same for every node', async () => {
      let made = 0;
      const make = (v: string) => () => {
        made++;
        return v;
      };
      const other = reopen();
      try {
        // Two nodes asking at once (PostgreSQL's case) agree on one of the two.
        const [x, y] = await Promise.all([
          storage.secret('race', make('x')),
          other.secret('race', make('y')),
        ]);
        assert.equal(x, y);
        assert.ok(x === 'x' || x === 'y');
        assert.equal(await other.secret('race', make('z')), x, 'kept: a later make is not stored');
        assert.equal(await storage.secret('other-name', make('w')), 'w');
        assert.equal(made, 4);
      } finally {
        await other.close();
      }
    });

    it('a deployment secret is replaced only from the value the caller read: one of two at once wins', async () => {
      const other = reopen();
      try {
        assert.equal(await storage.readSecret('cas'), undefined);
        // None stored: the first insert wins, a second one finds it there.
        assert.deepEqual(
          (
            await Promise.all([
              storage.replaceSecret('cas', null, 'a'),
              other.replaceSecret('cas', null, 'b'),
            ])
          ).sort(),
          [false, true],
        );
        const first = (await other.readSecret('cas'))!;
        assert.ok(first === 'a' || first === 'b');
        // Two replacements of the same value at once: one is written, the other changes nothing.
        const won = await Promise.all([
          storage.replaceSecret('cas', first, 'c'),
          other.replaceSecret('cas', first, 'd'),
        ]);
        assert.deepEqual([...won].sort(), [false, true]);
        assert.equal(await storage.readSecret('cas'), won[0] ? 'c' : 'd');
        assert.equal(await storage.replaceSecret('cas', 'stale', 'e'), false);
        assert.equal(await storage.readSecret('cas'), won[0] ? 'c' : 'd');
      } finally {
        await other.close();
      }
    });

    it('a database a newer Sluice migrated is refused before anything is written', async () => {
      const { sql } = opened;
      await sql().run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
        9999,
        'from_the_future',
        new Date().toISOString(),
      ]);
      try {
        await assert.rejects(
          storage.migrate(),
          (err: unknown) =>
            err instanceof SchemaTooNew &&
            err.message.includes('migrations this version does not know: 9999 from_the_future'),
        );
      } finally {
        await sql().run('DELETE FROM schema_migrations WHERE version = ?', [9999]);
      }
      await storage.migrate();
    });

    it('flows: create, read by id and slug, update with version, stale update conflicts', async () => {
      const f = await storage.flows.create({
        slug: 'crud-1',
        name: 'One',
        status: 'active',
        rotation: 'position',
      });
      assert.match(f.id, /^[0-9a-f-]{36}$/);
      assert.equal(f.version, 1);
      assert.equal(f.clicks, 0);
      assert.match(f.created_at, /^\d{4}-\d\d-\d\dT/);
      assert.deepEqual(await storage.flows.get(f.id), f);
      assert.deepEqual(await storage.flows.getBySlug('crud-1'), f);
      const u = await storage.flows.update(f.id, { name: 'Uno', status: 'paused' }, 1);
      assert.equal(u?.name, 'Uno');
      assert.equal(u?.status, 'paused');
      assert.equal(u?.version, 2);
      assert.equal(
        await storage.flows.update(f.id, { name: 'stale' }, 1),
        undefined,
        'stale version changes nothing',
      );
      assert.equal((await storage.flows.get(f.id))?.name, 'Uno');
      assert.equal(
        await storage.flows.update('00000000-0000-0000-0000-000000000000', { name: 'x' }),
        undefined,
      );
    });

    it('a duplicate slug is resource.conflict, on create and on update', async () => {
      await storage.flows.create({ slug: 'dup', name: 'a', status: 'active', rotation: 'position' });
      const b = await storage.flows.create({
        slug: 'dup-2',
        name: 'b',
        status: 'active',
        rotation: 'position',
      });
      await assert.rejects(
        storage.flows.create({ slug: 'dup', name: 'c', status: 'active', rotation: 'position' }),
        isCode('resource.conflict'),
      );
      await assert.rejects(storage.flows.update(b.id, { slug: 'dup' }), isCode('resource.conflict'));
    });

    it('streams: create, update, ofFlow in position order; deleting a flow deletes its streams', async () => {
      const f = await storage.flows.create({
        slug: 'with-streams',
        name: 'w',
        status: 'active',
        rotation: 'weight',
      });
      const s2 = await storage.streams.create(
        stream(f.id, { name: 'b', position: 2, filters: { countries_include: ['DE'] } }),
      );
      const s1 = await storage.streams.create(stream(f.id, { name: 'a', position: 1, type: 'forced' }));
      assert.deepEqual(s2.filters, { countries_include: ['DE'] });
      assert.deepEqual(
        (await storage.streams.ofFlow(f.id)).map((s) => s.name),
        ['a', 'b'],
      );
      const u = await storage.streams.update(
        s1.id,
        { weight: 7, filters: { countries_exclude: ['US'] } },
        s1.version,
      );
      assert.equal(u?.weight, 7);
      assert.deepEqual(u?.filters, { countries_exclude: ['US'] });
      assert.equal(await storage.streams.update(s1.id, { weight: 8 }, s1.version), undefined);
      const deleted = await storage.flows.delete(f.id);
      assert.equal(deleted?.id, f.id);
      assert.equal(await storage.streams.get(s1.id), undefined);
      assert.equal(await storage.streams.get(s2.id), undefined);
      assert.equal(await storage.flows.delete(f.id), undefined);
    });

    it('bulk reads: flows by slugs, streams of flows, active targets paged by id with their slug', async () => {
      const flows: FlowRecord[] = [];
      for (const slug of ['bulk-a', 'bulk-b', 'bulk-c']) {
        flows.push(await storage.flows.create({ slug, name: slug, status: 'active', rotation: 'position' }));
      }
      const [a, b, c] = flows as [FlowRecord, FlowRecord, FlowRecord];
      const made: StreamRecord[] = [];
      for (const [f, n] of [
        [a, 3],
        [b, 2],
        [c, 0],
      ] as const) {
        for (let i = 0; i < n; i++) {
          made.push(
            await storage.streams.create(
              stream(f.id, {
                name: `${f.slug}-${i}`,
                position: n - i,
                status: i === 1 ? 'paused' : 'active',
              }),
            ),
          );
        }
      }
      const found = await storage.flows.bySlugs(['bulk-a', 'bulk-c', 'bulk-none']);
      assert.deepEqual(found.map((f) => f.slug).sort(), ['bulk-a', 'bulk-c']);
      assert.deepEqual(await storage.flows.bySlugs([]), []);
      const of = await storage.streams.ofFlows([b.id, a.id, c.id]);
      const byFlow = (f: FlowRecord) => of.filter((s) => s.flow_id === f.id).map((s) => s.name);
      assert.deepEqual(byFlow(a), ['bulk-a-2', 'bulk-a-1', 'bulk-a-0'], 'in position order');
      assert.deepEqual(byFlow(b), ['bulk-b-1', 'bulk-b-0']);
      assert.equal(of.length, 5);
      // Every active stream once, in id order, whatever the page size; paused ones never.
      const mine = new Set(made.map((s) => s.id));
      const expected = made
        .filter((s) => s.status === 'active')
        .map((s) => s.id)
        .sort();
      for (const size of [1, 2, 500]) {
        const seen: string[] = [];
        let after: string | undefined;
        for (;;) {
          const page = await storage.streams.activeTargets(after, size);
          assert.ok(page.length <= size);
          for (const t of page) {
            if (!mine.has(t.id)) continue;
            const s = made.find((m) => m.id === t.id)!;
            assert.equal(t.flow_id, s.flow_id);
            assert.equal(t.flow_slug, flows.find((f) => f.id === s.flow_id)?.slug);
            assert.equal(t.target_url, s.target_url);
            seen.push(t.id);
          }
          if (page.length < size) break;
          after = page.at(-1)!.id;
        }
        assert.deepEqual(seen, expected, `page size ${size}`);
      }
      for (const f of flows) await storage.flows.delete(f.id);
    });

    it('totals follow inserts, deletes and status changes from any writer; a counter flush moves none', async () => {
      // A store of its own, so its totals can be compared with exact counts.
      const own = await backend.open();
      try {
        const st = own.storage;
        const truth = async () => {
          const count = async (table: string) => {
            const [r] = await own
              .sql()
              .all<{ total: unknown; active: unknown }>(
                `SELECT COUNT(*) AS total, COALESCE(SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END), 0) AS active FROM ${table}`,
              );
            return { total: Number(r?.total), active: Number(r?.active) };
          };
          return { streams: await count('streams'), traffic_flows: await count('traffic_flows') };
        };
        assert.deepEqual(await st.aggregates(), {
          streams: { total: 0, active: 0 },
          traffic_flows: { total: 0, active: 0 },
        });
        const f1 = await st.flows.create({
          slug: 'tot-1',
          name: 't',
          status: 'active',
          rotation: 'position',
        });
        const f2 = await st.flows.create({
          slug: 'tot-2',
          name: 't',
          status: 'paused',
          rotation: 'position',
        });
        const s1 = await st.streams.create(stream(f1.id));
        await st.streams.create(stream(f1.id, { status: 'paused' }));
        await st.streams.create(stream(f2.id));
        // Another writer (a second connection, as another node or a script), several rows in one statement.
        const now = '2026-01-01T00:00:00.000Z';
        await own.sql().run(
          `INSERT INTO streams (id, flow_id, name, type, position, weight, status, filters, target_url, redirect_code, created_at, updated_at)
           VALUES ('tot-x1', ?, 's', 'regular', 0, 1, 'active', '{}', 'https://e.test/', 302, ?, ?),
                  ('tot-x2', ?, 's', 'regular', 0, 1, 'paused', '{}', 'https://e.test/', 302, ?, ?),
                  ('tot-x3', ?, 's', 'regular', 0, 1, 'active', '{}', 'https://e.test/', 302, ?, ?)`,
          [f2.id, now, now, f2.id, now, now, f2.id, now, now],
        );
        assert.deepEqual(await st.aggregates(), await truth());
        assert.deepEqual((await st.aggregates()).streams, { total: 6, active: 4 });
        // Status changes both ways, an update that leaves status as it was, and one of another column.
        await st.streams.update(s1.id, { status: 'paused' });
        await st.streams.update(s1.id, { status: 'paused', weight: 3 });
        await st.flows.update(f2.id, { status: 'active' });
        await st.flows.update(f1.id, { name: 'renamed' });
        await own.sql().run("UPDATE streams SET status = 'active' WHERE id IN ('tot-x2', 'tot-x3')");
        assert.deepEqual(await st.aggregates(), await truth());
        const before = await st.aggregates();
        await st.addCounters({
          id: newBatchId(),
          streams: [{ id: s1.id, hits: 5, last_hit_at: now }],
          flows: [{ id: f1.id, clicks: 5, no_match: 1, last_click_at: now }],
        });
        assert.deepEqual(await st.aggregates(), before);
        // Deletes: one stream, a flow with its streams, and rows removed by another connection.
        await st.streams.delete(s1.id);
        await st.flows.delete(f1.id);
        await own.sql().run("DELETE FROM streams WHERE id IN ('tot-x1', 'tot-x2')");
        assert.deepEqual(await st.aggregates(), await truth());
        assert.deepEqual(await st.aggregates(), {
          streams: { total: 2, active: 2 },
          traffic_flows: { total: 1, active: 1 },
        });
      } finally {
        await own.cleanup();
      }
    });

    it('a stream for a missing flow is refused', async () => {
      await assert.rejects(
        storage.streams.create(stream('00000000-0000-0000-0000-000000000000')),
        isCode('resource.conflict'),
      );
    });

    it('keyset paging: no repeats or gaps while rows are inserted between pages', async () => {
      const made: FlowRecord[] = [];
      for (let i = 0; i < 12; i++) {
        made.push(
          await storage.flows.create({
            slug: `page-${String(i).padStart(2, '0')}`,
            name: `p${i}`,
            status: 'active',
            rotation: 'position',
          }),
        );
      }
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await storage.flows.list({
          filter: {},
          sort: { by: 'slug', order: 'asc' },
          limit: 5,
          cursor,
        });
        seen.push(...page.items.map((f) => f.slug));
        cursor = page.next_cursor ?? undefined;
        // Inserting before the cursor must not shift later pages.
        if (pages++ === 0)
          await storage.flows.create({
            slug: 'page-00a',
            name: 'late',
            status: 'active',
            rotation: 'position',
          });
      } while (cursor);
      const pageSlugs = seen.filter((s) => s.startsWith('page-'));
      assert.deepEqual(pageSlugs, [...new Set(pageSlugs)], 'no repeats');
      for (const f of made) assert.ok(pageSlugs.includes(f.slug), `${f.slug} not skipped`);
    });

    it('list: filters, sort desc, total, and a cursor from another sort is refused', async () => {
      const f = await storage.flows.create({
        slug: 'list-f',
        name: 'l',
        status: 'active',
        rotation: 'position',
      });
      for (let i = 0; i < 5; i++) {
        await storage.streams.create(
          stream(f.id, {
            name: `n${i}`,
            position: i,
            type: i === 4 ? 'default' : 'regular',
            status: i === 3 ? 'paused' : 'active',
          }),
        );
      }
      const all = await storage.streams.list({
        filter: { flow_id: f.id },
        sort: { by: 'position', order: 'desc' },
        limit: 2,
      });
      assert.equal(all.total, 5);
      assert.deepEqual(
        all.items.map((s) => s.position),
        [4, 3],
      );
      assert.ok(all.next_cursor);
      const paused = await storage.streams.list({
        filter: { flow_id: f.id, status: 'paused' },
        sort: { by: 'position', order: 'asc' },
        limit: 10,
      });
      assert.deepEqual(
        paused.items.map((s) => s.name),
        ['n3'],
      );
      assert.equal(paused.next_cursor, null);
      const defaults = await storage.streams.list({
        filter: { flow_id: f.id, type: 'default' },
        sort: { by: 'name', order: 'asc' },
        limit: 10,
      });
      assert.equal(defaults.total, 1);
      await assert.rejects(
        storage.streams.list({
          filter: { flow_id: f.id },
          sort: { by: 'name', order: 'desc' },
          limit: 2,
          cursor: all.next_cursor,
        }),
        isCode('validation.invalid_input'),
      );
      await assert.rejects(
        storage.streams.list({
          filter: {},
          sort: { by: 'name', order: 'asc' },
          limit: 2,
          cursor: 'garbage!',
        }),
        isCode('validation.invalid_input'),
      );
    });

    it('a cursor of another list with the same sort, or one that names no list, is refused', async () => {
      // Flows and streams both sort by created_at and have ids of one kind: a flows cursor used to
      // page the streams list, from the flow's position in a list it was never part of.
      const f = await storage.flows.create(flowInput('cursor-list'));
      for (let i = 0; i < 3; i++) await storage.streams.create(stream(f.id, { name: `c${i}`, position: i }));
      const sort = { by: 'created_at', order: 'desc' } as const;
      const flows = await storage.flows.list({ filter: {}, sort, limit: 1 });
      const streams = await storage.streams.list({ filter: { flow_id: f.id }, sort, limit: 1 });
      assert.ok(flows.next_cursor && streams.next_cursor);
      const anotherList = (err: unknown) =>
        isCode('validation.invalid_input')(err) &&
        /^\/cursor: not a next_cursor of this list/.test((err as Error).message);
      await assert.rejects(
        storage.streams.list({ filter: { flow_id: f.id }, sort, limit: 1, cursor: flows.next_cursor }),
        anotherList,
      );
      await assert.rejects(
        storage.flows.list({ filter: {}, sort, limit: 1, cursor: streams.next_cursor }),
        anotherList,
      );
      // A cursor as made before cursors named their list: it cannot say which list it pages.
      const [, ...unnamed] = JSON.parse(
        Buffer.from(streams.next_cursor, 'base64url').toString(),
      ) as unknown[];
      await assert.rejects(
        storage.streams.list({
          filter: { flow_id: f.id },
          sort,
          limit: 1,
          cursor: Buffer.from(JSON.stringify(unnamed)).toString('base64url'),
        }),
        anotherList,
      );
      // Each list's own cursor pages on.
      const next = await storage.streams.list({
        filter: { flow_id: f.id },
        sort,
        limit: 1,
        cursor: streams.next_cursor,
      });
      assert.equal(next.items.length, 1);
      assert.notEqual(next.items[0]!.id, streams.items[0]!.id);
      await storage.flows.list({ filter: {}, sort, limit: 1, cursor: flows.next_cursor });
    });

    // A viewer can write any cursor. Each of these made PostgreSQL fail (500) where SQLite quietly
    // compared and answered 200; the store now refuses them alike, before any query.
    const forged =
      (value: unknown, id: unknown = '00000000-0000-0000-0000-000000000000') =>
      (list: 'traffic_flows' | 'streams', by: string) =>
        Buffer.from(JSON.stringify([list, by, 'asc', value, id])).toString('base64url');
    const FORGED_CURSORS: [
      what: string,
      by: 'slug' | 'name' | 'created_at' | 'clicks',
      make: (list: 'traffic_flows' | 'streams', by: string) => string,
    ][] = [
      ['a number for a text sort column', 'slug', forged(5)],
      ['text for a timestamp sort column', 'created_at', forged('yesterday')],
      ['a number for a timestamp sort column', 'created_at', forged(5)],
      ['year 0000 for a timestamp sort column', 'created_at', forged('0000-01-01T00:00:00.000Z')],
      ['text for a counter sort column', 'clicks', forged('abc')],
      ['1e23 for a counter sort column', 'clicks', forged(1e23)],
      ['a fraction for a counter sort column', 'clicks', forged(1.5)],
      ['U+0000 in a text sort value', 'name', forged('a\u0000')],
      ['U+0000 in the id', 'slug', forged('a', 'x\u0000y')],
      ['a number for the id', 'slug', forged('a', 7)],
      [
        'extra components',
        'slug',
        (list, by) => Buffer.from(JSON.stringify([list, by, 'asc', 'a', 'x', 1])).toString('base64url'),
      ],
    ];
    it('a forged flow cursor (wrong type for the sort column, 1e23, U+0000) is validation.invalid_input, before any query', async () => {
      for (const [what, by, make] of FORGED_CURSORS) {
        const before = storage.stats().queries;
        await assert.rejects(
          storage.flows.list({
            filter: {},
            sort: { by, order: 'asc' },
            limit: 2,
            cursor: make('traffic_flows', by),
          }),
          // Refused for what is forged in it, not for a list or sort it does not name.
          (err: unknown) =>
            isCode('validation.invalid_input')(err) &&
            (what === 'extra components' ? /^\/cursor: not a next_cursor/ : /^\/cursor: its /).test(
              (err as Error).message,
            ),
          what,
        );
        assert.equal(storage.stats().queries, before, `${what}: no query sent`);
      }
    });

    it('a forged stream cursor with a position beyond int4 or text for an integer is validation.invalid_input', async () => {
      for (const [what, value] of [
        ['2^31', 2 ** 31],
        ['-2^31 - 1', -(2 ** 31) - 1],
        ['text', 'a'],
        ['null', null],
      ] as const) {
        await assert.rejects(
          storage.streams.list({
            filter: {},
            sort: { by: 'position', order: 'asc' },
            limit: 2,
            cursor: forged(value)('streams', 'position'),
          }),
          (err: unknown) =>
            isCode('validation.invalid_input')(err) && /its position value/.test((err as Error).message),
          what,
        );
      }
      await assert.rejects(
        storage.streams.list({
          filter: {},
          sort: { by: 'hits', order: 'asc' },
          limit: 2,
          cursor: forged(2 ** 63)('streams', 'hits'),
        }),
        isCode('validation.invalid_input'),
        'hits beyond what a JSON number holds exactly',
      );
      // The edges themselves are fine.
      for (const value of [2 ** 31 - 1, -(2 ** 31)]) {
        await storage.streams.list({
          filter: {},
          sort: { by: 'position', order: 'asc' },
          limit: 2,
          cursor: forged(value)('streams', 'position'),
        });
      }
    });

    it('a target check error with U+0000 in it is stored on both backends (as U+FFFD)', async () => {
      const f = await storage.flows.create({
        slug: 'nul-err',
        name: 'n',
        status: 'active',
        rotation: 'position',
      });
      const s = await storage.streams.create(stream(f.id));
      const at = new Date().toISOString();
      assert.equal(
        await storage.streams.setTargetStatus(s.id, s.target_url, 'unreachable', 'bad\u0000byte', at),
        true,
      );
      assert.equal((await storage.streams.get(s.id))?.target_error, 'bad\uFFFDbyte');
      const run = { run_id: `nul-${backend.name}`, task: 'nul', server_id: 'n1', epoch: 1 };
      await storage.cluster.startRun(run, undefined);
      assert.equal(await storage.cluster.finishRun(run.run_id, 'x\u0000y', undefined), true);
      assert.equal((await storage.cluster.runs('nul'))[0]?.error, 'x\uFFFDy');
    });

    const activeFlow = (slug: string) =>
      storage.flows.create({ slug, name: slug, status: 'active', rotation: 'position' });

    it('a stream given another target is unchecked again (its "unreachable" badge went only at the next check)', async () => {
      const f = await activeFlow('retarget');
      const s = await storage.streams.create(stream(f.id, { target_url: 'https://typo.test/' }));
      const checkedAt = '2026-11-27T10:00:00.000Z';
      // As `targets.check` left it.
      await opened
        .sql()
        .run('UPDATE streams SET target_status = ?, target_error = ?, target_checked_at = ? WHERE id = ?', [
          'unreachable',
          'HTTP 404',
          checkedAt,
          s.id,
        ]);
      const check = async () => {
        const r = await storage.streams.get(s.id);
        return [r?.target_status, r?.target_error, r?.target_checked_at];
      };
      const flagged = ['unreachable', 'HTTP 404', checkedAt];
      await storage.streams.update(s.id, { name: 'renamed' });
      assert.deepEqual(await check(), flagged, 'another field changed: the check still holds');
      await storage.streams.update(s.id, { target_url: 'https://typo.test/' });
      assert.deepEqual(await check(), flagged, 'the same target: the check still holds');
      const fixed = await storage.streams.update(s.id, { target_url: 'https://fixed.test/' }, 3);
      assert.equal(fixed?.version, 4);
      assert.deepEqual(
        [fixed?.target_status, fixed?.target_error, fixed?.target_checked_at],
        [null, null, null],
      );
      assert.deepEqual(await check(), [null, null, null]);
    });

    it("a check of a stream's old target, still under way when the target changed, is not recorded", async () => {
      const f = await activeFlow('retarget-2');
      const s = await storage.streams.create(stream(f.id, { target_url: 'https://typo.test/' }));
      await storage.streams.update(s.id, { target_url: 'https://fixed.test/' });
      const at = new Date().toISOString();
      assert.equal(
        await storage.streams.setTargetStatus(s.id, s.target_url, 'unreachable', 'HTTP 404', at),
        false,
      );
      assert.equal((await storage.streams.get(s.id))?.target_status, null);
      assert.equal(await storage.streams.setTargetStatus(s.id, 'https://fixed.test/', 'ok', null, at), true);
      assert.equal((await storage.streams.get(s.id))?.target_status, 'ok');
    });

    it('counters add atomically: concurrent batches from two connections sum exactly', async () => {
      const f = await storage.flows.create({
        slug: 'count-f',
        name: 'c',
        status: 'active',
        rotation: 'position',
      });
      const s = await storage.streams.create(stream(f.id));
      // Two connections stand for two nodes on PostgreSQL; SQLite is one node per file.
      const other = backend.name === 'postgres' ? reopen() : storage;
      const batch = (n: number, at: string) => ({
        id: newBatchId(),
        streams: [{ id: s.id, hits: n, last_hit_at: at }],
        flows: [{ id: f.id, clicks: n, no_match: 1, last_click_at: at }],
      });
      await Promise.all([
        ...Array.from({ length: 10 }, (_, i) =>
          storage.addCounters(batch(i + 1, `2026-01-01T00:00:0${i}.000Z`)),
        ),
        ...Array.from({ length: 10 }, () => other.addCounters(batch(100, '2026-01-01T00:00:00.500Z'))),
      ]);
      if (other !== storage) await other.close();
      const got = await storage.streams.get(s.id);
      const flow = await storage.flows.get(f.id);
      assert.equal(got?.hits, 55 + 1000);
      assert.equal(flow?.clicks, 55 + 1000);
      assert.equal(flow?.no_match, 20);
      assert.equal(got?.last_hit_at, '2026-01-01T00:00:09.000Z', 'the latest timestamp wins');
    });

    it('operators: create, find by token hash, revoke; names unique among active ones', async () => {
      const hash = 'a'.repeat(64);
      const op = await storage.operators.create('ann', 'viewer', hash);
      assert.equal((await storage.operators.findActiveByTokenHash(hash))?.name, 'ann');
      await assert.rejects(
        storage.operators.create('ann', 'admin', 'b'.repeat(64)),
        isCode('resource.conflict'),
      );
      assert.equal(await storage.operators.revoke('ann'), true);
      assert.equal(await storage.operators.findActiveByTokenHash(hash), undefined);
      const again = await storage.operators.create('ann', 'admin', 'c'.repeat(64));
      assert.notEqual(again.id, op.id);
      assert.equal(await storage.operators.countActive(), 1);
    });

    it('the run journal records runs and is pruned by age', async () => {
      const run = { run_id: `run-${backend.name}`, task: 'journaled', server_id: 'n1', epoch: 3 };
      assert.equal(await storage.cluster.startRun(run, undefined), true);
      assert.equal(await storage.cluster.finishRun(run.run_id, 'boom', undefined), true);
      const [r] = await storage.cluster.runs('journaled');
      assert.equal(r?.epoch, 3);
      assert.equal(r?.error, 'boom');
      assert.ok(r?.finished_at && r.finished_at >= r.started_at);
      await storage.cluster.prune(3_600_000);
      assert.equal((await storage.cluster.runs('journaled')).length, 1, 'a fresh run is kept');
      await storage.cluster.prune(-60_000);
      assert.equal((await storage.cluster.runs('journaled')).length, 0, 'older than the cut: gone');
    });

    it('the node registry: a beat refreshes a node, alive and listed by the cuts asked for, removed or forgotten', async () => {
      const beat = (server_id: string, is_leader: boolean) =>
        storage.cluster.heartbeat({
          server_id,
          started_at: '2026-01-01T00:00:00.000Z',
          version: '1.0',
          commit: 'c1',
          is_leader,
        });
      await beat('reg-a', true);
      await beat('reg-b', false);
      await beat('reg-a', true);
      const recent = { aliveWithinMs: 60_000, forgetAfterMs: 3_600_000 };
      const listed = (await storage.cluster.nodes(recent)).filter((n) => n.server_id.startsWith('reg-'));
      assert.deepEqual(
        listed.map((n) => [n.server_id, n.alive, n.version, n.commit, n.started_at]),
        [
          ['reg-a', true, '1.0', 'c1', '2026-01-01T00:00:00.000Z'],
          ['reg-b', true, '1.0', 'c1', '2026-01-01T00:00:00.000Z'],
        ],
      );
      assert.ok(!('is_leader' in listed[0]!), 'the stored per-node flag is not what tells who leads');
      // Cuts in the future stand for time passing (the database's clock cannot be moved).
      const seenBefore = await storage.cluster.nodes({ aliveWithinMs: -60_000, forgetAfterMs: 3_600_000 });
      assert.ok(
        seenBefore.some((n) => n.server_id === 'reg-a' && !n.alive),
        'unseen since the cut: not alive',
      );
      const forgotten = await storage.cluster.nodes({ aliveWithinMs: -60_000, forgetAfterMs: -60_000 });
      assert.equal(
        forgotten.filter((n) => n.server_id.startsWith('reg-')).length,
        0,
        'unseen too long: not listed',
      );
      await storage.cluster.removeNode('reg-b');
      await storage.cluster.forgetNodes(3_600_000);
      assert.deepEqual(
        (await storage.cluster.nodes(recent))
          .filter((n) => n.server_id.startsWith('reg-'))
          .map((n) => n.server_id),
        ['reg-a'],
        'a removed node is gone, a recent one is not forgotten',
      );
      await storage.cluster.forgetNodes(-60_000);
      assert.equal(
        (await storage.cluster.nodes(recent)).filter((n) => n.server_id.startsWith('reg-')).length,
        0,
      );
    });

    it('queries are timed into the db section', async () => {
      const before = storage.stats();
      await storage.ping();
      const after = storage.stats();
      assert.equal(after.driver, backend.name);
      assert.equal(after.status, 'up');
      assert.equal(after.queries, before.queries + 1);
      assert.ok(after.errors >= 1, 'the refused writes above were counted as errors');
      assert.ok(after.last_error);
    });
  });
}
