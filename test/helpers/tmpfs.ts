import { execFileSync } from 'node:child_process';

/**
 * Mounts a tmpfs of `size` (such as '16m') on `folder` (read-only when asked), for a full disk or
 * a read-only file system that is real: true when
 * mounted. Mounting needs root: where it is not allowed it warns that `what` is skipped and returns
 * false, except under ROWI_TEST_TMPFS=required (.ci/run sets it), where it throws.
 */
export function mountTmpfs(folder: string, size: string, what: string, { readOnly = false } = {}): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}${readOnly ? ',ro' : ''}`, 'tmpfs', folder], {
      stdio: 'pipe',
    });
    return true;
  } catch (error) {
    const why = `cannot mount a tmpfs here (${String((error as { stderr?: Buffer }).stderr ?? error).trim()})`;
    if (process.env.ROWI_TEST_TMPFS === 'required') throw new Error(`${what}: ${why}, and ROWI_TEST_TMPFS=required`);
    console.warn(`\n[rowi tests] ${what} SKIPPED: ${why}. Run as root (CI does) to test a full disk for real.\n`);
    return false;
  }
}

export function unmountTmpfs(folder: string): void {
  execFileSync('umount', [folder]);
}
