import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.js';
import { BACKEND } from '../helpers/database.js';
import { keptLog } from '../helpers/log.js';
import { expectProblem } from '../helpers/problems.js';
import { tempFolder } from '../helpers/temp.js';

/**
 * A backup whose manifest (`FILE.json` beside it) cannot be read, because it is not JSON, holds
 * null or lacks what a manifest records: GET /v1/backups/{name} answers 404 naming the manifest and
 * what is wrong with it, never 500; the list leaves it out, logging it, and lists the others.
 */
describe.skipIf(BACKEND !== 'sqlite')('backups with an unreadable manifest', () => {
  let test: TestApp;
  let folder: string;
  let good: string;
  const log = keptLog();
  beforeAll(async () => {
    folder = join(tempFolder('manifests'), 'kept');
    test = await startApp({ ROWI_BACKUP_DIR: folder, ROWI_MAX_EVENT_LOOP_DELAY: '0' }, log.logger);
    const started = await test.call({ method: 'POST', url: '/v1/backups' });
    expect(started.status).toBe(202);
    for (let attempt = 0; attempt < 200; attempt++) {
      const operation = await test.call({ url: started.headers.location as string });
      if (operation.json.status === 'succeeded') {
        good = operation.json.summary.backup.file;
        break;
      }
      expect(['queued', 'running']).toContain(operation.json.status);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(good).toBeDefined();
  });
  afterAll(() => test.close());

  /** A copy of the good backup under `name`, with `manifest` as its manifest's text. */
  function damaged(name: string, manifest: string): string {
    writeFileSync(join(folder, name), readFileSync(join(folder, good)));
    writeFileSync(join(folder, `${name}.json`), manifest);
    return name;
  }

  it.each([
    ['holds null', 'null', 'holds null, not an object'],
    ['is not JSON', '{"file": "rowi-x.sqlite", ', 'is not JSON'],
    ['holds an array', '[]', 'holds an array, not an object'],
    ['lacks fields', '{"file": "rowi-lacks.sqlite"}', 'lacks bytes, sha256, taken_at, ms, schema, rows, rowi'],
    ['has a field of the wrong type', null, 'has a wrong bytes'],
  ])(
    'GET /v1/backups/{name}: 404 not-found naming the manifest and what is wrong when it %s',
    async (wrong, text, reason) => {
      const name = `rowi-${wrong.replaceAll(' ', '-')}.sqlite`;
      const manifest =
        text ??
        JSON.stringify({ ...JSON.parse(readFileSync(join(folder, `${good}.json`), 'utf8')), file: name, bytes: '12' });
      damaged(name, manifest);
      const problem = expectProblem(await test.call({ url: `/v1/backups/${name}` }), 404, 'not-found');
      expect(problem.detail).toContain(`${name}.json`);
      expect(problem.detail).toContain(reason);
      expect(problem.detail).not.toContain(folder);
    },
  );

  it('GET /v1/backups: 200 listing the readable backups, leaving out those whose manifest is unreadable, and logging each by name', async () => {
    damaged('rowi-listed-null.sqlite', 'null');
    const reply = await test.call({ url: '/v1/backups?limit=500' });
    expect(reply.status).toBe(200);
    expect(reply.json.data.map((backup: { file: string }) => backup.file)).toEqual([good]);
    expect(readdirSync(folder)).toContain('rowi-listed-null.sqlite.json');
    expect(log.log.some((line) => line.level === 40 && String(line.msg).includes('rowi-listed-null.sqlite.json'))).toBe(
      true,
    );
  });

  it('POST /v1/backups: the next backup succeeds, and keeps the backups whose manifest is unreadable, when some are', async () => {
    damaged('rowi-kept.sqlite', 'null');
    const started = await test.call({ method: 'POST', url: '/v1/backups' });
    expect(started.status).toBe(202);
    let status = 'queued';
    for (let attempt = 0; attempt < 200 && ['queued', 'running'].includes(status); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      status = (await test.call({ url: started.headers.location as string })).json.status;
    }
    expect(status).toBe('succeeded');
    expect(readdirSync(folder)).toEqual(expect.arrayContaining(['rowi-kept.sqlite', 'rowi-kept.sqlite.json']));
  });
});
