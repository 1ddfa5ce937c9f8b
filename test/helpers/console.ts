import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';
import { listenOnLoopback, startApp, type TestApp } from './app.js';
import { launchChromium } from './browser.js';

/**
 * The console's browser tests: the real app on a loopback port (serving the console that the
 * project's global setup built into dist/console/), and headless Chromium (test/helpers/browser.ts).
 */
export interface ConsoleRig {
  test: TestApp;
  origin: string;
  browser: Browser;
  close(): Promise<void>;
}

export async function startConsoleRig(settings: Record<string, string> = {}): Promise<ConsoleRig> {
  const test = await startApp(settings);
  const origin = await listenOnLoopback(test);
  const browser = await launchChromium();
  return {
    test,
    origin,
    browser,
    async close() {
      await browser.close();
      await test.close();
    },
  };
}

/** A console tab, and everything it did that a test must see did not happen. */
export interface ConsoleTab {
  page: Page;
  /** Uncaught errors in the page, and console errors (a CSP violation is reported as one). */
  errors: string[];
  /** Every alert, confirm or prompt the page opened (none ever should). */
  dialogs: string[];
  /** Requests to anywhere but rowi. */
  elsewhere: string[];
}

export const WIDE = { width: 1280, height: 900 };
export const NARROW = { width: 390, height: 844 };

/** Opens /console in a fresh tab, not signed in. */
export async function openConsole(
  rig: ConsoleRig,
  viewport: { width: number; height: number } = WIDE,
  at = '',
): Promise<ConsoleTab> {
  const context = await rig.browser.newContext({ viewport, acceptDownloads: true });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: rig.origin });
  const page = await context.newPage();
  const tab: ConsoleTab = { page, errors: [], dialogs: [], elsewhere: [] };
  page.on('pageerror', (error) => tab.errors.push(error.message));
  page.on('console', (message) => {
    if (
      message.type() === 'error' &&
      !/Failed to load resource: the server responded with a status of (4\d\d)/.test(message.text())
    )
      tab.errors.push(message.text());
  });
  page.on('dialog', (dialog) => {
    tab.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(`${rig.origin}/`) && !url.startsWith('data:') && !url.startsWith('blob:'))
      tab.elsewhere.push(url);
  });
  await page.goto(`${rig.origin}/console${at}`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  return tab;
}

/** Signs in with an API key and waits for the console's menu. */
export async function signIn(tab: ConsoleTab, key: string): Promise<void> {
  await tab.page.getByRole('textbox', { name: /^API key/ }).fill(key);
  await tab.page.getByRole('button', { name: 'Sign in' }).click();
  await tab.page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** Opens /console and signs in with `key`; at `at` (`#/webhooks`) when given. */
export async function signedIn(
  rig: ConsoleRig,
  key = rig.test.adminKey,
  viewport: { width: number; height: number } = WIDE,
  at = '',
): Promise<ConsoleTab> {
  const tab = await openConsole(rig, viewport, at);
  await signIn(tab, key);
  return tab;
}

/** Goes to a section by the menu, as a person would (opening the menu first on a narrow screen). */
export async function goTo(tab: ConsoleTab, label: string): Promise<void> {
  const menu = tab.page.getByRole('button', { name: 'Menu' });
  if (await menu.isVisible()) await menu.click();
  await tab.page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: label, exact: true }).click();
  await tab.page.getByRole('heading', { level: 1 }).first().waitFor();
}

/** What the tab must not have done: nothing failed, nothing ran from a record, nothing left rowi. */
export function expectClean(tab: ConsoleTab): void {
  expect(tab.errors).toEqual([]);
  expect(tab.dialogs).toEqual([]);
  expect(tab.elsewhere).toEqual([]);
}

let axeSource: string | undefined;

/**
 * axe-core's check of the page as it is now: no serious or critical violation. axe is evaluated
 * through the DevTools protocol, which the page's CSP does not govern (the page itself runs no
 * script but its own).
 */
export async function expectAccessible(tab: ConsoleTab, what: string): Promise<void> {
  axeSource ??= readFileSync(join(createRequire(import.meta.url).resolve('axe-core'), '..', 'axe.min.js'), 'utf8');
  if (!(await tab.page.evaluate(() => 'axe' in window))) await tab.page.evaluate(axeSource);
  const violations = await tab.page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run: (
            context: Document,
            options: object,
          ) => Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }>;
        };
      }
    ).axe;
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map(
        (violation) =>
          `${violation.id} (${violation.impact}): ${violation.help} at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`,
      );
  });
  expect(violations, what).toEqual([]);
}

/** Whether the page scrolls sideways as a whole (tables may scroll in their own frame; the page must not). */
export async function scrollsSideways(tab: ConsoleTab): Promise<boolean> {
  return tab.page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
}

/**
 * The pictures in docs/console.md are taken by the tests: with ROWI_TEST_CONSOLE_SCREENSHOTS set
 * to a folder (`npm run docs` sets docs/images), `docs/images/console-<name>.png`.
 */
export async function screenshot(tab: ConsoleTab, name: string): Promise<void> {
  const folder = process.env.ROWI_TEST_CONSOLE_SCREENSHOTS;
  if (!folder) return;
  await tab.page.screenshot({ path: join(folder, `console-${name}.png`) });
}
