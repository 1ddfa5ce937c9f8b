import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config-error.js';
import { importDirectoryOf } from '../config/limits.settings.js';

/**
 * The folders `rowi serve` writes files into, checked before it listens, as a bad setting is
 * (exit code 2, one line naming the setting and the folder): the import folder (every upload waits
 * there) and the backup folder. A folder that does not exist yet is created; then a file is
 * written into it and removed, which is what rowi will do there (a permission check would not see
 * a read-only file system, and root passes every permission check).
 */
export async function checkWritableFolders(
  config: Pick<Config, 'importDirectory' | 'backupDir' | 'data' | 'databaseUrl'>,
): Promise<void> {
  await checkWritableFolder(importDirectoryOf(config), 'ROWI_IMPORT_DIRECTORY');
  if (config.backupDir !== '') await checkWritableFolder(config.backupDir, 'ROWI_BACKUP_DIR');
}

async function checkWritableFolder(folder: string, setting: string): Promise<void> {
  try {
    await mkdir(folder, { recursive: true });
    const probe = join(folder, `.rowi-check-${randomUUID()}`);
    await writeFile(probe, '');
    await rm(probe);
  } catch (error) {
    throw new ConfigError(
      `${setting}: rowi cannot write files into the folder ${folder} (${reasonOf(error)}); give it a folder rowi may create and write`,
    );
  }
}

const REASONS: Record<string, string> = {
  ENOTDIR: 'a part of its path is a file, not a folder',
  ENOENT: 'a folder of its path cannot be made',
  EEXIST: 'it is a file, not a folder',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'it is on a read-only file system',
  ENOSPC: 'no space left on its disk',
  EDQUOT: 'the disk quota is used up',
};

function reasonOf(error: unknown): string {
  const { code, message } = error as NodeJS.ErrnoException;
  return (code !== undefined && REASONS[code] !== undefined ? `${REASONS[code]}, ${code}` : undefined) ?? message;
}
