import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing } from '../helpers/browser.js';
import {
  expectAccessible,
  expectClean,
  goTo,
  NARROW,
  scrollsSideways,
  signedIn,
  startConsoleRig,
  type ConsoleRig,
} from '../helpers/console.js';
import { BACKEND } from '../helpers/database.js';
import { createUser } from '../helpers/records.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * The console's backups (console/src/sections/files/, BackupsView): one small backup taken from
 * the page, followed to its end and listed. A backup copies at the lowest CPU priority, so this file
 * runs alone (vitest.config.ts), with a generous patience. The page without a backup folder:
 * files.test.ts.
 */
let rig: ConsoleRig | undefined;
let folder: string;
const missing = browserMissing();

describe.skipIf(missing !== undefined || BACKEND !== 'sqlite')(
  'the console in Chromium: backups',
  { timeout: 120_000 },
  () => {
    beforeAll(async () => {
      folder = join(tempFolder('console-backups'), 'kept');
      rig = await startConsoleRig({ ROWI_BACKUP_DIR: folder });
    });
    afterAll(() => rig?.close());

    it('when the operator takes a backup, then the page follows it to its end, says which file it wrote, and lists it with its size and SHA-256, as rowi does', async () => {
      await createUser(rig!.test, { name: 'Kept safe' });
      const tab = await signedIn(rig!);
      const page = tab.page;
      await goTo(tab, 'Backups');
      const list = page.getByRole('region', { name: 'Backups in the folder' });
      await list.getByText('The folder holds no backup yet.').waitFor();

      await page.getByRole('button', { name: 'Take a backup' }).click();
      const taken = page.getByRole('status').filter({ hasText: 'Backup taken:' });
      await taken.waitFor({ timeout: 90_000 });

      const backups = (await rig!.test.call({ url: '/v1/backups' })).json.data as {
        file: string;
        bytes: number;
        sha256: string;
      }[];
      expect(backups).toHaveLength(1);
      const [backup] = backups;
      expect(await taken.textContent()).toContain(backup!.file);
      const bytes = readFileSync(join(folder, backup!.file));
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(backup!.sha256);

      const row = list.getByRole('row').filter({ hasText: backup!.file });
      await row.waitFor();
      expect(await row.textContent()).toContain(backup!.sha256);
      expect(await row.textContent()).toContain('users 1');

      // The operation, listed and linked.
      const operations = page.getByRole('region', { name: 'Backups taken over HTTP' });
      await operations.getByRole('link', { name: /^Backup \d+$/ }).waitFor();
      expect(await operations.textContent()).toContain('succeeded');
      await expectAccessible(tab, 'the backups page with a backup');

      // Its operation's page says what it wrote.
      await operations.getByRole('link', { name: /^Backup \d+$/ }).click();
      const summary = page.getByRole('region', { name: 'Summary' });
      await expect.poll(() => summary.textContent()).toContain(backup!.sha256);
      expectClean(tab);
      await page.context().close();
    });

    it('at 390 px: the backups page does not scroll sideways and axe finds nothing serious', async () => {
      const tab = await signedIn(rig!, rig!.test.adminKey, NARROW);
      await goTo(tab, 'Backups');
      await tab.page.getByRole('region', { name: 'Backups in the folder' }).getByRole('row').nth(1).waitFor();
      expect(await scrollsSideways(tab)).toBe(false);
      await expectAccessible(tab, 'the backups page at 390 px');
      expectClean(tab);
      await tab.page.context().close();
    });
  },
);
