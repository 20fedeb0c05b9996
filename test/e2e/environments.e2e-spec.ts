/**
 * Applications' R environments from their renv.lock: the lockfile as hostile input, resolved
 * against a CRAN-like repository this file builds offline (an Archive version included) and the
 * application's uploads; history, rollback, audit; the command line and the catalog load.
 */
import { execFileSync } from 'node:child_process';
import { DataSource } from 'typeorm';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ALICE, basicUsersEnvironment, BOB, ROOT } from '../support/admin-auth';
import { Answer, parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { makeZip, zipEntries } from '../support/zip-fixtures';
import { buildPackage } from '../support/r-packages';
import { runSvc } from '../support/service-process';
import { startService } from '../../src/bootstrap';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { loadConfig } from '../../src/config/app-config';
import { EnvironmentRuntime } from '../../src/environments/environment-runtime';
import { EnvironmentRepository } from '../../src/environments/environment.repository';
import type { EnvironmentBuildReport } from '../../src/environments/r-environment.entity';
import { MetricsService } from '../../src/metrics/metrics.service';
import { startTestService, testEnvironment, TestService } from '../support/test-service';

const RISK = 'risk';
const PRICING = 'pricing';
const JSON_TYPE = { 'Content-Type': 'application/json' };

interface EnvironmentView {
  id: string;
  application: string;
  requested: boolean;
  contentsSha256: string;
  createdBy: string;
  inForce: boolean;
  builtTime: string | null;
  build: { librarySha256: string; packages: Array<{ name: string; cached: boolean }> } | null;
  packages: Array<{
    name: string;
    version: string;
    origin: string;
    repository: string | null;
    sourceSha256: string;
  }>;
}

/** renv's lockfile of `packages` (name → version, requirements), its repository the given one. */
function lockfile(
  packages: Record<string, string | { version: string; requires: string[] }>,
  repositories: Array<{ Name: string; URL: string }>,
): string {
  return JSON.stringify({
    R: { Version: '4.3.2', Repositories: repositories },
    Packages: Object.fromEntries(
      Object.entries(packages).map(([name, spec]) => {
        const { version, requires } =
          typeof spec === 'string' ? { version: spec, requires: [] } : spec;
        return [
          name,
          {
            Package: name,
            Version: version,
            Source: 'Repository',
            Repository: repositories[0]?.Name,
            Requirements: requires,
            Hash: createHash('md5').update(`${name}${version}`).digest('hex'),
            RemoteType: 'standard',
          },
        ];
      }),
    ),
  });
}

/** A package the node has besides R's own (its site library), which environments never see. */
const sitePackage =
  execFileSync('Rscript', [
    '-e',
    'cat(c(rownames(installed.packages(lib.loc = setdiff(.libPaths(), .Library))), "no.such.package")[[1L]])',
  ])
    .toString()
    .trim() || 'no.such.package';

/** The install-time code of the package `snoop`: what it could see while it was built. */
const SNOOP = `
seen <- c(
  env = paste(Sys.getenv(c("DATABASE_URL", "ADMIN_PASSWORD", "USERS", "R_REPOSITORIES")), collapse = ""),
  file = tryCatch(paste(readLines(file.path("${join(tmpdir(), `svc-environments-${process.pid}`)}", "service-secret.txt")), collapse = ""), error = function(e) "unreadable", warning = function(w) "unreadable"),
  network = tryCatch({ con <- socketConnection("127.0.0.1", 5432, timeout = 2); close(con); "open" }, error = function(e) "refused", warning = function(w) "refused"),
  site = as.character(requireNamespace("${sitePackage}", quietly = TRUE))
)
greet <- function() seen
`;

/** The CRAN-like repository this file builds (in beforeAll), named before the tests are. */
const root = join(tmpdir(), `svc-environments-${process.pid}`);
const repositoryUrl = pathToFileURL(join(root, 'cran')).href;
/** As renv writes it, with a trailing slash: the operator's list has it without. */
const repository = [{ Name: 'company', URL: `${repositoryUrl}/` }];

describe('R environments from renv.lock', () => {
  let service: TestService;
  const sha = new Map<string, string>();

  async function admin(
    method: string,
    path: string,
    init: { body?: string; headers?: Record<string, string>; app?: string } = {},
  ): Promise<Answer> {
    return request(`${service.url}${REST}/admin/${path}`, {
      method,
      headers: { ...ROOT, 'X-SVC-Application-Name': init.app ?? RISK, ...init.headers },
      body: init.body,
    });
  }

  const put = (body: string, app = RISK, who: Record<string, string> = ROOT) =>
    admin('PUT', 'environment', { body, app, headers: { ...JSON_TYPE, ...who } });

  beforeAll(async () => {
    // The repository: shared 2.0 current and 1.0 in its Archive; uses.shared needs shared.
    mkdirSync(root, { recursive: true, mode: 0o755 });
    const contrib = join(root, 'cran', 'src', 'contrib');
    mkdirSync(join(contrib, 'Archive', 'shared'), { recursive: true });
    const write = (path: string, archive: Buffer, key: string): void => {
      writeFileSync(path, archive);
      sha.set(key, createHash('sha256').update(archive).digest('hex'));
    };
    write(
      join(contrib, 'Archive', 'shared', 'shared_1.0.tar.gz'),
      buildPackage('shared', '1.0'),
      'shared 1.0',
    );
    write(join(contrib, 'shared_2.0.tar.gz'), buildPackage('shared', '2.0'), 'shared 2.0');
    write(
      join(contrib, 'uses.shared_1.0.tar.gz'),
      buildPackage('uses.shared', '1.0', { extra: 'Imports: shared' }),
      'uses.shared 1.0',
    );
    write(join(contrib, 'extra.pkg_1.0.tar.gz'), buildPackage('extra.pkg', '1.0'), 'extra.pkg 1.0');
    write(
      join(contrib, 'broken_1.0.tar.gz'),
      buildPackage('broken', '1.0', { code: 'greet <- function( "unfinished\n' }),
      'broken 1.0',
    );
    // Its install code (run by R CMD INSTALL) looks for the service's secrets, a file of the
    // service's, the node's site library and the network; report() answers what it found.
    write(
      join(contrib, 'snoop_1.0.tar.gz'),
      buildPackage('snoop', '1.0', { code: SNOOP }),
      'snoop 1.0',
    );
    write(join(contrib, 'twice_1.0.tar.gz'), buildPackage('twice', '1.0'), 'twice 1.0');
    execFileSync('Rscript', ['-e', `tools::write_PACKAGES("${contrib}", type = "source")`]);
    writeFileSync(join(root, 'service-secret.txt'), 'secret of the service\n');
    service = await startTestService({
      ...(await basicUsersEnvironment({
        [RISK]: { adminPrincipals: ['alice'], userPrincipals: ['bob'] },
        [PRICING]: { adminPrincipals: ['bob'] },
      })),
      R_REPOSITORIES: repositoryUrl,
      ENVIRONMENT_HISTORY: '3',
      R_ENGINE: 'native',
      // Shared with the second node of the two-node test (both build into it).
      R_ENVIRONMENTS_DIR: join(root, 'environments'),
    });
  }, 120_000);

  afterAll(async () => {
    await service?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  /** Runs a script job of `app` that writes out.txt; its lines and the job's log. */
  async function runJob(app: string, script: string): Promise<{ lines: string[]; log: string }> {
    const zip = await makeZip([{ name: 'job.R', content: script }]);
    const answer = await postZip(service.url, zip, { ...ROOT, 'X-SVC-Application-Name': app });
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri, ROOT, 300_000)).text).result;
    const data = await request(result.dataUri, { headers: ROOT });
    const log = await request(`${service.url}${REST}/jobs/${app}/${token.jobId}/log`, {
      headers: { ...ROOT, Accept: 'text/plain' },
    });
    if (result.success !== 'true') {
      return { lines: [`failed: ${data.text}`], log: log.text };
    }
    const files = await zipEntries(data.body);
    return {
      lines: (files.get('out.txt') ?? Buffer.from('')).toString().trimEnd().split('\n'),
      log: log.text,
    };
  }

  const environmentOf = async (app: string): Promise<EnvironmentView> =>
    JSON.parse((await admin('GET', 'environment', { app })).text) as EnvironmentView;

  /**
   * What a job sees: the package's greeting, its environment, its libraries, whether a package
   * of the node's site library loads, and the libraries of an R it starts.
   */
  const PROBE = (call: string) => `
loads <- function(pkg) as.character(requireNamespace(pkg, quietly = TRUE))
started <- system2(file.path(R.home("bin"), "Rscript"),
                   c("-e", shQuote("cat(requireNamespace('${sitePackage}', quietly = TRUE))")), stdout = TRUE)
writeLines(c(${call}, Sys.getenv("SVC_R_ENVIRONMENT"), paste(.libPaths(), collapse = ":"),
             loads("${sitePackage}"), started), "out.txt")
`;

  describe('jobs', () => {
    it("run each in its application's environment, side by side, and record it", async () => {
      expect((await put(lockfile({ shared: '1.0' }, repository), 'older')).status).toBe(201);
      expect(
        (
          await put(
            lockfile(
              { shared: '2.0', 'uses.shared': { version: '1.0', requires: ['shared'] } },
              repository,
            ),
            'newer',
          )
        ).status,
      ).toBe(201);
      const [older, newer] = await Promise.all([
        runJob('older', PROBE('shared::greet()')),
        runJob('newer', PROBE('c(shared::greet(), uses.shared::greet())')),
      ]);
      const olderEnvironment = await environmentOf('older');
      expect(olderEnvironment).toMatchObject({
        inForce: true,
        buildError: null,
        build: { packages: [{ name: 'shared', version: '1.0', cached: false }] },
      });
      const library = olderEnvironment.build?.librarySha256 as string;
      expect(older.lines).toEqual([
        'v1.0',
        library,
        expect.any(String),
        // Neither the job nor an R it starts loads a package of the node's site library.
        'FALSE',
        'FALSE',
      ]);
      expect(older.lines[2].split(':')[0]).toMatch(new RegExp(`/libraries/${library}$`));
      expect(older.lines[2].split(':')).toHaveLength(2);
      expect(older.log).toContain(`svc: R environment ${olderEnvironment.id} (${library})`);
      expect(newer.lines.slice(0, 2)).toEqual(['v2.0', 'v1.0']);
      expect((await environmentOf('newer')).build?.packages).toEqual([
        { name: 'shared', version: '2.0', cached: false },
        { name: 'uses.shared', version: '1.0', cached: false },
      ]);
    });

    it('a lockfile change builds only the new package; later jobs see it', async () => {
      expect(
        (
          await put(
            lockfile(
              {
                shared: '2.0',
                'uses.shared': { version: '1.0', requires: ['shared'] },
                'extra.pkg': '1.0',
              },
              repository,
            ),
            'newer',
          )
        ).status,
      ).toBe(201);
      const job = await runJob('newer', PROBE('c(shared::greet(), extra.pkg::greet())'));
      expect(job.lines.slice(0, 2)).toEqual(['v2.0', 'v1.0']);
      expect((await environmentOf('newer')).build?.packages).toEqual([
        { name: 'extra.pkg', version: '1.0', cached: false },
        { name: 'shared', version: '2.0', cached: true },
        { name: 'uses.shared', version: '1.0', cached: true },
      ]);
      // The node's metrics count them: builds, packages built and taken from the cache.
      const metrics = (await request(`${service.url}/metrics`)).text;
      expect(metrics).toMatch(/^svc_environment_packages_total\{[^}]*outcome="cached"\} [1-9]/m);
      expect(metrics).toMatch(/^svc_environment_packages_total\{[^}]*outcome="built"\} [1-9]/m);
      expect(metrics).toMatch(/^svc_environment_builds_total\{[^}]*outcome="succeeded"\} [1-9]/m);
    });

    it('a failed build keeps the environment in force and reports the package and its log; going back takes no build', async () => {
      const before = await environmentOf('older');
      const failing = await put(lockfile({ shared: '2.0', broken: '1.0' }, repository), 'older');
      expect(failing.status).toBe(201);
      const job = await runJob('older', PROBE('shared::greet()'));
      expect(job.lines[0]).toBe('v1.0');
      const failed = JSON.parse(
        (await admin('GET', 'environment', { app: 'older' })).text,
      ) as EnvironmentView & {
        buildError: string;
      };
      expect(failed).toMatchObject({ requested: true, inForce: false, builtTime: null });
      expect(failed.buildError).toMatch(/^broken 1\.0 failed to build:\n[\s\S]*ERROR/);

      // Back to the one in force: at once, nothing built (its build time stays).
      const back = await admin('POST', `environment/history/${before.id}/rollback`, {
        app: 'older',
      });
      expect(back.status).toBe(200);
      expect(JSON.parse(back.text)).toMatchObject({
        id: before.id,
        requested: true,
        inForce: true,
        builtTime: before.builtTime,
      });
      expect((await runJob('older', PROBE('shared::greet()'))).lines[0]).toBe('v1.0');
    });

    it('function calls run in the environment too; a switch replaces the warm session', async () => {
      const catalog = await admin('PUT', 'catalog/R_FUNCTIONS/f.R', {
        app: 'older',
        body: 'svcJsonService <- function(payload) paste(shared::greet(), length(.libPaths()), Sys.getenv("SVC_R_ENVIRONMENT"))\n',
        headers: { 'Content-Type': 'application/octet-stream' },
      });
      expect(catalog.status).toBeLessThan(300);
      const call = async (): Promise<string> => {
        const answer = await request(`${service.url}${REST}/process`, {
          method: 'POST',
          headers: {
            ...ROOT,
            'X-SVC-Application-Name': 'older',
            'Content-Type': 'application/json',
          },
          body: '{}',
        });
        expect(answer.status).toBe(200);
        return answer.text;
      };
      const before = await environmentOf('older');
      expect(await call()).toContain(`v1.0 2 ${before.build?.librarySha256}`);
      expect((await put(lockfile({ shared: '2.0' }, repository), 'older')).status).toBe(201);
      const after = await call();
      const switched = await environmentOf('older');
      expect(after).toContain(`v2.0 2 ${switched.build?.librarySha256}`);
      // shared 2.0 was built for another application: taken from the cache.
      expect(switched.build?.packages).toEqual([{ name: 'shared', version: '2.0', cached: true }]);
    });

    it('two nodes on one database and one directory build a library once and both use it', async () => {
      const second = await startService(
        loadConfig(
          testEnvironment(service.database, {
            ...(await basicUsersEnvironment({})),
            R_ENGINE: 'native',
            R_REPOSITORIES: repositoryUrl,
            R_ENVIRONMENTS_DIR: join(root, 'environments'),
            ROLE: 'worker',
            MIGRATIONS_RUN: 'false',
          }),
        ),
        new PinoLoggerService('silent'),
      );
      try {
        const built = async (): Promise<number> => {
          let sum = 0;
          for (const node of [service, second]) {
            const text = await node.app.get(MetricsService, { strict: false }).registry.metrics();
            for (const match of text.matchAll(
              /^svc_environment_packages_total\{[^}]*outcome="built"\} (\d+)/gm,
            )) {
              sum += Number(match[1]);
            }
          }
          return sum;
        };
        const before = await built();
        expect((await put(lockfile({ twice: '1.0' }, repository), 'twonodes')).status).toBe(201);
        const runtimes = [service, second].map((node) =>
          node.app.get(EnvironmentRuntime, { strict: false }),
        );
        const [first, other] = await Promise.all(
          runtimes.map((runtime) => runtime.forJob('twonodes')),
        );
        expect(other).toEqual(first);
        expect(first?.libraryDir).toBe(
          join(root, 'environments', 'libraries', first?.librarySha256 ?? ''),
        );
        expect((await built()) - before).toBe(1);
        const recorded = await environmentOf('twonodes');
        expect(recorded).toMatchObject({
          inForce: true,
          build: { packages: [{ name: 'twice', version: '1.0', cached: false }] },
        });
        // The node that waited may record its report (all from the cache) before the builder
        // records its own: the builder's report is the one kept, in either order.
        const records = service.app.get(EnvironmentRepository, { strict: false });
        const report = (cached: boolean): EnvironmentBuildReport => ({
          librarySha256: recorded.build?.librarySha256 ?? '',
          rVersion: '4.2',
          platform: 'x64-linux',
          packages: [{ name: 'twice', version: '1.0', cached }],
          seconds: 1,
        });
        await service.app
          .get(DataSource)
          .query('UPDATE r_environment SET build_report = $2::jsonb WHERE id = $1::bigint', [
            recorded.id,
            JSON.stringify(report(true)),
          ]);
        await records.built(recorded.id, report(false));
        await records.built(recorded.id, report(true));
        expect((await environmentOf('twonodes')).build?.packages).toEqual([
          { name: 'twice', version: '1.0', cached: false },
        ]);
      } finally {
        await second.close();
      }
    });

    it('builds a package in the sandbox: no service secrets, files, site library or network', async () => {
      expect((await put(lockfile({ snoop: '1.0' }, repository), 'snoop')).status).toBe(201);
      const job = await runJob('snoop', 'writeLines(snoop::greet(), "out.txt")');
      expect(job.lines).toEqual(['', 'unreadable', 'refused', 'FALSE']);
    });
  });

  it('pins two applications to two versions of one package, an Archive one included', async () => {
    const risk = await put(lockfile({ shared: '1.0' }, repository), RISK, ALICE);
    expect(risk.status).toBe(201);
    const riskView = JSON.parse(risk.text) as EnvironmentView;
    expect(risk.headers.get('location')).toBe(
      `${service.url}${REST}/admin/environment/history/${riskView.id}`,
    );
    expect(riskView).toMatchObject({
      application: RISK,
      requested: true,
      createdBy: 'user:alice',
      packages: [
        {
          name: 'shared',
          version: '1.0',
          origin: 'archive',
          repository: repositoryUrl,
          sourceSha256: sha.get('shared 1.0'),
        },
      ],
    });

    const pricing = await put(
      lockfile(
        { shared: '2.0', 'uses.shared': { version: '1.0', requires: ['shared'] } },
        repository,
      ),
      PRICING,
      BOB,
    );
    expect(pricing.status).toBe(201);
    expect((JSON.parse(pricing.text) as EnvironmentView).packages).toEqual([
      expect.objectContaining({
        name: 'shared',
        version: '2.0',
        origin: 'repository',
        sourceSha256: sha.get('shared 2.0'),
      }),
      expect.objectContaining({
        name: 'uses.shared',
        version: '1.0',
        origin: 'repository',
        sourceSha256: sha.get('uses.shared 1.0'),
      }),
    ]);

    // Each application sees its own; the same lockfile again changes nothing.
    const shown = await admin('GET', 'environment');
    expect([shown.status, (JSON.parse(shown.text) as EnvironmentView).id]).toEqual([
      200,
      riskView.id,
    ]);
    const again = await put(lockfile({ shared: '1.0' }, repository));
    expect([again.status, (JSON.parse(again.text) as EnvironmentView).id]).toEqual([
      200,
      riskView.id,
    ]);
  });

  it('is for admins of the application and global admins only', async () => {
    expect((await put(lockfile({ shared: '2.0' }, repository), RISK, BOB)).status).toBe(403);
    expect((await admin('GET', 'environment', { headers: BOB })).status).toBe(403);
    expect(
      (await admin('GET', 'environment/history', { app: PRICING, headers: ALICE })).status,
    ).toBe(403);
  });

  it.each([
    [
      'a name with a path',
      lockfile({ '../../etc/passwd': '1.0' }, repository),
      /Packages: "\.\.\/\.\.\/etc\/passwd" is not an R package name/,
    ],
    [
      'a name with shell characters',
      lockfile({ 'x$(reboot)': '1.0' }, repository),
      /Packages: "x\$\(reboot\)" is not an R package name/,
    ],
    [
      'a version with a path',
      lockfile({ shared: '1.0/../../x' }, repository),
      /Packages\.shared: Version "1\.0\/\.\.\/\.\.\/x"/,
    ],
    [
      'a repository outside the list',
      lockfile({ shared: '2.0' }, [{ Name: 'CRAN', URL: 'https://cloud.r-project.org' }]),
      /R\.Repositories CRAN \("https:\/\/cloud\.r-project\.org"\) is not a repository this service takes packages from/,
    ],
    [
      'file:// to a system path',
      lockfile({ shared: '2.0' }, [{ Name: 'sys', URL: 'file:///etc' }]),
      /R\.Repositories sys \("file:\/\/\/etc"\) is not a repository/,
    ],
    [
      'an incomplete lockfile',
      lockfile({ 'uses.shared': { version: '1.0', requires: ['shared'] } }, repository),
      /Packages\.uses\.shared requires shared, which the lockfile does not lock/,
    ],
    [
      'packages in no source, all named',
      lockfile({ shared: '3.0', absent: '1.0', 'uses.shared': '1.0' }, repository),
      /2 of 3 packages are in none of the sources .*: absent 1\.0, shared 3\.0$/,
    ],
    [
      'a GitHub package',
      JSON.stringify({
        Packages: {
          shared: {
            Package: 'shared',
            Version: '1.0',
            Source: 'GitHub',
            RemoteUrl: 'https://github.com/x/y',
          },
        },
      }),
      /Packages\.shared: Source "GitHub" is not taken/,
    ],
  ])(
    'refuses %s with a 400 naming the entry, and keeps the environment',
    async (_what, body, message) => {
      const answer = await put(body);
      expect(answer.status).toBe(400);
      expect((JSON.parse(answer.text) as { message: string }).message).toMatch(message);
      const current = JSON.parse((await admin('GET', 'environment')).text) as EnvironmentView;
      expect(current.packages.map((pkg) => `${pkg.name} ${pkg.version}`)).toEqual(['shared 1.0']);
    },
  );

  it('refuses a huge lockfile (413) and another type (415)', async () => {
    const huge = JSON.stringify({ Packages: {}, padding: 'x'.repeat(1_100_000) });
    expect((await put(huge)).status).toBe(413);
    const text = await admin('PUT', 'environment', {
      body: lockfile({ shared: '1.0' }, repository),
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(text.status).toBe(415);
  });

  it('keeps a history, goes back in one call, and audits every change', async () => {
    const first = JSON.parse((await admin('GET', 'environment')).text) as EnvironmentView;
    const second = await put(lockfile({ shared: '2.0' }, repository));
    expect(second.status).toBe(201);
    const secondView = JSON.parse(second.text) as EnvironmentView;
    expect(secondView.contentsSha256).not.toBe(first.contentsSha256);

    const back = await admin('POST', `environment/history/${first.id}/rollback`);
    expect(back.status).toBe(200);
    expect(JSON.parse(back.text)).toMatchObject({ id: first.id, requested: true });
    const history = JSON.parse((await admin('GET', 'environment/history')).text) as {
      environments: EnvironmentView[];
    };
    expect(history.environments.map((e) => [e.id, e.requested])).toEqual([
      [secondView.id, false],
      [first.id, true],
    ]);
    expect((await admin('POST', 'environment/history/999999/rollback')).status).toBe(404);
    expect((await admin('POST', 'environment/history/x;1/rollback')).status).toBe(404);
    expect(
      (await admin('POST', `environment/history/${first.id}/rollback`, { app: PRICING })).status,
    ).toBe(404);

    // ENVIRONMENT_HISTORY=3: the fourth lockfile removes the oldest.
    await put(lockfile({ shared: '2.0', 'uses.shared': '1.0' }, repository));
    await put(lockfile({ shared: '1.0', 'uses.shared': '1.0' }, repository));
    const kept = JSON.parse((await admin('GET', 'environment/history')).text) as {
      environments: EnvironmentView[];
    };
    expect(kept.environments).toHaveLength(3);
    expect(kept.environments.map((e) => e.id)).not.toContain(first.id);

    const audit = await request(`${service.url}${REST}/admin/audit?application=${RISK}`, {
      headers: { ...ROOT, Accept: 'application/json' },
    });
    const actions = (
      JSON.parse(audit.text) as { auditEvents: Array<{ action: string; details: unknown }> }
    ).auditEvents
      .map((event) => event.action)
      .filter((action) => action.startsWith('environment.'));
    expect(actions.sort()).toEqual([
      'environment.rolledBack',
      'environment.set',
      'environment.set',
      'environment.set',
      'environment.set',
    ]);
  });

  it('is set, shown, rolled back and removed with the command line and the catalog load', async () => {
    const env = testEnvironment(service.database, { R_REPOSITORIES: repositoryUrl });
    const dir = mkdtempSync(join(tmpdir(), 'svc-environments-catalog-'));
    try {
      mkdirSync(join(dir, 'fromcatalog'));
      writeFileSync(join(dir, 'fromcatalog', 'renv.lock'), lockfile({ shared: '2.0' }, repository));
      mkdirSync(join(dir, 'broken'));
      writeFileSync(join(dir, 'broken', 'renv.lock'), lockfile({ 'a;b': '1.0' }, repository));
      const load = await runSvc(['catalog', 'load', dir], env);
      expect(load.code).toBe(1);
      expect(load.output).toMatch(/fromcatalog\/renv\.lock: environment \d+ \(1 packages\)/);
      expect(load.output).toMatch(
        /broken\/renv\.lock: refused: renv\.lock: Packages: "a;b" is not an R package name/,
      );

      const shown = await runSvc(['environment', 'show', 'fromcatalog'], env);
      expect(shown.code).toBe(0);
      const view = JSON.parse(shown.stdout) as EnvironmentView;
      expect(view.packages).toEqual([expect.objectContaining({ name: 'shared', version: '2.0' })]);
      expect(view.createdBy).toMatch(/^cli:/);

      writeFileSync(join(dir, 'next.lock'), lockfile({ shared: '1.0' }, repository));
      const set = await runSvc(['environment', 'set', 'fromcatalog', join(dir, 'next.lock')], env);
      expect([set.code, set.output]).toEqual([0, expect.stringContaining('asks for environment')]);
      const history = await runSvc(['environment', 'history', 'fromcatalog'], env);
      expect(history.stdout.trim().split('\n')).toHaveLength(3);
      const back = await runSvc(['environment', 'rollback', 'fromcatalog', view.id], env);
      expect(back.code).toBe(0);
      expect((JSON.parse(back.stdout) as EnvironmentView).id).toBe(view.id);
      expect((await runSvc(['environment', 'remove', 'fromcatalog'], env)).code).toBe(0);
      const gone = await runSvc(['environment', 'show', 'fromcatalog'], env);
      expect([gone.code, gone.output]).toEqual([
        1,
        expect.stringContaining('has no R environment'),
      ]);
      expect((await runSvc(['environment', 'set', 'a/b', '-'], env)).code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('removes an environment through the API: its history stays', async () => {
    expect((await admin('DELETE', 'environment', { app: PRICING })).status).toBe(204);
    expect((await admin('GET', 'environment', { app: PRICING })).status).toBe(404);
    expect((await admin('DELETE', 'environment', { app: PRICING })).status).toBe(404);
    const history = JSON.parse(
      (await admin('GET', 'environment/history', { app: PRICING })).text,
    ) as {
      environments: EnvironmentView[];
    };
    expect(history.environments.map((e) => e.requested)).toEqual([false]);
  });
});
