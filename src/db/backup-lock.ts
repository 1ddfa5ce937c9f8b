import { hostname } from 'node:os';
import { join } from 'node:path';
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * One backup at a time into a backup folder, whatever process takes it: the schedule (in the one
 * process, or the primary of --workers) and a backup started over HTTP (in whichever worker got
 * the request) both hold `backup.lock` in the folder while they copy. The file is created
 * exclusively (O_EXCL, atomic on a local file system) and names its holder (host and pid); one
 * left by a process that was killed is taken over once that process is gone. It holds across the
 * processes of one machine; instances on other machines share no SQLite file with this one.
 */
export const LOCK_FILE = 'backup.lock';
const RETRY_MS = 200;

export interface BackupLock {
  release(): Promise<void>;
}

/**
 * Takes the folder's lock, waiting while another process holds it; `waiting` is called once if it
 * must wait, and `signal` ends the wait (it throws the signal's reason).
 */
export async function lockBackupFolder(
  folder: string,
  waiting?: () => void,
  signal?: AbortSignal,
): Promise<BackupLock> {
  const file = join(folder, LOCK_FILE);
  const holder = `${hostname()} ${process.pid}`;
  let told = false;
  for (;;) {
    signal?.throwIfAborted();
    await mkdir(folder, { recursive: true });
    try {
      const handle = await open(file, 'wx');
      try {
        await handle.writeFile(`${holder}\n`);
      } finally {
        await handle.close();
      }
      return { release: () => rm(file, { force: true }) };
    } catch (error) {
      if ((error as { code?: string }).code !== 'EEXIST') throw error;
    }
    if (await abandoned(file)) {
      await rm(file, { force: true });
      continue;
    }
    if (!told) {
      told = true;
      waiting?.();
    }
    await sleep(RETRY_MS, undefined, { signal }).catch(() => {});
  }
}

/** Whether the lock's holder, a process of this machine, is gone (a holder on another host is never judged). */
async function abandoned(file: string): Promise<boolean> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return false;
  }
  const [host, pidText] = text.trim().split(' ');
  const pid = Number(pidText);
  // Being written this instant: not judged until it names its holder.
  if (host !== hostname() || !Number.isSafeInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as { code?: string }).code !== 'EPERM';
  }
}
