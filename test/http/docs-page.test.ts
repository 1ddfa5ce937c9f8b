import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { listenOnLoopback, startApp, type TestApp } from '../helpers/app.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { expectProblem } from '../helpers/problems.js';
import { createUser } from '../helpers/records.js';

interface Document {
  tags: { name: string }[];
  paths: Record<string, Record<string, { operationId: string; tags?: string[] }>>;
}

let test: TestApp;
let origin: string;
beforeAll(async () => {
  test = await startApp();
  origin = await listenOnLoopback(test);
});
afterAll(() => test.close());

describe('GET /docs: what the page is made of', () => {
  it("GET /docs: 200 HTML that loads only rowi's own files, under a CSP that allows nothing else, whatever Accept says", async () => {
    const reply = await test.call({ url: '/docs', key: null, headers: { accept: 'text/html' } });
    expect(reply.status).toBe(200);
    expect(reply.mediaType).toBe('text/html');
    expect(reply.headers['content-security-policy']).toMatch(/default-src 'self'; script-src 'self'/);
    const sources = [...reply.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(sources.length).toBeGreaterThanOrEqual(3);
    for (const source of sources) expect(source).toMatch(/^\/docs\//);
    for (const source of sources) expect((await test.call({ url: source, key: null })).status).toBe(200);
  });

  it('GET /docs/{asset}: 404 problem for a file the page does not use (no path into the package or the disk)', async () => {
    for (const url of [
      '/docs/package.json',
      '/docs/..%2F..%2Fpackage.json',
      '/docs/index.html',
      '/docs/swagger-ui-bundle.js.map',
    ]) {
      expectProblem(await test.call({ url, key: null }), 404, 'not-found');
    }
  });

  it('POST /docs: 405 with Allow', async () => {
    const reply = await test.call({ method: 'POST', url: '/docs', body: {} });
    expectProblem(reply, 405, 'method-not-allowed');
    expect(reply.headers.allow).toBe('GET, HEAD, OPTIONS');
  });
});

const missing = browserMissing();

describe.skipIf(missing !== undefined)('GET /docs in headless Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(() => browser?.close());

  it('lists every operation of the document, the resources first and HEAD once (on its GET), and its console makes an authenticated call that answers 200 with the stored user', async () => {
    await createUser(test, { name: 'Shown In Docs', email: 'docs@example.com' });
    const document = (await test.call({ url: '/v1/openapi.json' })).json as Document;
    // HEAD is shown once, as a line of its GET's description, not as an operation of its own.
    const operations = Object.values(document.paths)
      .flatMap((methods) => Object.entries(methods))
      .filter(([method]) => method !== 'head')
      .map(([, operation]) => operation.operationId);
    expect(Object.values(document.paths).filter((methods) => 'head' in methods).length).toBeGreaterThan(10);

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${origin}/docs`);
    await page.locator('.opblock').first().waitFor({ timeout: 20_000 });

    // Every operation is on the page (Swagger UI's block ids end with the operation id).
    const shown = await page.locator('.opblock').evaluateAll((blocks) => blocks.map((block) => block.id));
    const missingOperations = operations.filter((id) => !shown.some((shownId) => shownId.endsWith(`-${id}`)));
    expect(missingOperations).toEqual([]);
    expect(await page.locator('.opblock-head').count()).toBe(0);
    // The groups in the document's order: the resources first, the service's plumbing last.
    const groups = await page.locator('h3.opblock-tag').evaluateAll((tags) => tags.map((tag) => tag.dataset.tag));
    expect(groups).toEqual(document.tags.map((tag) => tag.name));
    expect(groups[0]).toBe('users');
    expect(groups.at(-1)).toBe('service');
    // The picture in the documentation (docs/images/docs-page.png) is taken here.
    if (process.env.ROWI_TEST_DOCS_SCREENSHOT) await page.screenshot({ path: process.env.ROWI_TEST_DOCS_SCREENSHOT });

    // Authorize with the API key, then try GET /v1/users from the console.
    await page.locator('button.authorize').first().click();
    const keyForm = page.locator('.auth-container').filter({ hasText: 'X-API-Key' });
    await keyForm.locator('input').fill(test.adminKey);
    await keyForm.locator('button.authorize').click();
    await page.locator('.auth-btn-wrapper button.btn-done').first().click();

    const listUsers = page.locator('.opblock[id$="-listUsers"]');
    await listUsers.locator('.opblock-summary').click();
    await expect
      .poll(() => listUsers.locator('.opblock-description-wrapper').textContent())
      .toContain('HEAD on this path');
    await listUsers.locator('button.execute').click();
    const status = listUsers.locator('.live-responses-table .response .response-col_status').first();
    await status.waitFor({ timeout: 20_000 });
    expect((await status.textContent())?.trim()).toBe('200');
    expect(
      await listUsers.locator('.live-responses-table .response .response-col_description').first().textContent(),
    ).toContain('docs@example.com');

    expect(errors).toEqual([]);
    // Nothing came from anywhere but rowi: the page works without internet.
    expect(requested.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:'))).toEqual([]);
    await page.close();
    // A browser rendering a 2.5 MB document takes its time on a loaded 2-core machine.
  }, 90_000);
});
