import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { runCli, spawnService } from '../support/service-process';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';

/** The admin command lines (SPEC §8): migrations and catalog loading, run as an operator would. */
describe('command-line operations', () => {
  let database: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let folder: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    env = testEnvironment(database, { MIGRATIONS_RUN: 'false', LOG_LEVEL: 'warn' });
    folder = mkdtempSync(join(tmpdir(), 'svc-catalog-'));
  });
  afterAll(async () => {
    rmSync(folder, { recursive: true, force: true });
    await database.drop();
  });

  it('migration:show lists pending migrations, migration:run applies them, then nothing is pending', async () => {
    const before = await runCli('cli/migrate.js', ['show'], env);
    if (database.url) {
      expect(before.code).toBe(1);
      expect(before.output).toMatch(/\[ \] CreateCoreTables\d+/);
    }
    const run = await runCli('cli/migrate.js', ['run'], env);
    expect(run.code).toBe(0);
    expect(run.output).toMatch(/Ran 2 migration\(s\)|No pending migrations/);
    const after = await runCli('cli/migrate.js', ['show'], env);
    expect(after.code).toBe(0);
    expect(after.output).toMatch(/\[X\] CreateCoreTables\d+/);
    expect(after.output).toMatch(/\[X\] BlobChunks\d+/);
    expect(after.output).toContain('Up to date');
  });

  it('catalog:load upserts <dir>/<application>/<SECTION>/<file> and the scripts run as rScript', async () => {
    mkdirSync(join(folder, 'tools', 'R_SCRIPTS'), { recursive: true });
    mkdirSync(join(folder, 'tools', 'NOT_A_SECTION'), { recursive: true });
    writeFileSync(
      join(folder, 'tools', 'R_SCRIPTS', 'answer.R'),
      'writeLines("first", "answer.txt")\n',
    );
    writeFileSync(join(folder, 'tools', 'NOT_A_SECTION', 'x.R'), '1\n');
    const first = await runCli('cli/catalog-load.js', [folder], env);
    expect(first.output).not.toMatch(/error/i);
    expect(first.code).toBe(0);
    expect(first.output).toContain('created tools/R_SCRIPTS/answer.R');
    expect(first.output).toContain('skipped tools/NOT_A_SECTION');

    writeFileSync(
      join(folder, 'tools', 'R_SCRIPTS', 'answer.R'),
      'writeLines("second", "answer.txt")\n',
    );
    const second = await runCli('cli/catalog-load.js', [folder], env);
    expect(second.output).toContain('updated tools/R_SCRIPTS/answer.R');

    const missing = await runCli('cli/catalog-load.js', [join(folder, 'nope')], env);
    expect(missing.code).toBe(2);
    expect(missing.output).toContain('is not a directory');

    const service = await spawnService(env);
    try {
      const zip = await makeZip([{ name: 'input.csv', content: 'x\n1\n' }]);
      const submitted = await postZip(service.url, zip, {
        'X-SVC-Application-Name': 'tools',
        'X-SVC-Meta-rScript': 'answer.R',
      });
      const token = parseXml(submitted.text).jobToken;
      const result = parseXml((await waitForResult(token.resultUri)).text).result;
      expect(result.success).toBe('true');
      const files = await explodeZip((await request(result.dataUri)).body, {
        maxEntries: 10,
        maxUncompressedBytes: 1e6,
        maxCompressionRatio: 1e6,
      });
      expect(files.map((f) => [f.name, f.content.toString()])).toEqual([
        ['answer.txt', 'second\n'],
      ]);
    } finally {
      service.child.kill('SIGTERM');
      expect(await service.exited()).toBe(0);
    }
  });

  it('the server reports bad settings one per line and exits', async () => {
    const bad = await runCli('main.js', [], { ...env, PORT: 'eighty', R_ENGINE: 'python' });
    expect(bad.code).toBe(78);
    expect(bad.output).toMatch(/^svc: configuration: PORT=eighty: must be a whole number$/m);
    expect(bad.output).toMatch(/^svc: configuration: R_ENGINE="python": .*$/m);
  });
  it('catalog:dump writes the catalog in the layout catalog:load reads, into a new directory only', async () => {
    const backup = join(folder, 'backup');
    const dump = await runCli('cli/catalog-dump.js', [backup], env);
    expect(dump.code).toBe(0);
    expect(dump.output).toMatch(/^wrote tools\/R_SCRIPTS\/answer\.R \(\d+ bytes\)$/m);
    expect(dump.output).toMatch(
      /^1 file\(s\) from the (database|embedded database) .* written to /m,
    );
    expect(readFileSync(join(backup, 'tools', 'R_SCRIPTS', 'answer.R'), 'utf8')).toBe(
      'writeLines("second", "answer.txt")\n',
    );
    const again = await runCli('cli/catalog-dump.js', [backup], env);
    expect(again.code).toBe(2);
    expect(again.output).toContain('is not an empty directory');
    const restored = await runCli('cli/catalog-load.js', [backup], env);
    expect(restored.output).toContain('0 created, 1 updated, 0 skipped');
    expect((await runCli('cli/catalog-dump.js', [], env)).code).toBe(2);
  });

  it('migration commands say what they did on which database, and check the command first', async () => {
    const where = database.url ? /the database postgres:\/\/\S+/ : /the embedded database in \S+/;
    const revert = await runCli('cli/migrate.js', ['revert'], env);
    expect(revert.code).toBe(0);
    // revert undoes the newest migration only.
    expect(revert.output).toMatch(/^Reverted BlobChunks\d+ on /m);
    expect(revert.output).toMatch(where);
    const show = await runCli('cli/migrate.js', ['show'], env);
    expect(show.code).toBe(1);
    expect(show.output).toContain('apply with `npm run migration:run`');
    const run = await runCli('cli/migrate.js', ['run'], env);
    expect(run.code).toBe(0);
    expect(run.output).toMatch(/^applied BlobChunks\d+$/m);
    expect(run.output).toMatch(/^Ran 1 migration\(s\) on /m);
    expect((await runCli('cli/migrate.js', ['run'], env)).output).toMatch(
      /^No pending migrations/m,
    );

    // A wrong command is reported before any connection; an unreachable server is named, masked.
    const unreachable = { ...env, DATABASE_URL: 'postgres://svc:hidden-pw@127.0.0.1:9/nowhere' };
    const usage = await runCli('cli/migrate.js', ['frobnicate'], unreachable);
    expect([usage.code, usage.output.trim()]).toEqual([
      2,
      'usage: migrate run | revert | show | generate <Name>',
    ]);
    const down = await runCli('cli/migrate.js', ['show'], unreachable);
    expect(down.code).toBe(1);
    expect(down.output).toContain(
      'cannot open the database postgres://svc:********@127.0.0.1:9/nowhere',
    );
    expect(down.output).not.toContain('hidden-pw');
  });
});
