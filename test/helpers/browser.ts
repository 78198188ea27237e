import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it), or `SLUICE_CHROMIUM`. */
export const CHROMIUM = process.env.SLUICE_CHROMIUM ?? '/usr/bin/chromium';

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

/**
 * How much wider than the viewport the page is laid out (0 or less: no horizontal scrolling).
 * Against the viewport's own width, not `innerWidth`: a mobile page (`isMobile`) that is too wide
 * is zoomed out to fit, and its `innerWidth` grows with it, so the two would always agree.
 */
export async function overflowOf(page: Page): Promise<number> {
  const scrollWidth = await page.evaluate(
    // Runs in the page; this file is type-checked without the DOM library.
    () =>
      (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document
        .documentElement.scrollWidth,
  );
  return scrollWidth - page.viewportSize()!.width;
}
