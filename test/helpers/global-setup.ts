import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

/** One temporary folder for every file a test run writes; removed when the run ends. */
export default function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), 'rowi-tests-'));
  project.provide('tmpRoot', root);
  return () => rmSync(root, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    tmpRoot: string;
  }
}
