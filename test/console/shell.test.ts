import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing } from '../helpers/browser.js';
import {
  expectAccessible,
  expectClean,
  goTo,
  NARROW,
  openConsole,
  screenshot,
  scrollsSideways,
  signedIn,
  startConsoleRig,
  WIDE,
  type ConsoleRig,
} from '../helpers/console.js';
import { expectProblem } from '../helpers/problems.js';
import { createCallerThroughApi } from '../helpers/records.js';

let rig: ConsoleRig | undefined;
const missing = browserMissing();

describe('GET /console: the page and its files', () => {
  beforeAll(async () => {
    rig = await startConsoleRig();
  });
  afterAll(() => rig?.close());

  it('GET /console: 200 HTML loading only hashed files of /console/assets/, under a CSP that allows no inline script or style and no eval', async () => {
    const reply = await rig!.test.call({ url: '/console', key: null, headers: { accept: 'application/json' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('text/html');
    expect(reply.headers['cache-control']).toBe('no-cache');
    const csp = String(reply.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-');
    expect(reply.text).not.toMatch(/<script>|<style|style=/);
    const sources = [...reply.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(sources).toHaveLength(3);
    for (const source of sources) {
      expect(source).toMatch(/^\/console\/assets\/[a-z]+-[A-Z0-9]{8}\.(js|css|svg)$/);
      const asset = await rig!.test.call({ url: source, key: null });
      expect(asset.status).toBe(200);
      expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(asset.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('GET /console/assets/{file}: brotli or gzip as Accept-Encoding takes them (Vary says so), the same bytes once decoded', async () => {
    const page = await rig!.test.call({ url: '/console', key: null });
    const script = /src="([^"]+\.js)"/.exec(page.text)![1]!;
    const plain = await rig!.test.app.inject({ url: script });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toMatch(/accept-encoding/i);
    const cases = [
      ['gzip, deflate, br', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0, gzip;q=0.5', 'gzip'],
      ['*', 'br'],
      ['identity', undefined],
    ] as const;
    for (const [accept, coding] of cases) {
      const reply = await rig!.test.app.inject({ url: script, headers: { 'accept-encoding': accept } });
      expect(reply.statusCode, accept).toBe(200);
      expect(reply.headers['content-encoding'], accept).toBe(coding);
      const decoded =
        coding === 'br'
          ? brotliDecompressSync(reply.rawPayload)
          : coding === 'gzip'
            ? gunzipSync(reply.rawPayload)
            : reply.rawPayload;
      expect(decoded.equals(plain.rawPayload), accept).toBe(true);
    }
  });

  it('GET /console/assets/{file}: 404 problem for a file the build did not write, and no path out of the folder', async () => {
    for (const url of [
      '/console/assets/console-00000000.js',
      '/console/assets/..%2F..%2F..%2Fpackage.json',
      '/console/assets/manifest.json',
      '/console/assets/.built',
    ]) {
      expectProblem(await rig!.test.call({ url, key: null }), 404, 'not-found');
    }
  });

  it('POST /console: 405 with Allow', async () => {
    const reply = await rig!.test.call({ method: 'POST', url: '/console', body: {} });
    expectProblem(reply, 405, 'method-not-allowed');
    expect(reply.headers.allow).toBe('GET, HEAD, OPTIONS');
  });
});

describe.skipIf(missing !== undefined)('the console in Chromium: signing in and out, who is signed in', () => {
  beforeAll(async () => {
    rig = await startConsoleRig();
  });
  afterAll(() => rig?.close());

  it('when a wrong key is given, then the console says it is not accepted and stays on the sign-in form', async () => {
    const tab = await openConsole(rig!);
    await expectAccessible(tab, 'the sign-in form');
    await signInExpectingRefusal(tab, 'rowi_not-a-key');
    await expect.poll(() => tab.page.getByRole('alert').textContent()).toContain('Not signed in');
    expect(await tab.page.getByRole('heading', { name: 'Sign in' }).isVisible()).toBe(true);
    expect(tab.errors.filter((error) => !/401/.test(error))).toEqual([]);
    await tab.page.context().close();
  });

  it('when the admin signs in, then the console says who is signed in (caller, role, scopes, record access); signing out forgets the key, which was never stored', async () => {
    const tab = await signedIn(rig!);
    const page = tab.page;
    await page.getByRole('button', { name: /admin/ }).first().click();
    const details = page.getByRole('region', { name: 'Signed in as' });
    await expect.poll(() => details.textContent()).toContain('API key');
    const text = (await details.textContent())!;
    expect(text).toContain('admin');
    expect(text).toContain('callers:create');
    expect(text).toContain('users: all records');
    await expectAccessible(tab, 'the health view with who is signed in');

    // Nothing of the key outlives the tab: no cookie, no storage.
    expect(await page.evaluate(() => [document.cookie, localStorage.length, sessionStorage.length])).toEqual([
      '',
      0,
      0,
    ]);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.getByRole('status').textContent()).toContain('forgot the key');
    // A reload starts signed out.
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expectClean(tab);
    await page.context().close();
  });

  it('when a reader signs in, then the menu shows only what its key may read, and the health view says it may not read metrics', async () => {
    const reader = await createCallerThroughApi(rig!.test, 'console-reader', { role: 'reader' });
    const tab = await signedIn(rig!, reader.key);
    const menu = tab.page.getByRole('navigation', { name: 'Sections' });
    const labels = await menu.getByRole('link').allTextContents();
    expect(labels).toContain('Users');
    expect(labels).toContain('Health');
    expect(labels).not.toContain('Callers and keys');
    expect(labels).not.toContain('Audit trail');
    expect(await tab.page.getByText('may not read the metrics').isVisible()).toBe(true);
    // A section the key may not read is not there even by its address.
    await tab.page.evaluate(() => (location.hash = '#/callers'));
    await tab.page.getByRole('heading', { name: 'Not here' }).waitFor();
    expectClean(tab);
    await tab.page.context().close();
  });

  it('when a client id and secret are given, then the console signs in with the token they are exchanged for', async () => {
    const channel = await createCallerThroughApi(rig!.test, 'console-channel', { role: 'channel' });
    const tab = await openConsole(rig!);
    await tab.page.getByLabel('A client id and secret').check();
    await tab.page.getByLabel('Client id', { exact: true }).fill(channel.name);
    await tab.page.getByLabel('Client secret', { exact: true }).fill(channel.key);
    await tab.page.getByRole('button', { name: 'Sign in' }).click();
    await tab.page.getByRole('button', { name: /console-channel/ }).click();
    const details = tab.page.getByRole('region', { name: 'Signed in as' });
    await expect.poll(() => details.textContent()).toContain('token');
    expect(await details.textContent()).toContain('orders: its own only');
    expectClean(tab);
    await tab.page.context().close();
  });

  it('when the key is revoked while the console is open, then the next call signs the console out and says why', async () => {
    const editor = await createCallerThroughApi(rig!.test, 'console-editor', { role: 'editor' });
    const tab = await signedIn(rig!, editor.key);
    const keys = await rig!.test.call({ url: `/v1/callers/${editor.id}/keys` });
    await rig!.test.call({ method: 'DELETE', url: `/v1/callers/${editor.id}/keys/${keys.json.data[0].id}` });
    await goTo(tab, 'Users');
    await tab.page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await tab.page.getByRole('status').textContent()).toContain('no longer accepts');
    await tab.page.context().close();
  });

  it('with the keyboard alone: sign in, skip to the content, move through the menu; the new view’s heading takes the focus', async () => {
    const tab = await openConsole(rig!);
    const page = tab.page;
    // The key field has the focus when the form opens.
    await page.keyboard.type(rig!.test.adminKey);
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    // The first view's heading has the focus.
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.tagName + ':' + document.activeElement?.textContent))
      .toBe('H1:Health');
    // Back up through the menu and the top bar: the first stop of the page is the skip link.
    const focused = () => page.evaluate(() => document.activeElement?.textContent);
    for (let presses = 0; presses < 40 && (await focused()) !== 'Skip to the content'; presses++)
      await page.keyboard.press('Shift+Tab');
    expect(await focused()).toBe('Skip to the content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('content');
    // Tab forward to the menu's Users link and follow it.
    await page.getByRole('link', { name: 'Users', exact: true }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/users');
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.tagName + ':' + document.activeElement?.textContent))
      .toBe('H1:Users');
    expectClean(tab);
    await page.context().close();
  });

  it('at 390 px wide: the menu folds behind its button, the page does not scroll sideways, and axe finds nothing serious', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, NARROW);
    const page = tab.page;
    const menu = page.getByRole('navigation', { name: 'Sections' });
    expect(await menu.isVisible()).toBe(false);
    expect(await scrollsSideways(tab)).toBe(false);
    await expectAccessible(tab, 'the health view at 390 px');
    await page.getByRole('button', { name: 'Menu' }).click();
    expect(await menu.isVisible()).toBe(true);
    await screenshot(tab, 'narrow-menu');
    await menu.getByRole('link', { name: 'Users', exact: true }).click();
    await expect.poll(() => menu.isVisible()).toBe(false);
    expect(await scrollsSideways(tab)).toBe(false);
    expectClean(tab);
    await page.context().close();
  });

  it('the health view: readiness and its checks, traffic from /metrics (requests a second from the second reading)', async () => {
    const tab = await signedIn(rig!, rig!.test.adminKey, WIDE);
    const page = tab.page;
    await page.getByText('Ready', { exact: true }).waitFor();
    expect(await page.getByRole('region', { name: 'Readiness checks' }).textContent()).toContain('database');
    await page.getByText('p99 response time').waitFor();
    await expect.poll(() => page.getByText(/over the last \d+ s/).count(), { timeout: 15_000 }).toBeGreaterThan(0);
    await screenshot(tab, 'health');
    expectClean(tab);
    await page.context().close();
  });
});

async function signInExpectingRefusal(tab: Awaited<ReturnType<typeof openConsole>>, key: string): Promise<void> {
  await tab.page.getByLabel('API key', { exact: true }).fill(key);
  await tab.page.getByRole('button', { name: 'Sign in' }).click();
  await tab.page.getByRole('alert').waitFor();
}
