import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { runCli, runSvc, spawnService } from '../support/service-process';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';
import { MIGRATIONS } from '../../migrations';

/** The newest migration's class name without its timestamp (revert undoes it). */
const NEWEST = MIGRATIONS[MIGRATIONS.length - 1].name.replace(/\d+$/, '');

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
    const before = await runSvc(['migrate', 'show'], env);
    if (database.url) {
      expect(before.code).toBe(1);
      expect(before.output).toMatch(/\[ \] CreateCoreTables\d+/);
    }
    const run = await runSvc(['migrate', 'run'], env);
    expect(run.code).toBe(0);
    expect(run.output).toMatch(
      new RegExp(`Ran ${MIGRATIONS.length} migration\\(s\\)|No pending migrations`),
    );
    const after = await runSvc(['migrate', 'show'], env);
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
    const first = await runSvc(['catalog', 'load', folder], env);
    expect(first.output).not.toMatch(/error/i);
    expect(first.code).toBe(0);
    expect(first.output).toContain('created tools/R_SCRIPTS/answer.R');
    expect(first.output).toContain('skipped tools/NOT_A_SECTION');

    writeFileSync(
      join(folder, 'tools', 'R_SCRIPTS', 'answer.R'),
      'writeLines("second", "answer.txt")\n',
    );
    const second = await runSvc(['catalog', 'load', folder], env);
    expect(second.output).toContain('updated tools/R_SCRIPTS/answer.R');

    const missing = await runSvc(['catalog', 'load', join(folder, 'nope')], env);
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
    const dump = await runSvc(['catalog', 'dump', backup], env);
    expect(dump.code).toBe(0);
    expect(dump.output).toMatch(/^wrote tools\/R_SCRIPTS\/answer\.R \(\d+ bytes\)$/m);
    expect(dump.output).toMatch(
      /^1 file\(s\) from the (database|embedded database) .* written to /m,
    );
    expect(readFileSync(join(backup, 'tools', 'R_SCRIPTS', 'answer.R'), 'utf8')).toBe(
      'writeLines("second", "answer.txt")\n',
    );
    const again = await runSvc(['catalog', 'dump', backup], env);
    expect(again.code).toBe(2);
    expect(again.output).toContain('is not an empty directory');
    const restored = await runSvc(['catalog', 'load', backup], env);
    expect(restored.output).toContain('0 created, 1 updated, 0 kept, 0 skipped');
    // --keep-existing leaves a file an admin changed as it is, and adds only new ones.
    writeFileSync(join(backup, 'tools', 'R_SCRIPTS', 'answer.R'), 'stop("old version")\n');
    mkdirSync(join(backup, 'more', 'R_SCRIPTS'), { recursive: true });
    writeFileSync(join(backup, 'more', 'R_SCRIPTS', 'new.R'), '1\n');
    const kept = await runSvc(['catalog', 'load', backup, '--keep-existing'], env);
    expect(kept.code).toBe(0);
    expect(kept.output).toContain('kept tools/R_SCRIPTS/answer.R');
    expect(kept.output).toContain('created more/R_SCRIPTS/new.R');
    const check = join(folder, 'check');
    expect((await runSvc(['catalog', 'dump', check], env)).code).toBe(0);
    expect(readFileSync(join(check, 'tools', 'R_SCRIPTS', 'answer.R'), 'utf8')).toBe(
      'writeLines("second", "answer.txt")\n',
    );
    expect((await runSvc(['catalog', 'dump'], env)).code).toBe(2);
  });

  it('migration commands say what they did on which database, and check the command first', async () => {
    const where = database.url ? /the database postgres:\/\/\S+/ : /the embedded database in \S+/;
    const revert = await runSvc(['migrate', 'revert'], env);
    expect(revert.code).toBe(0);
    // revert undoes the newest migration only.
    expect(revert.output).toMatch(new RegExp(`^Reverted ${NEWEST}\\d+ on `, 'm'));
    expect(revert.output).toMatch(where);
    const show = await runSvc(['migrate', 'show'], env);
    expect(show.code).toBe(1);
    expect(show.output).toContain('apply with `svc migrate run`');
    const run = await runSvc(['migrate', 'run'], env);
    expect(run.code).toBe(0);
    expect(run.output).toMatch(new RegExp(`^applied ${NEWEST}\\d+$`, 'm'));
    expect(run.output).toMatch(/^Ran 1 migration\(s\) on /m);
    expect((await runSvc(['migrate', 'run'], env)).output).toMatch(/^No pending migrations/m);

    // A wrong command is reported before any connection; an unreachable server is named, masked.
    const unreachable = { ...env, DATABASE_URL: 'postgres://svc:hidden-pw@127.0.0.1:9/nowhere' };
    const usage = await runSvc(['migrate', 'frobnicate'], unreachable);
    expect(usage.code).toBe(2);
    expect(usage.output).toMatch(
      /^svc migrate: unknown migrate command "frobnicate"\nusage: svc migrate /,
    );
    const down = await runSvc(['migrate', 'show'], unreachable);
    expect(down.code).toBe(1);
    expect(down.output).toContain(
      'cannot open the database postgres://svc:********@127.0.0.1:9/nowhere',
    );
    expect(down.output).not.toContain('hidden-pw');
  });
});

/** The `svc` executable itself: help, argument checks and exit statuses, before any database. */
describe('the svc command line', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(() => {
    // An embedded database would be created in DATA_DIR: it must not appear.
    dataDir = join(mkdtempSync(join(tmpdir(), 'svc-cli-')), 'data');
    env = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
    delete env.DATABASE_URL;
  });
  afterEach(() => {
    rmSync(join(dataDir, '..'), { recursive: true, force: true });
  });

  it.each([
    [[], 2],
    [['--help'], 0],
    [['migrate', '--help'], 0],
    [['catalog', '--help'], 0],
    [['catalog', 'load', '--help'], 0],
    [['catalog', 'dump', '-h'], 0],
    [['hash-secret', '--help'], 0],
    [['frobnicate'], 2],
    [['migrate'], 2],
    [['migrate', 'sideways'], 2],
    [['migrate', 'run', 'extra'], 2],
    [['migrate', 'generate', 'lowercase'], 2],
    [['catalog', 'load'], 2],
    [['catalog', 'load', '/nonexistent-svc-dir'], 2],
    [['catalog', 'dump', '.', '--keep-existing'], 2],
    [['catalog', 'load', '.', '--colour'], 2],
    [['hash-secret', 'extra'], 2],
    [['hash-secret', '--api-key'], 2],
    [['hash-secret', '--roles', 'admin'], 2],
    [['keys', '--help'], 0],
    [['keys'], 2],
    [['keys', 'rotate'], 2],
    [['keys', 'create'], 2],
    [['keys', 'create', 'a b'], 2],
    [['keys', 'create', 'p', '--expires', 'tomorrow'], 2],
    [['keys', 'list', '--roles', 'a'], 2],
    [['keys', 'revoke'], 2],
  ])('svc %j exits with %i and touches no database', async (args, status) => {
    const answer = await runSvc(args, env);
    expect({ args, code: answer.code }).toEqual({ args, code: status });
    if (status === 0) {
      expect(answer.stdout).toMatch(/^usage:\s+svc /);
    } else {
      expect(answer.stdout).toBe('');
      expect(answer.output).toMatch(/usage:\s+svc /);
    }
    expect(existsSync(dataDir)).toBe(false);
  });

  it('exits with 78 and one line per problem on a bad configuration', async () => {
    const bad = await runSvc(['migrate', 'show'], { ...env, PORT: 'eighty', R_ENGINE: 'python' });
    expect(bad.code).toBe(78);
    expect(bad.output).toMatch(/^svc: configuration: PORT=eighty: must be a whole number$/m);
    expect(bad.output).toMatch(/^svc: configuration: R_ENGINE="python": .*$/m);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('makes an API key and its entry', async () => {
    const made = await runSvc(['hash-secret', '--api-key', 'reporter', '--roles', 'a,b'], env);
    expect(made.code).toBe(0);
    const [key, entry] = made.stdout.trim().split('\n');
    expect(key).toMatch(/^k[0-9a-f]{12}\.\S+$/);
    const id = key.split('.')[0];
    expect(JSON.parse(entry)).toEqual({
      [id]: { principal: 'reporter', roles: ['a', 'b'], keyHash: expect.any(String) },
    });
  });
});
