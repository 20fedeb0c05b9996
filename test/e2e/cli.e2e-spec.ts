/**
 * The command line, on the embedded database's data directory and against a running service.
 *
 * @ci-pass embedded
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { runCli, runSvc, ServiceProcess, spawnService } from '../support/service-process';
import {
  exitStatusesOf,
  HTTP_WORDS,
  listedStatus,
  packagesOf,
  svcLoading,
} from '../support/svc-loading';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';
import { MIGRATIONS } from '../../migrations';
import { SERVICE_VERSION } from '../../src/config/app-config';

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
    [['schedules', '--help'], 0],
    [['schedules', 'list'], 2],
    [['schedules', 'pause', 'ledger'], 2],
    [['schedules', 'list', 'ledger', 'extra'], 2],
    [['settings', '--help'], 0],
    [['settings', 'show'], 2],
    [['settings', 'set', 'ledger'], 2],
    [['settings', 'set', 'ledger', '/nonexistent-svc-file.json', '--expect-version', '0'], 2],
    [['settings', 'set', 'ledger', '/nonexistent-svc-file.json'], 2],
    [['settings', 'set', 'ledger', '/nonexistent-svc-file.json', '--expect-version', 'v1'], 2],
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

  it('svc --version prints the version of the package', async () => {
    const answer = await runSvc(['--version'], env);
    expect(answer.code).toBe(0);
    expect(answer.stdout).toBe(`svc ${SERVICE_VERSION}\n`);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('--help and wrong arguments load none of the database, NestJS or the configuration', async () => {
    for (const args of [
      ['--help'],
      ['keys', '--help'],
      ['keys', 'rotate'],
      ['settings', 'set', 'a'],
    ]) {
      const answer = await svcLoading(args, env);
      expect({ args, code: answer.code }).toEqual({
        args,
        code: args[1] === 'rotate' || args[1] === 'set' ? 2 : 0,
      });
      const heavy = [...packagesOf(answer.loaded)].filter((name) =>
        /^(typeorm|pg|@nestjs\/.*|class-validator|class-transformer|@electric-sql\/.*)$/.test(name),
      );
      expect({ args, heavy }).toEqual({ args, heavy: [] });
      expect(answer.loaded.filter((file) => file.endsWith('/config/app-config.js'))).toEqual([]);
    }
  });

  it("every command's help lists the exit statuses of svc --help", async () => {
    const help = (await runSvc(['--help'], env)).stdout;
    const statuses = exitStatusesOf(help);
    expect(statuses.map((entry) => entry.status)).toEqual([0, 1, 2, 78]);
    const line = /^Exit status: .*$/m.exec(help)![0];
    for (const command of ['migrate', 'catalog', 'hash-secret', 'keys', 'schedules', 'settings']) {
      const usage = await runSvc([command, '--help'], env);
      expect({ command, listed: usage.stdout.includes(`\n${line}\n`) }).toEqual({
        command,
        listed: true,
      });
    }
  });

  it('exits with 78 and one line per problem on a bad configuration', async () => {
    const bad = await runSvc(['migrate', 'show'], { ...env, PORT: 'eighty', R_ENGINE: 'python' });
    expect(bad.code).toBe(listedStatus((await runSvc(['--help'], env)).stdout, 'configuration'));
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

/**
 * The command line while a service runs (docs/operations.md#the-command-line-and-a-running-service):
 * on the embedded database it works through the service's database, on a server directly; either
 * way what it reports done is in force on the service at once, and audited.
 */
describe('the command line beside a running service', () => {
  const ADMIN = {
    Authorization: `Basic ${Buffer.from('root:root-secret-1').toString('base64')}`,
    Accept: 'application/json',
  };
  let database: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let service: ServiceProcess;

  const admin = async (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(`${service.url}/svc/api/rest/admin${path}`, {
      ...init,
      headers: { ...ADMIN, ...(init.headers as Record<string, string> | undefined) },
    });
  const auditOf = async (action: string): Promise<Array<Record<string, unknown>>> => {
    const answer = await admin(`/audit?action=${action}`);
    expect(answer.status).toBe(200);
    return ((await answer.json()) as { auditEvents: Array<Record<string, unknown>> }).auditEvents;
  };
  const cliPrincipal = `cli:${userInfo().username}`;

  beforeAll(async () => {
    database = await createTestDatabase();
    env = testEnvironment(database, {
      AUTH_MODE: 'apiKey',
      ADMIN_USER: 'root',
      ADMIN_PASSWORD: 'root-secret-1',
      GLOBAL_ADMINS: JSON.stringify({ principals: [], roles: ['ops'] }),
      LOG_LEVEL: 'warn',
    });
    service = await spawnService(env);
  });
  afterAll(async () => {
    service.child.kill('SIGTERM');
    await service.exited();
    await database.drop();
  });

  it('keys revoke: the next request with the key is refused, and the revocation is audited', async () => {
    const created = await runSvc(['keys', 'create', 'ops-robot', '--roles', 'ops'], env);
    expect(created.code).toBe(0);
    const key = created.stdout.trim();
    const id = key.split('.')[0];
    const statusWithKey = async (): Promise<number> =>
      (
        await fetch(`${service.url}/svc/api/rest/admin/api-keys`, {
          headers: { 'X-SVC-API-Key': key, Accept: 'application/json' },
        })
      ).status;
    // Twice: the second answer may come from the service's cache of keys.
    expect(await statusWithKey()).toBe(200);
    expect(await statusWithKey()).toBe(200);

    const listed = await runSvc(['keys', 'list'], env);
    expect(listed.code).toBe(0);
    const [header, ...rows] = listed.stdout.trim().split('\n');
    expect(header).toBe('ID\tPRINCIPAL\tROLES\tCREATED\tEXPIRES\tLAST USED');
    expect(rows.find((row) => row.startsWith(`${id}\t`))).toMatch(/^\S+\tops-robot\tops\t/);

    const revoked = await runSvc(['keys', 'revoke', id], env);
    expect(revoked.output).toBe(`revoked ${id}\n`);
    expect(revoked.code).toBe(0);
    expect(await statusWithKey()).toBe(401);
    expect((await runSvc(['keys', 'list'], env)).stdout).not.toContain(id);
    expect(await auditOf('apiKey.revoked')).toEqual([
      expect.objectContaining({
        principal: cliPrincipal,
        details: JSON.stringify({ keyId: id, principal: 'ops-robot' }),
      }),
    ]);
  });

  it('catalog load: the file is on the admin API at once, and audited', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'svc-catalog-'));
    try {
      mkdirSync(join(folder, 'ledger', 'R_SCRIPTS'), { recursive: true });
      writeFileSync(join(folder, 'ledger', 'R_SCRIPTS', 'total.R'), 'writeLines("1", "t.txt")\n');
      const loaded = await runSvc(['catalog', 'load', folder], env);
      expect(loaded.output).toContain('1 created, 0 updated, 0 kept, 0 skipped');
      expect(loaded.code).toBe(0);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
    const file = await admin('/catalog/R_SCRIPTS/total.R', {
      headers: { 'X-SVC-Application-Name': 'ledger' },
    });
    expect(file.status).toBe(200);
    expect(await file.text()).toBe('writeLines("1", "t.txt")\n');
    expect(await auditOf('catalog.changed')).toContainEqual(
      expect.objectContaining({ principal: cliPrincipal, application: 'ledger' }),
    );
  });

  it("settings show and set: a version as the admin API checks it, in the command line's words; the change in force and audited", async () => {
    const help = (await runSvc(['--help'], env)).stdout;
    const shown = await runSvc(['settings', 'show', 'ledger'], env);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ application: 'ledger', version: 0 });
    const folder = mkdtempSync(join(tmpdir(), 'svc-settings-'));
    const file = join(folder, 'ledger.json');
    writeFileSync(file, JSON.stringify({ settings: { maxQueuedJobs: 7 } }));
    try {
      const unconditional = await runSvc(['settings', 'set', 'ledger', file], env);
      expect(unconditional.code).toBe(listedStatus(help, 'wrong arguments'));
      expect(unconditional.output).toMatch(
        /^svc settings: settings set needs --expect-version <version>: the "version" that settings show printed$/m,
      );
      const set = await runSvc(['settings', 'set', 'ledger', file, '--expect-version', '0'], env);
      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout)).toMatchObject({
        version: 1,
        settings: { maxQueuedJobs: 7 },
      });
      const stale = await runSvc(['settings', 'set', 'ledger', file, '--expect-version', '0'], env);
      expect(stale.code).toBe(listedStatus(help, 'refused'));
      expect(stale.output).toBe(
        'svc settings: the settings of ledger changed since you read them (version 1 is in ' +
          'force, not 0); read them again with `svc settings show ledger` and retry\n',
      );
      writeFileSync(file, JSON.stringify({ settings: { maxQueuedJobs: 'many' } }));
      const bad = await runSvc(['settings', 'set', 'ledger', file, '--expect-version', '1'], env);
      expect(bad.code).toBe(listedStatus(help, 'refused'));
      expect(bad.output).toMatch(/^svc settings: .*maxQueuedJobs/);
      for (const answer of [unconditional, stale, bad]) {
        expect(answer.output).not.toMatch(HTTP_WORDS);
      }
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
    const inForce = await admin('/applications/ledger');
    expect(await inForce.json()).toMatchObject({
      version: 1,
      updatedBy: cliPrincipal,
      settings: { maxQueuedJobs: 7 },
    });
    expect(await auditOf('application.changed')).toEqual([
      expect.objectContaining({ principal: cliPrincipal, application: 'ledger' }),
    ]);
  });

  it('a command beside the running service loads what it uses only: no embedded database, no other command', async () => {
    const listed = await svcLoading(['keys', 'list'], env);
    expect(listed.code).toBe(0);
    const packages = packagesOf(listed.loaded);
    for (const unused of ['@electric-sql/pglite', '@electric-sql/pglite-socket', 'prom-client']) {
      expect({ unused, loaded: packages.has(unused) }).toEqual({ unused, loaded: false });
    }
    // On a server the tables' entities (the database's schema) load, the other features' code does
    // not; beside an embedded service none of it does (cli-command-socket.e2e).
    const otherCommands = listed.loaded.filter(
      (file) =>
        !file.endsWith('.entity.js') &&
        /\/dist\/src\/(?:schedules|catalog|metrics|applications)\/|\/dist\/src\/cli\/(?:catalog-load|catalog-dump)\.js$/.test(
          file,
        ),
    );
    expect(otherCommands).toEqual([]);
    const unknown = await runSvc(['keys', 'revoke', 'k-nothing-here'], env);
    expect(unknown.code).toBe(listedStatus((await runSvc(['--help'], env)).stdout, 'refused'));
    expect(unknown.output).toBe('svc keys: no API key k-nothing-here in the database\n');
  });

  it('schedules list, pause and delete act on the service at once', async () => {
    const post = await admin('/schedules', {
      method: 'POST',
      headers: { 'X-SVC-Application-Name': 'ledger', 'Content-Type': 'application/json' },
      body: JSON.stringify({
        name: 'nightly',
        cron: '0 0 3 * * *',
        timeZone: 'UTC',
        job: { rScript: 'total.R', meta: {} },
        catchUp: 'skip',
      }),
    });
    expect(post.status).toBe(201);
    const { id } = (await post.json()) as { id: string };
    const scheduleOf = (): Promise<Response> =>
      admin(`/schedules/${id}`, { headers: { 'X-SVC-Application-Name': 'ledger' } });

    const listed = await runSvc(['schedules', 'list', 'ledger'], env);
    expect(listed.code).toBe(0);
    const [header, row] = listed.stdout.trim().split('\n');
    expect(header).toBe('ID\tNAME\tCRON\tTIME ZONE\tPAUSED\tNEXT RUN\tLAST RUN');
    expect(row).toMatch(new RegExp(`^${id}\tnightly\t0 0 3 \\* \\* \\*\tUTC\tno\t\\S+T03:00:00`));

    const paused = await runSvc(['schedules', 'pause', 'ledger', id], env);
    expect(paused.output).toBe(`paused schedule ${id} of ledger\n`);
    expect(await (await scheduleOf()).json()).toMatchObject({ paused: true, nextRunTime: null });

    const elsewhere = await runSvc(['schedules', 'delete', 'other', id], env);
    expect(elsewhere.code).toBe(1);
    expect((await scheduleOf()).status).toBe(200);
    const deleted = await runSvc(['schedules', 'delete', 'ledger', id], env);
    expect(deleted.output).toBe(`deleted schedule ${id} of ledger\n`);
    expect((await scheduleOf()).status).toBe(404);
    expect((await runSvc(['schedules', 'delete', 'ledger', id], env)).code).toBe(1);
  });

  it('on the embedded database: one owner; a second service and migrations are refused; a killed owner leaves no lock', async () => {
    if (database.url) {
      return; // A server is shared by design: no owner.
    }
    await expect(spawnService(env)).rejects.toThrow(
      new RegExp(`DATA_DIR ${database.dataDir} is in use by svc process ${service.child.pid}`),
    );
    const migrate = await runSvc(['migrate', 'run'], env);
    expect(migrate.code).toBe(1);
    expect(migrate.output).toMatch(/^svc migrate: DATA_DIR .* is in use by a running svc/m);
    expect((await runSvc(['migrate', 'show'], env)).output).toContain('Up to date');

    service.child.kill('SIGKILL');
    await service.exited();
    service = await spawnService(env);
    const listed = await runSvc(['keys', 'list'], env);
    expect(listed.code).toBe(0);
    expect((await admin('/applications/ledger')).status).toBe(200);
  });
});
