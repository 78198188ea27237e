import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { type FlowRecord, type NewClick, newBatchId } from '../../src/storage/index.ts';
import {
  browserMissing,
  chartWidths,
  consoleUrl,
  launchBrowser,
  overflowOf,
  screenshot,
  watchConsole,
} from '../helpers/browser.ts';
import { flowWithDefault, startTestNode, type TestNode, withPostbackKey } from '../helpers/node.ts';
import { newClick } from '../helpers/records.ts';
import { until } from '../helpers/until.ts';
import { USER_AGENTS } from '../helpers/user-agents.ts';

const skip = browserMissing();

/** The web console in headless Chromium against a real node: what an operator clicks, end to end. */
describe('web console in a browser', { skip }, () => {
  let t: TestNode;
  let browser: Browser;
  let upstream: Server;
  let upstreamUrl: string;
  let admin: string;
  let viewer: string;

  before(async () => {
    upstream = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<h1 id="landed">landed ${req.url}</h1>`);
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const addr = upstream.address();
    upstreamUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    // A task that fails every second against a closed port: procedure 2 must flag it.
    t = await startTestNode({
      yaml: `cron:\n  tasks:\n    flaky:\n      kind: http.probe\n      schedule: "* * * * * *"\n      execution_scope: all\n      url: http://127.0.0.1:1/health\n      timeout_ms: 2000\n`,
    });
    admin = await t.token('admin', 'alice');
    // The longest name an operator may have, with nowhere to break it: the phone's header holds it.
    viewer = await t.token('viewer', `victor.${'v'.repeat(50)}@corp.io`);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    upstream?.close();
  });

  async function signIn(page: Page, token: string): Promise<void> {
    await page.goto(consoleUrl(t.url));
    await page.fill('#token', token);
    await page.click('form[aria-label="Sign in"] button[type=submit]');
    await page.waitForSelector('[data-testid=overview-node-id]');
  }

  test('a wrong token is refused on the form; a good one signs in, stays out of the URL and survives a reload', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const seen = watchConsole(page);
    await page.goto(`${t.url}/acp/`);
    await page.fill('#token', 'not-a-token');
    await page.click('form[aria-label="Sign in"] button[type=submit]');
    await page.waitForSelector('[role=alert]');
    // The refusal names the API's status and code (it once read "…refused this token. unknown").
    const refusal = ((await page.textContent('[role=alert]')) ?? '').replace(/\s+/g, ' ').trim();
    assert.match(refusal, /^The node refused this token: .+ \(401 auth\.unauthorized\) request \S+$/);
    assert.doesNotMatch(refusal, /unknown/);
    await page.fill('#token', admin);
    await page.click('form[aria-label="Sign in"] button[type=submit]');
    await page.waitForSelector('[data-testid=overview-node-id]');
    assert.ok(!page.url().includes(admin), 'the token is never in the URL');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('sluice.token')), admin);
    assert.equal(await page.evaluate(() => localStorage.getItem('sluice.token')), null);
    await page.reload();
    await page.waitForSelector('[data-testid=overview-node-id]');
    await page.click('text=Sign out');
    await page.waitForSelector('#token');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('sluice.token')), null);
    // The one refusal above is the only console noise: the browser reports the 401 it got.
    assert.deepEqual(
      seen.errors.filter((e) => !/status of 401/.test(e)),
      [],
    );
    await page.close();
  });

  test('a tab polls every 5 s, or every N s when opened as /acp/?poll=N (whole seconds, 1–300)', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const seen = watchConsole(page);
    await signIn(page, viewer);
    // The token stays in the tab: each address opens the console signed in, polling as it says.
    for (const [query, every] of [
      ['', 5],
      ['?poll=1', 1],
      ['?poll=300', 300],
      ['?poll=0', 5],
      ['?poll=301', 5],
      ['?poll=2.5', 5],
      ['?poll=soon', 5],
    ] as const) {
      await page.goto(`${t.url}/acp/${query}`);
      await page.waitForSelector('[data-testid=sampled]');
      assert.match(
        (await page.textContent('[data-testid=sampled]')) ?? '',
        new RegExp(`^Sampled every ${every} s while`),
        query,
      );
    }
    assert.deepEqual(seen.errors, []);
    await page.close();
  });

  test('an admin sees the node, a flagged failing task and its HTTP calls, then creates a flow and follows its redirect', async () => {
    // An ad's link with a typo: no flow has the slug (as long as a slug may be: it must wrap).
    const typo = `no-such-ad-${'x'.repeat(53)}`;
    for (let i = 0; i < 2; i++)
      await (
        await fetch(`${t.url}/go/${typo}`, {
          redirect: 'manual',
          headers: { 'user-agent': USER_AGENTS.chromeWindows },
        })
      ).arrayBuffer();
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const seen = watchConsole(page);
    await signIn(page, admin);

    // Overview: the node id of this very node, and the charts.
    assert.equal(await page.textContent('[data-testid=overview-node-id]'), t.node.serverId);
    assert.equal(await page.textContent('[data-testid=node-id]'), t.node.serverId);
    // The click log in the Traffic card: clicks held in memory / dropped (none yet on this node).
    const log = t.node.clickLog.stats();
    assert.equal(
      await page.textContent('[data-testid=overview-click-log]'),
      `${log.buffered + log.unacked} / ${log.dropped}`,
    );
    // The Traffic card names the slug that routes nowhere.
    assert.equal(await page.textContent('[data-testid=overview-unknown-slugs]'), `${typo} ×2`);
    // The charts are drawn by an effect after the render that shows the node id: wait for them.
    await page.locator('.chart .uplot').nth(2).waitFor();
    assert.equal(await page.locator('.chart .uplot').count(), 3);
    // ...and wraps it: a long slug once widened the card and the page (666 px at a 390 px width).
    // A phone turned upright: the charts follow their narrower boxes (a frame after the resize) and
    // the page fits; turned back, they fill their boxes again.
    for (const [width, height] of [
      [390, 844],
      [1280, 800],
    ] as const) {
      await page.setViewportSize({ width, height });
      assert.equal(await overflowOf(page), 0, `no sideways scroll at ${width} px`);
      for (const c of await chartWidths(page))
        assert.equal(c.width, c.box, `a chart fills its box at ${width} px`);
    }
    // The Database card: a SQLite node's checkpoint thread (runs / failed / backlog).
    assert.match(
      (await page.textContent('[data-testid=overview-checkpoints]')) ?? '',
      /^[\d,]+ \/ 0 \/ [\d,]+ pages$/,
    );
    // The cluster's nodes (docs/api.md#acp-cluster): this single node, the leader, alive.
    const me = `section[aria-label="Cluster nodes"] tr:has(code:text-is("${t.node.serverId}"))`;
    await page.waitForSelector(me);
    assert.equal(await page.textContent(`${me} td[data-label=Role]`), 'leader');
    assert.equal((await page.textContent(`${me} td[data-label=Alive]`))?.trim(), 'yes');
    await screenshot(page, 'console-overview');

    // Tasks: the failing task is flagged as rising, and its failed HTTP calls are one click away.
    await page.click('nav a[href="#/tasks"]');
    await page.waitForSelector('tr:has(code:text-is("flaky")) [data-testid=rise]', { timeout: 20_000 });
    assert.match((await page.getAttribute('tr:has(code:text-is("flaky"))', 'class')) ?? '', /bad/);
    await page.click('tr:has(code:text-is("flaky")) button:text("HTTP failures")');
    await page.waitForSelector('section[aria-label="HTTP failures of flaky"] td[data-label=Call]');
    assert.match(
      (await page.textContent('section[aria-label="HTTP failures of flaky"] td[data-label=Call]')) ?? '',
      /GET http:\/\/127\.0\.0\.1:1\/health/,
    );
    await screenshot(page, 'console-tasks');
    // Run now, as an operator would: the node starts the run and says so.
    await page.click('tr:has(code:text-is("cache_reload")) button:text("Run now")');
    await page.waitForSelector('[role=status]:text("Started cache_reload")');

    // Routes: sortable, and the controllers table names the ACP routes the console called.
    await page.click('nav a[href="#/routes"]');
    await page.click('th button:text-is("4xx")');
    assert.equal(await page.getAttribute('th:has(button:text-is("4xx ▾"))', 'aria-sort'), 'descending');
    // Red rows are the routes with a 5xx in the last five minutes, and only those (4xx rows are amber).
    const recentFailures = Object.values(t.node.telemetry.systemMetrics().controllers).filter(
      (e) => (e.recent?.server_errors ?? 0) > 0,
    ).length;
    assert.equal(await page.locator('table[aria-label=Controllers] tr.bad').count(), recentFailures);
    await screenshot(page, 'console-routes');
    assert.ok((await page.locator('td code:text-is("/acp/system/metrics")').count()) === 1);

    // Flows: the API's validation error lands on the slug field; a fixed form creates the flow.
    await page.click('nav a[href="#/flows"]');
    await page.click('button:text("New flow")');
    await page.fill('#f-slug', 'Not A Slug');
    await page.fill('#f-name', 'Browser flow');
    await page.click('form[aria-label="New flow"] button[type=submit]');
    await page.waitForSelector('[data-field-error=slug]');
    assert.match((await page.textContent('[data-field-error=slug]')) ?? '', /must be 1–64 of a–z, 0–9 and -/);
    await screenshot(page, 'console-flow-validation');
    await page.fill('#f-slug', 'browser-flow');
    await page.click('form[aria-label="New flow"] button[type=submit]');
    await page.waitForSelector('section[aria-label="Streams of browser-flow"]');

    // A default stream to the upstream, with a macro, through the stream form.
    await page.click('button:text("New stream")');
    await page.fill('#f-name', 'everyone');
    await page.selectOption('#f-type', 'default');
    await page.fill('#f-countries_include', 'germany');
    await page.fill('#f-target_url', `${upstreamUrl}/landed?flow={flow}`);
    await page.click('form[aria-label="New stream"] button[type=submit]');
    await page.waitForSelector('[data-field-error=countries_include]');
    await page.fill('#f-countries_include', '');
    await page.click('form[aria-label="New stream"] button[type=submit]');
    await page.waitForSelector('section[aria-label="Streams of browser-flow"] td:text("everyone")');
    await screenshot(page, 'console-flows');
    // Paged lists are sorted by the server (the whole list, not one page): the order is asked for.
    const sorted = page.waitForRequest(
      (r) =>
        r.url().endsWith('/acp/traffic-flows/list') &&
        /"sort":\{"by":"clicks","order":"desc"\}/.test(r.postData() ?? ''),
    );
    await page.click('table[aria-label=Flows] th button:text("Clicks")');
    await sorted;
    await page.waitForSelector('table[aria-label=Flows] th[aria-sort=descending]:has-text("Clicks")');

    // The flow's own link goes through /go/:slug and lands on the target.
    await page.click('[data-testid=go-browser-flow]');
    await page.waitForSelector('#landed');
    assert.equal(page.url(), `${upstreamUrl}/landed?flow=browser-flow`);

    // Procedures: the failing task is the finding of procedure 2.
    await page.goto(consoleUrl(t.url, '#/procedures'));
    await page.waitForSelector('li[data-procedure=failure_rise].finding');
    assert.match((await page.textContent('li[data-procedure=failure_rise]')) ?? '', /flaky/);
    assert.equal(await page.locator('.checklist > li').count(), 7);
    await screenshot(page, 'console-procedures');

    // Only the two deliberate validation refusals reached the console (the browser reports a 400).
    assert.deepEqual(
      seen.errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await page.close();
  });

  test('a flow with the longest slug and a long name keeps its buttons on a laptop screen', async () => {
    const slug = `campaign-${'x'.repeat(55)}`;
    const res = await t.acp('/acp/traffic-flows/create', admin, {
      slug,
      name: 'Black Friday retargeting for returning mobile visitors from the autumn newsletter, EU only, v2',
    });
    assert.equal(res.status, 200);
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await signIn(page, admin);
    await page.click('nav a[href="#/flows"]');
    const row = `table[aria-label=Flows] tr:has(button:text-is("${slug}"))`;
    await page.waitForSelector(row);
    const edit = await page.locator(`${row} button:text("Edit")`).boundingBox();
    assert.ok(edit && edit.x + edit.width <= 1280, `Edit at x=${edit?.x}: off the screen`);
    assert.ok((await overflowOf(page)) <= 0, 'no horizontal scrolling');
    await page.close();
  });

  test('a viewer on a phone sees everything but no button that changes anything', async () => {
    // A flow of its own, made as an admin would: a viewer sees it and cannot change it.
    await flowWithDefault(t, admin, 'viewed-flow', `${upstreamUrl}/landed`);
    const page = await browser.newPage({
      viewport: { width: 390, height: 844 },
      isMobile: true,
      hasTouch: true,
    });
    const seen = watchConsole(page);
    await signIn(page, viewer);
    await screenshot(page, 'console-phone-overview');
    // Admin pages are not in a viewer's navigation.
    assert.equal(await page.locator('nav a[href="#/operators"]').count(), 0);
    assert.equal(await page.locator('nav a[href="#/audit"]').count(), 0);
    await page.click('nav a[href="#/tasks"]');
    await page.waitForSelector('table[aria-label=Tasks] code:text-is("flaky")');
    assert.equal(await page.locator('button:text("Run now")').count(), 0);
    assert.equal(await page.locator('button:text("HTTP failures")').count(), 0);
    await page.click('nav a[href="#/flows"]');
    await page.waitForSelector('table[aria-label=Flows] button:text-is("viewed-flow")');
    assert.equal(await page.locator('button:text("New flow")').count(), 0);
    assert.equal(await page.locator('button:text("Edit")').count(), 0);
    assert.equal(await page.locator('button:text("Delete")').count(), 0);
    await page.click('table[aria-label=Flows] button:text-is("viewed-flow")');
    await page.waitForSelector('section[aria-label="Streams of viewed-flow"] td:text-is("default")');
    assert.equal(await page.locator('button:text("New stream")').count(), 0);
    assert.equal(await page.locator('button:text("Edit")').count(), 0);
    // No horizontal scrolling at phone width, with all of the page read (the node's configuration
    // comes apart from the streams and adds the postback panel's key line).
    await page.waitForSelector('section[aria-label="Postback URL"] [data-testid=postback-key]');
    const overflow = await overflowOf(page);
    assert.ok(overflow <= 0, `page is ${overflow}px wider than the phone`);
    await screenshot(page, 'console-phone-flows');
    // The header row is hidden on a phone: the sort is picked from a select instead.
    await page.click('nav a[href="#/routes"]');
    const routeSort = 'select[aria-label="Sort Controllers"]';
    await page.waitForSelector(routeSort);
    // The table is drawn again after the pick: its order is waited for, not read at once.
    const routeNames = () =>
      page.$$eval('table[aria-label=Controllers] td[data-label=Route] code', (cells) =>
        cells.map((c) => (c as unknown as { textContent: string }).textContent),
      );
    for (const dir of ['asc', 'desc'] as const) {
      await page.selectOption(routeSort, `route:${dir}`);
      let names: string[] = [];
      const inOrder = (xs: string[]) => {
        const sorted = [...xs].sort();
        return JSON.stringify(xs) === JSON.stringify(dir === 'asc' ? sorted : sorted.reverse());
      };
      await until(
        `routes sorted by name, ${dir}`,
        async () => {
          names = await routeNames();
          return names.length > 1 && inOrder(names);
        },
        10_000,
        50,
      ).catch((e: Error) => assert.fail(`${e.message}: ${names.join(', ')}`));
    }
    // The procedures name the commit, 40 characters without a break: the page still fits.
    await page.click('nav a[href="#/procedures"]');
    await page.waitForSelector('section[aria-label="Operator procedures"] .verdict');
    assert.ok(
      (await overflowOf(page)) <= 0,
      `procedures are ${await overflowOf(page)}px wider than the phone`,
    );
    assert.deepEqual(seen.errors, []);
    await page.close();
  });

  describe('clicks and conversions', () => {
    let flow: FlowRecord;
    const clicks: NewClick[] = [];
    const insert = async (rows: NewClick[]) => {
      await t.node.storage.clicks.insertBatch({ id: newBatchId(), server_id: t.node.serverId, rows });
      clicks.push(...rows);
    };
    before(async () => {
      const res = await t.acp('/acp/traffic-flows/create', admin, { slug: 'paid-flow', name: 'Paid flow' });
      flow = (await res.json()) as FlowRecord;
      const made = await t.acp('/acp/streams/create', admin, {
        flow_id: flow.id,
        name: 'Landing A',
        type: 'default',
        target_url: 'https://paid.test/a',
      });
      const stream = (await made.json()) as { id: string };
      const now = Date.now();
      await insert(
        Array.from({ length: 12 }, (_, i) =>
          newClick({
            click_id: `browser-click-${String(i).padStart(2, '0')}`,
            flow_id: flow.id,
            stream_id: i === 5 ? stream.id : null,
            at: now - (12 - i) * 60_000,
            outcome: i % 4 === 3 ? 'bot' : 'redirect',
            is_bot: i % 4 === 3,
            country: i % 2 ? 'DE' : 'US',
            subs: [`campaign-${i % 3}`, `a-rather-long-placement-name-that-must-not-widen-the-phone-${i}`],
          }),
        ),
      );
      for (const q of [
        'click_id=browser-click-05&txid=tx-1&status=sale&payout=12.5&currency=USD',
        'click_id=browser-click-05&txid=tx-2&status=lead&payout=3&currency=EUR',
        'click_id=browser-click-06&status=rejected&payout=40',
      ]) {
        assert.equal((await fetch(`${t.url}${withPostbackKey(t, `/postback?${q}`)}`)).status, 200);
      }
    });

    test('an operator watches clicks arrive live, filters them, opens one with its conversions, and follows a conversion to its click', async () => {
      const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
      const seen = watchConsole(page);
      await signIn(page, viewer);
      await page.click('nav a[href="#/clicks"]');
      const rows = 'table[aria-label=Clicks] tbody tr';
      // This flow's clicks only: other tests' redirects are clicks too (of other flows).
      await page.selectOption('form[aria-label="Click filters"] select[name=flow_id]', flow.id);
      await page.click('form[aria-label="Click filters"] button[type=submit]');
      // The filtered list, not the one shown before it (other flows' clicks, some newer, some of
      // them on screen with browser-click-11 further down): this flow's 12 clicks, newest first.
      await page.waitForFunction(
        ([sel, n]) => {
          const d = (
            globalThis as unknown as {
              document: { querySelectorAll(s: string): ArrayLike<{ textContent: string | null }> };
            }
          ).document;
          const cells = d.querySelectorAll(sel as string);
          return cells.length === n && cells[0]!.textContent?.trim() === 'browser-click-11';
        },
        [`${rows} td[data-label=Click]`, clicks.length] as const,
      );
      assert.equal(
        (await page.textContent(`${rows} >> nth=0 >> td[data-label=Click]`))?.trim(),
        'browser-click-11',
      );
      await screenshot(page, 'console-clicks');

      // Live: a click written now appears on top by itself, and the list's update time moves on
      // (the list's own, not the header's: that one moves with the metrics' polls, whatever the list does).
      const updated = await page.textContent('[data-testid=list-updated]');
      await insert([
        newClick({ click_id: 'browser-click-live', flow_id: flow.id, stream_id: null, at: Date.now() }),
      ]);
      await page.waitForSelector(`${rows} >> nth=0 >> code:text-is("browser-click-live")`, {
        timeout: 15_000,
      });
      assert.notEqual(await page.textContent('[data-testid=list-updated]'), updated);

      // Filters: bots of this flow only.
      await page.selectOption('form[aria-label="Click filters"] select[name=flow_id]', flow.id);
      await page.selectOption('form[aria-label="Click filters"] select[name=is_bot]', 'true');
      await page.click('form[aria-label="Click filters"] button[type=submit]');
      const bots = clicks.filter((c) => c.is_bot).length;
      await page.waitForFunction(
        ([sel, n]) =>
          (
            globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }
          ).document.querySelectorAll(sel as string).length === n,
        [`${rows} td[data-label=Outcome]`, bots] as const,
      );
      for (const outcome of await page.locator(`${rows} td[data-label=Outcome]`).allTextContents()) {
        assert.equal(outcome.trim(), 'bot');
      }
      await page.click('form[aria-label="Click filters"] button:text("Clear")');
      await page.waitForSelector(`${rows} code:text-is("browser-click-05")`);

      // Each click names the stream that took it, by name.
      assert.equal(
        (
          await page.textContent(`${rows}:has(code:text-is("browser-click-05")) td[data-label=Stream]`)
        )?.trim(),
        'Landing A',
      );
      assert.equal(
        (
          await page.textContent(`${rows}:has(code:text-is("browser-click-04")) td[data-label=Stream]`)
        )?.trim(),
        '–',
      );
      // A click opens with its conversions.
      await page.click(`${rows} button:has(code:text-is("browser-click-05"))`);
      const detail = 'section[aria-label="Click browser-click-05"]';
      await page.waitForSelector(`${detail} dd:text-is("Landing A")`);
      await page.waitForSelector(
        `${detail} table[aria-label="Conversions of the click"] td[data-label=Payout]`,
      );
      assert.deepEqual(
        (await page.locator(`${detail} td[data-label=Payout]`).allTextContents()).map((x) => x.trim()),
        ['12.50 USD', '3.00 EUR'],
      );
      assert.match(page.url(), /#\/clicks\?click=browser-click-05$/);
      await screenshot(page, 'console-click-detail');

      // Conversions: newest first, each linked to its click.
      await page.click('nav a[href="#/conversions"]');
      const conv = 'table[aria-label=Conversions] tbody tr';
      await page.waitForSelector(`${conv} td[data-label=Status]:has-text("rejected")`);
      assert.deepEqual(
        (await page.locator(`${conv} td[data-label=Status]`).allTextContents()).map((x) => x.trim()),
        ['rejected', 'lead', 'sale'],
      );
      await screenshot(page, 'console-conversions');
      await page.click(`${conv} a:has(code:text-is("browser-click-06"))`);
      await page.waitForSelector(
        'section[aria-label="Click browser-click-06"] td[data-label=Status]:has-text("rejected")',
      );

      // Flows: conversions (leads and sales) and revenue in each currency apart; rejected earns nothing.
      await page.click('nav a[href="#/flows"]');
      const row = 'table[aria-label=Flows] tr:has(button:text-is("paid-flow"))';
      await page.waitForSelector(row);
      assert.equal((await page.textContent(`${row} td[data-label="Conv."]`))?.trim(), '2');
      assert.equal((await page.textContent(`${row} td[data-label=Revenue]`))?.trim(), '3.00 EUR · 12.50 USD');
      await screenshot(page, 'console-flows-revenue');
      assert.deepEqual(seen.errors, []);
      await page.close();
    });

    test('on a phone the clicks, a click and the conversions fit the width', async () => {
      const page = await browser.newPage({
        viewport: { width: 390, height: 844 },
        isMobile: true,
        hasTouch: true,
      });
      const seen = watchConsole(page);
      await signIn(page, viewer);
      await page.click('nav a[href="#/clicks"]');
      await page.waitForSelector('table[aria-label=Clicks] code:text-is("browser-click-05")');
      // The flows' and streams' names come apart from the clicks: measured once they are in.
      await page.waitForSelector(
        'table[aria-label=Clicks] tr:has(code:text-is("browser-click-05")) td[data-label=Stream]:text-is("Landing A")',
      );
      assert.ok(
        (await overflowOf(page)) <= 0,
        `clicks page is ${await overflowOf(page)}px wider than the phone`,
      );
      await screenshot(page, 'console-phone-clicks');
      await page.click('table[aria-label=Clicks] button:has(code:text-is("browser-click-05"))');
      await page.waitForSelector('section[aria-label="Click browser-click-05"] td[data-label=Payout]');
      await page.waitForSelector('section[aria-label="Click browser-click-05"] dd:text-is("Landing A")');
      assert.ok((await overflowOf(page)) <= 0, `a click is ${await overflowOf(page)}px wider than the phone`);
      await screenshot(page, 'console-phone-click-detail');
      await page.click('nav a[href="#/conversions"]');
      await page.waitForSelector('table[aria-label=Conversions] td[data-label=Flow]:text-is("paid-flow")');
      assert.ok(
        (await overflowOf(page)) <= 0,
        `conversions are ${await overflowOf(page)}px wider than the phone`,
      );
      await screenshot(page, 'console-phone-conversions');
      await page.click('nav a[href="#/flows"]');
      await page.waitForSelector('table[aria-label=Flows] td[data-label=Revenue]');
      await page.waitForSelector('[data-testid=fallback-url]');
      assert.ok((await overflowOf(page)) <= 0, `flows are ${await overflowOf(page)}px wider than the phone`);
      assert.deepEqual(seen.errors, []);
      await page.close();
    });
  });

  for (const [label, viewport] of [
    ['desktop', { width: 1366, height: 768 }],
    ['phone', { width: 390, height: 844 }],
  ] as const) {
    test(`an admin (${label}) creates an operator, sees its token once, revokes it, and finds both in the audit log`, async () => {
      const page = await browser.newPage({
        viewport,
        ...(label === 'phone' ? { isMobile: true, hasTouch: true } : {}),
      });
      const seen = watchConsole(page);
      await signIn(page, admin);
      const name = `carol-${label}`;

      await page.click('nav a[href="#/operators"]');
      await page.waitForSelector('table[aria-label=Operators] code:text-is("alice")');
      await page.fill('#op-name', name);
      await page.selectOption('#op-role', 'viewer');
      await page.click('form[aria-label="New operator"] button[type=submit]');
      const token = ((await page.textContent('[data-testid=new-token]')) ?? '').trim();
      assert.match(token, /^slc_/);
      assert.match((await page.textContent('section[aria-label="New token"]')) ?? '', /shown only this once/);
      // The token shown is the operator's: it signs in as a viewer.
      const me = (await (await t.acp('/acp/auth/whoami', token, {})).json()) as {
        name: string;
        role: string;
      };
      assert.deepEqual([me.name, me.role], [name, 'viewer']);
      await page.click('button:text("Copy token")');
      await page.waitForSelector('section[aria-label="New token"] .muted');
      assert.ok((await overflowOf(page)) <= 0, 'no horizontal scrolling with the token shown');
      await screenshot(page, `console-${label}-operators-token`);
      await page.click('button:text("Done, I have stored it")');
      // The token is gone from the page.
      await page.waitForSelector('[data-testid=new-token]', { state: 'detached' });

      // Revoke asks once more, then the operator loses access.
      const row = `table[aria-label=Operators] tr:has(code:text-is("${name}"))`;
      await page.click(`${row} button:text-is("Revoke")`);
      await page.click(`${row} button:text-is("Revoke ${name}")`);
      await page.waitForSelector(row, { state: 'detached' });
      assert.equal((await t.acp('/acp/auth/whoami', token, {})).status, 401);
      // An admin's own row has no revoke button.
      assert.equal(
        await page.locator('table[aria-label=Operators] tr:has(code:text-is("alice")) button').count(),
        0,
      );

      // The audit log, newest first: the revoke, then the create, both by alice.
      await page.click('nav a[href="#/audit"]');
      const first = 'table[aria-label="Audit log"] tbody tr:first-child';
      await page.waitForSelector(`${first} td[data-label=Target]:has-text("${name}")`);
      assert.match((await page.textContent(`${first} td[data-label=Action]`)) ?? '', /operator\.revoke/);
      assert.match((await page.textContent(`${first} td[data-label=Operator]`)) ?? '', /alice/);
      assert.match(
        (await page.textContent(
          'table[aria-label="Audit log"] tbody tr:nth-child(2) td[data-label=Action]',
        )) ?? '',
        /operator\.create/,
      );
      // It polls: a change made elsewhere appears without a reload.
      const flow = (await (
        await t.acp('/acp/traffic-flows/create', admin, { slug: `audited-${label}`, name: 'x' })
      ).json()) as { id: string };
      await page.waitForSelector(`${first} td[data-label=Target]:has-text("${flow.id}")`);
      assert.ok((await overflowOf(page)) <= 0, 'no horizontal scrolling on the audit page');
      await screenshot(page, `console-${label}-audit`);
      // Filtered by action: the creates only.
      await page.fill('#audit-action', 'operator.create');
      await page.click('form[aria-label="Audit filters"] button[type=submit]');
      await page.waitForSelector(`${first} td[data-label=Action]:has-text("operator.create")`);
      const actions = await page
        .locator('table[aria-label="Audit log"] td[data-label=Action]')
        .allTextContents();
      assert.ok(actions.length > 0 && actions.every((a) => a.trim() === 'operator.create'), actions.join());
      assert.deepEqual(seen.errors, []);
      await page.close();
    });
  }
});
