import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';
import {
  browserMissing,
  consoleUrl,
  launchBrowser,
  overflowOf,
  screenshot,
  watchConsole,
} from '../helpers/browser.ts';
import { flowWithDefault, startTestNode, type TestNode, withPostbackKey } from '../helpers/node.ts';
import { dropSchema, pgAvailable, pgBehindProxy, testSchema } from '../helpers/postgres.ts';

const skip = browserMissing();
const skipPg = !(await pgAvailable()) && 'PostgreSQL unavailable';
const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';

/** The page's window, as the functions run in the browser see it (the tests are typed without the DOM's lib). */
type Win = { location: { hash: string }; document: { querySelector(s: string): { value: string } | null } };

/** Opens the console at `url` and signs in with `token`. */
async function signInTo(page: Page, url: string, token: string): Promise<void> {
  await page.goto(url);
  await page.fill('#token', token);
  await page.click('form[aria-label="Sign in"] button[type=submit]');
}

/** Targeting, the simulator and reports in the console, as a media buyer uses them. */
describe('console: targeting rules, "Test a click" and reports in a browser', { skip }, () => {
  let t: TestNode;
  let browser: Browser;
  let admin: string;

  before(async () => {
    t = await startTestNode();
    admin = await t.token('admin', 'mia');
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  async function signIn(page: Page): Promise<void> {
    await signInTo(page, consoleUrl(t.url), admin);
    await page.waitForSelector('[data-testid=overview-node-id]');
  }

  test('an admin builds a stream with rules, is warned about the missing default stream, and tests clicks', async () => {
    const res = await t.acp('/acp/traffic-flows/create', admin, { slug: 'buyer', name: 'Buyer' });
    assert.equal(res.status, 200);
    const flow = (await res.json()) as FlowRecord;
    const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
    const seen = watchConsole(page);
    await signIn(page);
    await page.click('nav a[href="#/flows"]');
    await page.click('button:text-is("buyer")');
    // No default stream yet: the page says what to do, and, the node having no fallback URL, that
    // such a click is lost.
    await page.waitForSelector('[data-testid=no-default-stream]:has-text("answered 404")');
    assert.match(
      (await page.textContent('[data-testid=no-default-stream]')) ?? '',
      /a click no other stream takes is lost \(answered 404\)\. Add a default stream/,
    );
    await page.click('button:text("New stream")');
    await page.fill('#f-name', 'iPhones at work');
    await page.fill('#f-target_url', 'https://offer.test/?c={click_id}');
    await page.click('button:text("Add rule")');
    await page.selectOption('select[aria-label="Rule 1 field"]', 'device_type');
    await page.fill('input[aria-label="Rule 1 values"]', 'mobile');
    await page.click('button:text("Add rule")');
    await page.selectOption('select[aria-label="Rule 2 field"]', 'ip');
    // A wrong value: the API's message lands on the rules, naming the rule.
    await page.fill('input[aria-label="Rule 2 values"]', '300.1.1.1/8');
    await page.click('form[aria-label="New stream"] button[type=submit]');
    const error = await page.waitForSelector('[data-field-error=rules]');
    assert.match((await error.textContent()) ?? '', /rule 2: "300\.1\.1\.1\/8" is not an IPv4/);
    await page.fill('input[aria-label="Rule 2 values"]', '203.0.113.0/24');
    await page.selectOption('select[aria-label="Rule 2 operator"]', 'is_not');
    await page.fill('#f-daily_cap', '300');
    await page.click('form[aria-label="New stream"] button[type=submit]');
    await page.waitForSelector(
      'td[data-label=Filters]:text("device_type is mobile; ip is not 203.0.113.0/24")',
    );
    // Its cap is in the list, not only in its form.
    assert.equal((await page.textContent('td[data-label=Cap]'))?.trim(), '300/day');
    const streams = (await (
      await t.acp('/acp/streams/list', admin, { filter: { flow_id: flow.id } })
    ).json()) as {
      items: StreamRecord[];
    };
    assert.deepEqual(streams.items[0]!.filters.rules, [
      { field: 'device_type', op: 'is', values: ['mobile'] },
      { field: 'ip', op: 'is_not', values: ['203.0.113.0/24'] },
    ]);

    // Yes/no rules are picked from true/false: a typed "True" was saved as false.
    await page.click('button:text("New stream")');
    await page.fill('#f-name', 'Safe page');
    await page.fill('#f-target_url', 'https://safe.test/');
    await page.click('button:text("Add rule")');
    await page.selectOption('select[aria-label="Rule 1 field"]', 'is_bot');
    await page.click('button:text("Add rule")');
    await page.selectOption('select[aria-label="Rule 2 field"]', 'is_unique');
    await page.selectOption('select[aria-label="Rule 2 values"]', 'false');
    await page.click('form[aria-label="New stream"] button[type=submit]');
    await page.waitForSelector('td[data-label=Filters]:text("is_bot is true; is_unique is false")');
    const safe = (
      (await (await t.acp('/acp/streams/list', admin, { filter: { flow_id: flow.id } })).json()) as {
        items: StreamRecord[];
      }
    ).items.find((s) => s.name === 'Safe page');
    assert.deepEqual(safe?.filters.rules, [
      { field: 'is_bot', op: 'is', values: [true] },
      { field: 'is_unique', op: 'is', values: [false] },
    ]);

    // Test a click: an iPhone goes to the stream; a desktop is lost, and the trace says why.
    const panel = 'section[aria-label="Test a click"]';
    await page.fill(`${panel} input[name=sim-country]`, 'DE');
    await page.click(`${panel} button:text("Test")`);
    await page.waitForSelector('[data-testid=sim-stream]:text("iPhones at work")');
    // The weekday and hour the flow's rules saw, in the flow's zone (UTC here).
    assert.match(
      (await page.textContent('[data-testid=sim-local]')) ?? '',
      /^(sun|mon|tue|wed|thu|fri|sat) \d\d:xx in UTC$/,
    );
    await page.selectOption(`${panel} select[name=sim-preset]`, 'Windows Chrome');
    await page.click(`${panel} button:text("Test")`);
    await page.waitForSelector('[data-testid=sim-outcome]:text("no_match")');
    const why = await page.textContent(
      `${panel} table[aria-label="Decision trace"] tr:has(td[data-label=Stream]:text-is("iPhones at work")) td[data-label=Why]`,
    );
    assert.match(why ?? '', /rule 1 \(device_type is \["mobile"\]\): fail/);
    await screenshot(page, 'console-targeting-1366');
    assert.deepEqual(
      seen.errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await page.close();
  });

  test('reports: clicks and a sale appear by day and country, with totals, a chart and a CSV; the phone fits', async () => {
    // A flow of its own at 0.20 a click, with a stream that takes everyone.
    const made = await t.acp('/acp/traffic-flows/create', admin, {
      slug: 'reported',
      name: 'Reported',
      cost_per_click: 0.2,
    });
    assert.equal(made.status, 200);
    const flow = (await made.json()) as FlowRecord;
    const stream = await t.acp('/acp/streams/create', admin, {
      flow_id: flow.id,
      name: 'everyone',
      type: 'default',
      target_url: 'https://offer.test/?c={click_id}',
    });
    assert.equal(stream.status, 200);
    // Traffic: two iPhone clicks from Germany (one converts), bots apart.
    const ids: string[] = [];
    for (const ip of ['198.51.100.1', '198.51.100.2']) {
      const res = await fetch(`${t.url}/go/reported`, {
        redirect: 'manual',
        headers: { 'user-agent': IPHONE, 'cf-ipcountry': 'DE', 'x-forwarded-for': ip },
      });
      assert.equal(res.status, 302);
      ids.push(res.headers.get('x-click-id')!);
    }
    await t.node.clickLog.persist();
    assert.equal(
      (await fetch(`${t.url}${withPostbackKey(t, `/postback?click_id=${ids[0]}&payout=9&status=sale`)}`))
        .status,
      200,
    );

    for (const [width, height, name] of [
      [1366, 768, 'console-reports-1366'],
      [390, 844, 'console-reports-390'],
    ] as const) {
      const page = await browser.newPage({ viewport: { width, height } });
      const seen = watchConsole(page);
      await signIn(page);
      // From the flows page, the flow's own report.
      await page.click('nav a[href="#/flows"]');
      await page.click('[data-testid=report-reported]');
      await page.waitForSelector('table[aria-label=Report] td[data-label=country]:text("DE")');
      const row = 'table[aria-label=Report] tbody tr:has(td[data-label=country]:text("DE"))';
      assert.equal((await page.textContent(`${row} td[data-label=clicks]`))?.trim(), '2');
      assert.equal((await page.textContent(`${row} td[data-label=conversions]`))?.trim(), '1');
      assert.match((await page.textContent(`${row} td[data-label=revenue]`)) ?? '', /9\.00 USD/);
      assert.match((await page.textContent(`${row} td[data-label=cost]`)) ?? '', /0\.40 USD/);
      const total = 'table[aria-label=Report] tfoot td[data-label=profit]';
      assert.match((await page.textContent(total)) ?? '', /8\.60 USD/);
      if (width > 500) {
        // The totals sit under the columns they sum (they were a table of their own, drifting left).
        const head = await page.locator('table[aria-label=Report] thead th:has-text("profit")').boundingBox();
        const foot = await page.locator(total).boundingBox();
        assert.ok(head && foot && Math.abs(head.x - foot.x) < 1 && Math.abs(head.width - foot.width) < 1);
      }
      await page.locator('.chart .uplot').waitFor();
      const download = page.waitForEvent('download');
      await page.click('[data-testid=report-csv]');
      const csv = await (await download).createReadStream();
      let text = '';
      for await (const chunk of csv) text += chunk;
      assert.match(text.split('\r\n')[0]!, /^day,country,clicks,/);
      assert.match(text, /,DE,2,2,0,0,0,1,0,1,9,0\.4,8\.6,/);
      assert.ok((await overflowOf(page)) <= 0, `no horizontal overflow at ${width} px`);
      await screenshot(page, name);
      assert.deepEqual(seen.errors, []);
      await page.close();
    }

    // A sale paid in EUR: the flow's money is now in two currencies, which a report never adds up.
    // The page counts everything, shows no money until a currency is picked, and offers the
    // currencies the selection holds: no refusal (a 400 for every view and every change made the
    // doctor flag the reports route).
    assert.equal(
      (
        await fetch(
          `${t.url}${withPostbackKey(t, `/postback?click_id=${ids[1]}&payout=4&status=sale&currency=EUR`)}`,
        )
      ).status,
      200,
    );
    // A flow with no traffic, to pick in the report's flow list below.
    const quiet = await t.acp('/acp/traffic-flows/create', admin, { slug: 'quiet', name: 'quiet' });
    assert.equal(quiet.status, 200);
    const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
    const seen = watchConsole(page);
    await signIn(page);
    await page.click('nav a[href="#/flows"]');
    await page.click('[data-testid=report-reported]');
    await page.waitForSelector('[data-testid=report-currencies]');
    assert.match(
      (await page.textContent('[data-testid=report-currencies]')) ?? '',
      /in EUR, USD, never added up/,
    );
    const row = 'table[aria-label=Report] tbody tr:has(td[data-label=country]:text("DE"))';
    await page.waitForSelector(`${row} td[data-label=conversions]:text("2")`);
    assert.equal((await page.textContent(`${row} td[data-label=revenue]`))?.trim(), '–', 'no money added up');
    await page.selectOption('select[name=currency]', 'EUR');
    await page.waitForSelector(`${row} td[data-label=revenue]:text("4.00 EUR")`);
    await page.selectOption('select[name=currency]', 'USD');
    await page.waitForSelector(`${row} td[data-label=revenue]:text("9.00 USD")`);
    // People only: a conversion on a bot click leaves with its click (none here: both were iPhones).
    await page.selectOption('select[name=traffic]', 'people');
    await page.waitForSelector(`${row} td[data-label=revenue]:text("9.00 USD")`);
    assert.equal((await page.textContent(`${row} td[data-label=bots]`))?.trim(), '0');
    // Another flow, picked by its slug, whose money is in neither: the picked currency is dropped,
    // not kept to show nothing.
    await page.selectOption('select[name=flow]', { label: 'quiet' });
    await page.waitForSelector('[data-testid=report-empty]');
    assert.equal(await page.inputValue('[name=currency]'), '');
    assert.deepEqual(seen.errors, [], 'no request refused');
    await page.close();
  });

  test("a flow's report link opens the report of that flow alone, and the hash follows the flow picker", async () => {
    // Two flows with different traffic: one click on alpha, three on beta.
    const alpha = await flowWithDefault(t, admin, 'alpha');
    const beta = await flowWithDefault(t, admin, 'beta');
    for (const [slug, n] of [
      ['alpha', 1],
      ['beta', 3],
    ] as const)
      for (let i = 0; i < n; i++)
        assert.equal(
          (await fetch(`${t.url}/go/${slug}`, { redirect: 'manual', headers: { 'user-agent': IPHONE } }))
            .status,
          302,
        );
    await t.node.clickLog.persist();
    const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
    const seen = watchConsole(page);
    await signIn(page);
    await page.click('nav a[href="#/flows"]');
    await page.click('[data-testid=report-alpha]');
    const total = 'table[aria-label=Report] tfoot td[data-label=clicks]';
    await page.waitForSelector(`${total}:text-is("1")`);
    assert.equal(await page.inputValue('select[name=flow]'), alpha.id);
    // Another flow picked: the hash says so (a reload or a shared link keeps it), the figures are its own.
    await page.selectOption('select[name=flow]', { label: 'beta' });
    await page.waitForSelector(`${total}:text-is("3")`);
    await page.waitForFunction(
      (id) => (globalThis as unknown as Win).location.hash === `#/reports?flow=${id}`,
      beta.id,
    );
    await page.reload();
    await page.waitForSelector(`${total}:text-is("3")`);
    assert.equal(await page.inputValue('select[name=flow]'), beta.id);
    // A link to another flow's report followed while the page is open: that flow, not the one shown.
    await page.evaluate((id) => {
      (globalThis as unknown as Win).location.hash = `#/reports?flow=${id}`;
    }, alpha.id);
    await page.waitForSelector(`${total}:text-is("1")`);
    assert.equal(await page.inputValue('select[name=flow]'), alpha.id);
    // The navigation's Reports link: every flow again.
    await page.click('nav a[href="#/reports"]');
    await page.waitForFunction(
      () => (globalThis as unknown as Win).document.querySelector('select[name=flow]')?.value === '',
    );
    assert.deepEqual(seen.errors, []);
    await page.close();
  });

  test("a flow's page shows the postback URL to paste into the network, with the node's key and the click id it needs", async () => {
    const res = await t.acp('/acp/traffic-flows/create', admin, {
      slug: 'paid',
      name: 'Paid',
      currency: 'EUR',
    });
    const paid = (await res.json()) as FlowRecord;
    await t.acp('/acp/streams/create', admin, {
      flow_id: paid.id,
      name: 'offer',
      type: 'default',
      target_url: 'https://offer.test/',
    });
    const context = await browser.newContext({
      viewport: { width: 1366, height: 768 },
      permissions: ['clipboard-read', 'clipboard-write'],
    });
    const page = await context.newPage();
    const seen = watchConsole(page);
    await signIn(page);
    await page.click('nav a[href="#/flows"]');
    await page.click('button:text-is("paid")');
    const panel = 'section[aria-label="Postback URL"]';
    await page.waitForSelector(`${panel} [data-testid=postback-key]`);
    // The streams are read apart from the configuration: the warning comes once they are.
    await page.waitForSelector(`${panel} p.warn[data-testid=postback-click-id]`);
    // A key is required by default: the URL has its place, and the page says where it comes from.
    const template = `${t.url}/postback?click_id={network's click id macro}&status=sale&payout={network's payout macro}&currency=EUR&txid={network's transaction id macro}&key=YOUR_KEY`;
    assert.equal(await page.textContent('[data-testid=postback-url]'), template);
    const said = async (id: string) =>
      ((await page.textContent(`${panel} [data-testid=${id}]`)) ?? '').replace(/\s+/g, ' ');
    assert.match(await said('postback-key'), /requires a postback key: the URL ends with &key=YOUR_KEY/);
    assert.match(await said('postback-key'), /the first node printed when it started/);
    assert.match(await said('postback-key'), /POST \/acp\/postback\/rotate-key.*\(24 h\)/);
    // The only offer does not carry {click_id}: the network could never name the click.
    assert.match(
      await said('postback-click-id'),
      /No stream of this flow passes \{click_id\}.*the loop cannot close/,
    );
    await page.click(`${panel} button:text("Copy postback URL")`);
    await page.waitForSelector(`${panel} .muted:text("Copied.")`);
    assert.equal(
      await page.evaluate(() =>
        (
          globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
        ).navigator.clipboard.readText(),
      ),
      template,
    );
    await screenshot(page, 'console-postback-1366');
    // An offer that carries it: the warning becomes the reminder (the list polls).
    await t.acp('/acp/streams/create', admin, {
      flow_id: paid.id,
      name: 'tracked',
      type: 'regular',
      target_url: 'https://offer.test/?aff_sub={click_id}',
    });
    await page.waitForSelector(`${panel} p.hint[data-testid=postback-click-id]`, { timeout: 15_000 });
    assert.match(await said('postback-click-id'), /The offer's target URL must carry \{click_id\}/);
    await page.setViewportSize({ width: 390, height: 844 });
    assert.ok((await overflowOf(page)) <= 0, 'the URL wraps on a phone');
    assert.deepEqual(seen.errors, []);
    await context.close();

    // A node that requires a key: the URL ends with the place for it, and no warning.
    const keyed = await startTestNode({ yaml: `postback:\n  key_sha256: ${'ab'.repeat(32)}\n` });
    try {
      const token = await keyed.token('viewer', 'val');
      await flowWithDefault(
        keyed,
        await keyed.token('admin', 'ann'),
        'keyed',
        'https://offer.test/?s={click_id}',
      );
      const other = await browser.newPage({ viewport: { width: 1366, height: 768 } });
      await signInTo(other, consoleUrl(keyed.url, '#/flows'), token);
      await other.click('button:text-is("keyed")');
      await other.waitForSelector(`${panel} p.hint[data-testid=postback-key]`);
      // The click-id check is judged on the streams, read apart from the config: wait for them, or
      // "no warning" would hold before they were read (a review found it).
      await other.waitForSelector('table[aria-label=Streams] tbody tr');
      assert.match(
        (await other.textContent('[data-testid=postback-url]')) ?? '',
        /&currency=USD&txid=\{network's transaction id macro\}&key=YOUR_KEY$/,
      );
      assert.match(
        ((await other.textContent(`${panel} [data-testid=postback-key]`)) ?? '').replace(/\s+/g, ' '),
        /requires a postback key: the URL ends with &key=YOUR_KEY: put your key there/,
      );
      assert.doesNotMatch((await other.textContent(panel)) ?? '', /without a key|cannot close/);
      await other.close();
    } finally {
      await keyed.close();
    }

    // A node told to take postbacks without a key: no place for one, and a warning saying so.
    const open = await startTestNode({ yaml: 'postback:\n  require_key: false\n' });
    try {
      const token = await open.token('viewer', 'vio');
      await flowWithDefault(
        open,
        await open.token('admin', 'ada'),
        'open',
        'https://offer.test/?s={click_id}',
      );
      const other = await browser.newPage({ viewport: { width: 1366, height: 768 } });
      await signInTo(other, `${open.url}/acp/#/flows`, token);
      await other.click('button:text-is("open")');
      await other.waitForSelector(`${panel} p.warn[data-testid=postback-key]`);
      assert.match(
        (await other.textContent('[data-testid=postback-url]')) ?? '',
        /&txid=\{network's transaction id macro\}$/,
      );
      assert.match(
        ((await other.textContent(`${panel} [data-testid=postback-key]`)) ?? '').replace(/\s+/g, ' '),
        /without a key \(postback\.require_key: false\): anyone who knows a click id can post conversions/,
      );
      await other.close();
    } finally {
      await open.close();
    }
  });

  test('lists stay live, and a node that stops answering turns the console stale instead of green', async () => {
    const node = await startTestNode({ yaml: 'routing:\n  fallback_url: https://lost.test/\n' });
    let closed = false;
    try {
      const token = await node.token('admin', 'sam');
      // A node with no flow yet: the page says what to do, and where lost clicks go.
      const empty = await browser.newPage({ viewport: { width: 1366, height: 768 } });
      await signInTo(empty, consoleUrl(node.url, '#/flows'), token);
      await empty.waitForSelector('[data-testid=no-flows]');
      assert.match(
        (await empty.textContent('[data-testid=no-flows]')) ?? '',
        /No traffic flows yet\. Create one with New flow/,
      );
      assert.match(
        (await empty.textContent('[data-testid=fallback-url]')) ?? '',
        /goes to https:\/\/lost\.test\//,
      );
      // A flow without a default stream on a node with a fallback URL: its unmatched clicks are not
      // lost, they leave the campaign for the fallback (the warning said "lost" whatever the node did).
      const stray = (await (
        await node.acp('/acp/traffic-flows/create', token, { slug: 'stray', name: 'Stray' })
      ).json()) as FlowRecord;
      await node.acp('/acp/streams/create', token, {
        flow_id: stray.id,
        name: 'iPhones',
        type: 'regular',
        target_url: 'https://x.test/?c={click_id}',
        filters: { rules: [{ field: 'device_type', op: 'is', values: ['mobile'] }] },
      });
      await empty.click('button:text-is("stray")');
      await empty.waitForSelector('[data-testid=no-default-stream]:has-text("fallback URL")');
      const warning = ((await empty.textContent('[data-testid=no-default-stream]')) ?? '').replace(
        /\s+/g,
        ' ',
      );
      assert.match(
        warning,
        /goes to the node's fallback URL \(https:\/\/lost\.test\/\), not to an offer of this flow\. Add a default stream to keep such clicks in the campaign\./,
      );
      assert.doesNotMatch(warning, /lost \(/);
      await empty.close();
      const flowRes = await node.acp('/acp/traffic-flows/create', token, { slug: 'live', name: 'Live' });
      const live = (await flowRes.json()) as FlowRecord;
      await node.acp('/acp/streams/create', token, {
        flow_id: live.id,
        name: 'all',
        type: 'default',
        target_url: 'https://x.test/',
      });
      // Both widths stay open: each sees a click arrive without a reload, then both see the node stop.
      const pages = [];
      for (const [width, height] of [
        [1366, 768],
        [390, 844],
      ] as const) {
        const page = await browser.newPage({ viewport: { width, height } });
        pages.push({ page, width });
        await signInTo(page, consoleUrl(node.url), token);
        await page.waitForSelector('[data-testid=updated]');
        await page.click('nav a[href="#/flows"]');
        const clicks = 'table[aria-label=Flows] tr:has(button:text-is("live")) td[data-label=Clicks]';
        await page.waitForSelector(clicks);
        const before = Number((await page.textContent(clicks))?.trim());
        const res = await fetch(`${node.url}/go/live`, {
          redirect: 'manual',
          headers: { 'user-agent': IPHONE },
        });
        assert.equal(res.status, 302);
        // No reload: the list polls, and shows when it last did.
        await page.waitForSelector(`${clicks}:text-is("${before + 1}")`, { timeout: 15_000 });
        assert.match(
          (await page.textContent('[data-testid=list-updated]')) ?? '',
          /^updated \d\d:\d\d:\d\d$/,
        );
        await screenshot(page, `console-live-flows-${width}`);
      }
      await node.close();
      closed = true;
      for (const { page, width } of pages) {
        await page.waitForSelector('[data-testid=stale]', { timeout: 15_000 });
        assert.match((await page.textContent('[data-testid=stale]')) ?? '', /^stale since \d\d:\d\d:\d\d$/);
        await page.waitForSelector('[data-testid=stale-banner]');
        // It keeps asking, at the tab's interval (`?poll=1`).
        assert.match((await page.textContent('[data-testid=stale-banner]')) ?? '', /Retrying every 1 s\.$/);
        // The leader badge is no longer green.
        assert.equal(await page.locator('header .badge.ok').count(), 0);
        await screenshot(page, `console-stale-${width}`);
        await page.close();
      }
    } finally {
      if (!closed) await node.close();
    }
  });

  test("a burst of more clicks than a page keeps the server's count as the list polls", async () => {
    const node = await startTestNode();
    try {
      const token = await node.token('admin', 'lee');
      await flowWithDefault(node, token, 'burst');
      // 60 clicks within a minute: ten more than the first page shows.
      for (let i = 0; i < 60; i++) {
        const res = await fetch(`${node.url}/go/burst`, {
          redirect: 'manual',
          headers: { 'user-agent': IPHONE },
        });
        assert.equal(res.status, 302);
      }
      await node.node.clickLog.persist();
      const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
      await signInTo(page, consoleUrl(node.url, '#/clicks'), token);
      await page.waitForSelector('[data-testid=list-updated]');
      // Two polls of the list after its first page (its own update time, not the header's, which
      // moves with the metrics): each merges the last minute's clicks in. They were counted already
      // (the first poll made it "60 shown of 70" before).
      for (let poll = 0; poll < 2; poll++) {
        const updated = await page.textContent('[data-testid=list-updated]');
        await page.waitForFunction(
          ([sel, was]) =>
            (
              globalThis as unknown as {
                document: { querySelector(s: string): { textContent: string } | null };
              }
            ).document.querySelector(sel as string)?.textContent !== was,
          ['[data-testid=list-updated]', updated] as const,
          { timeout: 15_000 },
        );
      }
      assert.match((await page.textContent('p.live')) ?? '', /shown of 60 clicks/);
      await page.close();
    } finally {
      await node.close();
    }
  });

  test('with the database down, what cannot be read again is marked as it was, and names come back after', {
    skip: skipPg,
  }, async () => {
    const { proxy, url } = await pgBehindProxy();
    const schema = testSchema();
    const node = await startTestNode({
      yaml: `storage:\n  driver: postgres\n  postgres:\n    url: ${url}\n    schema: ${schema}\n    query_timeout_ms: 2000\n`,
    });
    try {
      const token = await node.token('admin', 'ops');
      await flowWithDefault(node, token, 'outage');
      const res = await fetch(`${node.url}/go/outage`, {
        redirect: 'manual',
        headers: { 'user-agent': IPHONE },
      });
      assert.equal(res.status, 302);
      await node.node.clickLog.persist();
      const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
      await signInTo(page, consoleUrl(node.url), token);
      await page.waitForSelector('section[aria-label="Cluster nodes"]');
      assert.equal(await page.locator('section[aria-label="Cluster nodes"] [data-testid=as-of]').count(), 0);
      await proxy.down();
      // The node list comes from the database: the last one stays, said to be not current.
      await page.waitForSelector('section[aria-label="Cluster nodes"] [data-testid=as-of]', {
        timeout: 20_000,
      });
      // A click answered meanwhile waits in the click log, whose writes fail: the Traffic card says
      // so now, before any click is dropped (it once showed only held / dropped).
      assert.equal(await page.locator('[data-testid=overview-click-log-failing]').count(), 0);
      const during = await fetch(`${node.url}/go/outage`, {
        redirect: 'manual',
        headers: { 'user-agent': IPHONE },
      });
      assert.equal(during.status, 302);
      await node.node.clickLog.flush();
      assert.notEqual(node.node.clickLog.stats().failing_since, null);
      await page.waitForSelector('[data-testid=overview-click-log-failing]', { timeout: 15_000 });
      assert.match(
        (await page.textContent('[data-testid=overview-click-log-failing]')) ?? '',
        /^failing since \d\d:\d\d:\d\d \(.+ ago\)$/,
      );
      // A page opened now cannot read the flows' names; they come once the database is back.
      await page.click('nav a[href="#/clicks"]');
      // Its list cannot be read: the error says so, with no "Loading…" beside it.
      await page.waitForSelector('section[aria-label=Clicks] p.error[role=alert]', { timeout: 15_000 });
      assert.equal(await page.locator('section[aria-label=Clicks] p:text-is("Loading…")').count(), 0);
      await proxy.up();
      await page.waitForSelector('table[aria-label=Clicks] td[data-label=Flow]:text-is("outage")', {
        timeout: 30_000,
      });
      // The click held through the outage is written (by this call or by the log's own timer before).
      await node.node.clickLog.persist();
      assert.deepEqual(
        [node.node.clickLog.stats().dropped, node.node.clickLog.stats().failing_since],
        [0, null],
      );
      await page.click('nav a[href="#/overview"]');
      await page.waitForSelector('section[aria-label="Cluster nodes"]');
      for (const gone of [
        'section[aria-label="Cluster nodes"] [data-testid=as-of]',
        '[data-testid=overview-click-log-failing]',
      ])
        await page.waitForFunction(
          (sel) =>
            (
              globalThis as unknown as { document: { querySelector(s: string): unknown } }
            ).document.querySelector(sel) === null,
          gone,
          { timeout: 20_000 },
        );
      await page.close();
    } finally {
      await node.close();
      await proxy.down();
      await dropSchema(schema);
    }
  });

  test('the cluster page shows every node with its own figures and the version audit', {
    skip: skipPg,
  }, async () => {
    const schema = testSchema();
    const yaml = (id: string, commit: string) =>
      `app:\n  commit: ${commit}\n  server:\n    id: ${id}\ncluster:\n  leader_election: postgres\n  lease_ttl_ms: 5000\n  renew_interval_ms: 200\n`;
    const a = await startTestNode({ postgres: { schema }, yaml: yaml('web-a', 'c0ffee') });
    const b = await startTestNode({ postgres: { schema }, yaml: yaml('web-b', 'deadbee') });
    try {
      const token = await a.token('viewer', 'vera');
      for (const [width, height, name] of [
        [1366, 768, 'console-cluster-1366'],
        [390, 844, 'console-cluster-390'],
      ] as const) {
        const page = await browser.newPage({ viewport: { width, height } });
        await signInTo(page, consoleUrl(a.url, '#/cluster'), token);
        for (const id of ['web-a', 'web-b'])
          await page.waitForSelector(
            `table[aria-label=Cluster] tr:has(code:text-is("${id}")) td[data-label=Figures]:text-is("live")`,
          );
        assert.match(
          (await page.textContent('[data-testid=version-audit]')) ?? '',
          /web-b runs a different build/,
        );
        assert.ok((await overflowOf(page)) <= 0, `no horizontal overflow at ${width} px`);
        await screenshot(page, name);
        await page.close();
      }
    } finally {
      await b.close();
      await a.close();
      await dropSchema(schema);
    }
  });
});
