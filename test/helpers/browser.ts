import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it), or `SLUICE_CHROMIUM`. */
export const CHROMIUM = process.env.SLUICE_CHROMIUM ?? '/usr/bin/chromium';

/**
 * The console of the node at `base` (and the page `hash`, e.g. `#/flows`), polling every second
 * (`?poll=1`, docs/console.md) instead of every 5 s: a test that waits for a poll waits a second.
 */
export function consoleUrl(base: string, hash = ''): string {
  return `${base}/acp/?poll=1${hash}`;
}

/** Where screenshots go for a person to review (ignored by git). */
export const RESULTS_DIR = join(import.meta.dirname, '..', '..', 'test-results');

/**
 * Why the browser tests cannot run here, or false when they can. Outside CI a machine without
 * Chromium skips them with this message; in CI a missing browser is a failure.
 */
export function browserMissing(): string | false {
  if (existsSync(CHROMIUM)) return false;
  const why = `no Chromium at ${CHROMIUM} (apt-get install chromium, or set SLUICE_CHROMIUM)`;
  if (process.env.CI) throw new Error(`the console's browser tests need Chromium in CI: ${why}`);
  process.stderr.write(`# ${why}: skipping browser tests\n`);
  return why;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Console messages and uncaught errors of a page, for the "no console errors" checks. */
export function watchConsole(page: Page): { errors: string[] } {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') errors.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return { errors };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(RESULTS_DIR, { recursive: true });
  await page.screenshot({ path: join(RESULTS_DIR, `${name}.png`), fullPage: true });
}

/** The page's globals that the layout checks read (this file is type-checked without the DOM library). */
interface LayoutWindow {
  requestAnimationFrame(cb: () => void): number;
  performance: { now(): number };
  document: {
    documentElement: { scrollWidth: number };
    querySelectorAll(
      s: string,
    ): ArrayLike<{ offsetWidth: number; parentElement: { clientWidth: number } | null }>;
  };
}

/** What the page's layout was at one animation frame: its width and each chart's against its box. */
interface LayoutSample {
  scrollWidth: number;
  charts: string[];
  chartsFit: boolean;
}

/** Frames the page's width must hold, charts inside their boxes, before it counts as settled. */
const STABLE_FRAMES = 3;

/**
 * How much wider than the viewport the page is laid out (0 or less: no horizontal scrolling), once
 * its layout has settled. A resize (`setViewportSize`, a scrollbar appearing) is followed by the
 * console's reactions a frame later: each chart's ResizeObserver redraws it for its new box. Read
 * before that, a chart still as wide as the old layout made a phone page look 33 px too wide. So the
 * page is read frame after frame until its width has held for `STABLE_FRAMES` frames with every
 * chart inside its box, or throws after `timeoutMs` with what it saw.
 *
 * Against the viewport's own width, not `innerWidth`: a mobile page (`isMobile`) that is too wide
 * is zoomed out to fit, and its `innerWidth` grows with it, so the two would always agree.
 */
export async function overflowOf(page: Page, timeoutMs = 10_000): Promise<number> {
  const settled = await page.evaluate(
    async ([limit, stableFrames]) => {
      const w = globalThis as unknown as LayoutWindow;
      const sample = (): LayoutSample => {
        const charts = Array.from(w.document.querySelectorAll('.chart .uplot'), (c) => ({
          width: c.offsetWidth,
          box: c.parentElement?.clientWidth ?? 0,
        }));
        return {
          scrollWidth: w.document.documentElement.scrollWidth,
          charts: charts.map((c) => `${c.width}/${c.box}`),
          chartsFit: charts.every((c) => c.width <= c.box),
        };
      };
      const frame = () => new Promise<void>((r) => w.requestAnimationFrame(() => r()));
      const deadline = w.performance.now() + limit;
      const seen: LayoutSample[] = [];
      for (;;) {
        // Frame callbacks run before the frame's layout and its ResizeObservers: a redraw that a
        // resize causes shows from the next frame on, hence several frames alike.
        await frame();
        const now = sample();
        seen.push(now);
        const recent = seen.slice(-stableFrames);
        if (
          recent.length === stableFrames &&
          recent.every((s) => s.chartsFit && s.scrollWidth === now.scrollWidth)
        )
          return { scrollWidth: now.scrollWidth, seen: null };
        if (w.performance.now() > deadline) return { scrollWidth: now.scrollWidth, seen: seen.slice(-10) };
      }
    },
    [timeoutMs, STABLE_FRAMES] as const,
  );
  if (settled.seen)
    throw new Error(
      `the page's layout did not settle within ${timeoutMs} ms (last frames: ${JSON.stringify(settled.seen)})`,
    );
  return settled.scrollWidth - page.viewportSize()!.width;
}

/** Each chart's width against the width of the box it is drawn in, in page order. */
export function chartWidths(page: Page): Promise<{ width: number; box: number }[]> {
  return page.evaluate(() =>
    Array.from((globalThis as unknown as LayoutWindow).document.querySelectorAll('.chart .uplot'), (c) => ({
      width: c.offsetWidth,
      box: c.parentElement?.clientWidth ?? 0,
    })),
  );
}
