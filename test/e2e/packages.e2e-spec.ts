/**
 * Managed R packages per application, on each engine.
 *
 * @ci-pass embedded
 */
import { startService, type RunningService } from '../../src/bootstrap';
import { CatalogService } from '../../src/catalog/catalog.service';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { loadConfig } from '../../src/config/app-config';
import { WorkerService } from '../../src/worker/worker.service';
import { ALICE, basicUsersEnvironment, BOB, ROOT } from '../support/admin-auth';
import { Answer, parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import {
  SERVER_DATABASE_URL,
  startTestService,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';
import { makeZip } from '../support/zip-fixtures';
import { buildPackage } from '../support/r-packages';

const APP = 'pkgapp';
const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
const GZIP = { 'Content-Type': 'application/gzip' };

interface NodeStatus {
  name: string;
  state: string;
  output?: string;
}
interface PackageEntry {
  name: string;
  version: string;
  sha256: string;
  installedBy: string;
  installedTime: string;
  node?: NodeStatus | NodeStatus[];
}

const nodesOf = (entry: PackageEntry): NodeStatus[] =>
  entry.node === undefined ? [] : Array.isArray(entry.node) ? entry.node : [entry.node];

/** Native R only: webR cannot build packages (its nodes report them as not supported). */
const describeNative = process.env.R_ENGINE === 'webr' ? describe.skip : describe;

describeNative('R packages managed through the admin API (native R)', () => {
  let service: TestService;
  /** The node the function calls go to: a second worker node on a database server. */
  let second: RunningService | null = null;
  let environment: Record<string, string>;
  /** Worker nodes: the embedded database serves one node only. */
  const NODES = SERVER_DATABASE_URL ? 2 : 1;
  const itWithServer = SERVER_DATABASE_URL ? it : it.skip;

  async function admin(
    method: string,
    path: string,
    init: { body?: Buffer | string; headers?: Record<string, string>; app?: string } = {},
  ): Promise<Answer> {
    return request(`${service.url}${REST}/admin/${path}`, {
      method,
      headers: {
        ...ROOT,
        'X-SVC-Application-Name': init.app ?? APP,
        ...init.headers,
      },
      body: init.body,
    });
  }

  async function packages(): Promise<PackageEntry[]> {
    const answer = await admin('GET', 'packages', { headers: JSON_ACCEPT });
    expect(answer.status).toBe(200);
    const body = JSON.parse(answer.text) as {
      packages: { package?: PackageEntry | PackageEntry[] } | '';
    };
    const list = body.packages === '' ? undefined : body.packages.package;
    return list === undefined ? [] : Array.isArray(list) ? list : [list];
  }

  /** Waits until both nodes have reported on the current upload of `name`; returns its entry. */
  async function settled(name: string): Promise<PackageEntry> {
    return waitFor(
      async () => {
        const entry = (await packages()).find((pkg) => pkg.name === name);
        const nodes = entry ? nodesOf(entry) : [];
        return nodes.length === NODES && nodes.every((node) => node.state !== 'pending') && entry;
      },
      180_000,
      `every node to report on ${name}`,
    );
  }

  /** Runs a script job of the application; its result and, on failure, R's message. */
  async function runJob(script: string): Promise<{ success: boolean; text: string }> {
    const zip = await makeZip([{ name: 'job.R', content: script }]);
    const answer = await postZip(service.url, zip, { ...ROOT, 'X-SVC-Application-Name': APP });
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri, ROOT, 120_000)).text).result;
    const data = await request(result.dataUri, { headers: ROOT });
    return { success: result.success === 'true', text: data.text };
  }

  async function callOnSecondNode(): Promise<Answer> {
    return request(`${(second ?? service).url ?? ''}${REST}/process`, {
      method: 'POST',
      headers: { ...ROOT, 'X-SVC-Application-Name': APP, 'Content-Type': 'application/json' },
      body: 'greet',
    });
  }

  beforeAll(async () => {
    const env = {
      ...(await basicUsersEnvironment({
        [APP]: { adminPrincipals: ['alice'], userPrincipals: ['bob'] },
        other: { adminPrincipals: ['bob'] },
      })),
      R_ENGINE: 'native',
      FUNCTION_SESSIONS: '1',
    };
    environment = env;
    service = await startTestService(env);
    if (SERVER_DATABASE_URL) {
      // A second worker node on the same database, forking no servers: scripts there run in
      // fresh R processes (spawn mode), function calls in its own warm session.
      second = await startNode({ R_SCRIPT_MODE: 'spawn' });
    }
    await service.app
      .get(CatalogService)
      .putFile(
        APP,
        'R_FUNCTIONS',
        'f.R',
        Buffer.from('svcJsonService <- function(payload) { library(svcdemo); greet() }\n'),
      );
  }, 180_000);
  afterAll(async () => {
    await second?.close();
    await service?.stop();
  });

  /** Another node of the service on its database. */
  async function startNode(overrides: Record<string, string> = {}): Promise<RunningService> {
    const config = loadConfig(
      testEnvironment(service.database, {
        ...environment,
        MIGRATIONS_RUN: 'false',
        ...overrides,
      }),
    );
    return startService(config, new PinoLoggerService(config.logLevel));
  }

  it('installs a package on every node, for script jobs and function calls; updates and deletes it', async () => {
    const first = await admin('PUT', 'packages/svcdemo', {
      body: buildPackage('svcdemo', '1.0'),
      headers: GZIP,
    });
    expect([first.status, first.headers.get('location')]).toEqual([
      201,
      `${service.url}${REST}/admin/packages/svcdemo`,
    ]);
    const installed = await settled('svcdemo');
    expect(installed).toMatchObject({ name: 'svcdemo', version: '1.0', installedBy: 'user:root' });
    expect(nodesOf(installed).map((node) => node.state)).toEqual(Array(NODES).fill('installed'));

    const xml = await admin('GET', 'packages', { headers: { Accept: 'application/vnd.svc+xml' } });
    expect(xml.status).toBe(200);
    expect(await validateAgainstSchema(xml.text, 'rest-data.xsd')).toEqual({
      valid: true,
      errors: [],
    });

    expect(await runJob('library(svcdemo)\nstopifnot(greet() == "v1.0")\n')).toMatchObject({
      success: true,
    });
    const call = await callOnSecondNode();
    expect([call.status, call.text]).toEqual([200, expect.stringContaining('v1.0')]);

    // A new version: jobs and the warm session (which loaded 1.0) see it.
    const update = await admin('PUT', 'packages/svcdemo', {
      body: buildPackage('svcdemo', '2.0'),
      headers: { 'Content-Type': 'application/x-gzip' },
    });
    expect(update.status).toBe(204);
    const updated = await settled('svcdemo');
    expect(updated.version).toBe('2.0');
    expect(nodesOf(updated).map((node) => node.state)).toEqual(Array(NODES).fill('installed'));
    expect(await runJob('library(svcdemo)\nstopifnot(greet() == "v2.0")\n')).toMatchObject({
      success: true,
    });
    const callAfter = await callOnSecondNode();
    expect([callAfter.status, callAfter.text]).toEqual([200, expect.stringContaining('v2.0')]);

    // A broken build: R's message per node, and 2.0 stays in use.
    const broken = await admin('PUT', 'packages/svcdemo', {
      body: buildPackage('svcdemo', '3.0', { code: 'greet <- function( "unfinished\n' }),
      headers: GZIP,
    });
    expect(broken.status).toBe(204);
    const failed = await settled('svcdemo');
    expect(failed.version).toBe('3.0');
    for (const node of nodesOf(failed)) {
      expect(node.state).toBe('failed');
      expect(node.output).toMatch(/ERROR/);
    }
    expect(await runJob('library(svcdemo)\nstopifnot(greet() == "v2.0")\n')).toMatchObject({
      success: true,
    });

    // Deleted everywhere: a job that uses it fails with R's error.
    expect((await admin('DELETE', 'packages/svcdemo')).status).toBe(204);
    await waitFor(async () => (await packages()).length === 0, 30_000, 'the package to go');
    await waitFor(
      async () => {
        const job = await runJob('library(svcdemo)\n');
        return !job.success && job.text.includes('there is no package called');
      },
      60_000,
      'a job to miss the deleted package',
    );
    expect((await admin('DELETE', 'packages/svcdemo')).status).toBe(404);
  }, 600_000);

  itWithServer(
    'installs at start-up on a node that starts later, and forgets a node that stopped',
    async () => {
      expect(
        (
          await admin('PUT', 'packages/svclate', {
            body: buildPackage('svclate', '1.0'),
            headers: GZIP,
          })
        ).status,
      ).toBe(201);
      await settled('svclate');
      const late = await startNode();
      const lateNode = late.app.get(WorkerService).owner;
      // Installed before the node was up (and before it could claim a job).
      const states = async (): Promise<Record<string, string>> =>
        Object.fromEntries(
          nodesOf((await packages()).find((pkg) => pkg.name === 'svclate') as PackageEntry).map(
            (node) => [node.name, node.state],
          ),
        );
      expect((await states())[lateNode]).toBe('installed');
      await late.close();
      expect(Object.keys(await states())).toHaveLength(NODES);
      expect(Object.keys(await states())).not.toContain(lateNode);
      expect((await admin('DELETE', 'packages/svclate')).status).toBe(204);
    },
    300_000,
  );

  it('fails an install whose dependency is missing, with R message', async () => {
    const answer = await admin('PUT', 'packages/svcneeds', {
      body: buildPackage('svcneeds', '1.0', { extra: 'Imports: svcnotthere' }),
      headers: GZIP,
    });
    expect(answer.status).toBe(201);
    const entry = await settled('svcneeds');
    for (const node of nodesOf(entry)) {
      expect(node.state).toBe('failed');
      expect(node.output).toMatch(/svcnotthere.*not available|not available.*svcnotthere/s);
    }
    expect((await admin('DELETE', 'packages/svcneeds')).status).toBe(204);
  }, 300_000);

  it('lets only the global admin and the application admins manage packages', async () => {
    const archive = buildPackage('svcaccess', '1.0');
    const as = (headers: Record<string, string>, method = 'GET', path = 'packages') =>
      request(`${service.url}${REST}/admin/${path}`, {
        method,
        headers: { ...headers, 'X-SVC-Application-Name': APP, ...GZIP, ...JSON_ACCEPT },
        body: method === 'PUT' ? archive : undefined,
      });
    expect((await as({})).status).toBe(401);
    expect((await as({}, 'PUT', 'packages/svcaccess')).status).toBe(401);
    expect((await as(BOB)).status).toBe(403);
    expect((await as(BOB, 'PUT', 'packages/svcaccess')).status).toBe(403);
    expect((await as(BOB, 'DELETE', 'packages/svcaccess')).status).toBe(403);
    const put = await as(ALICE, 'PUT', 'packages/svcaccess');
    expect(put.status).toBe(201);
    const list = await as(ALICE);
    expect(list.status).toBe(200);
    expect(list.text).toContain('"installedBy":"user:alice"');
    // Bob administers another application: its packages are not pkgapp's.
    const others = await request(`${service.url}${REST}/admin/packages`, {
      headers: { ...BOB, 'X-SVC-Application-Name': 'other', ...JSON_ACCEPT },
    });
    expect([others.status, others.text]).toEqual([200, '{"packages":""}']);
    expect((await as(ALICE, 'DELETE', 'packages/svcaccess')).status).toBe(204);
  }, 120_000);

  it('answers bad uploads with 4xx and an error body, never 500', async () => {
    const good = buildPackage('svcgood', '1.0');
    const cases: Array<[string, string, Buffer | string, Record<string, string>, number, RegExp]> =
      [
        ['not gzip', 'svcgood', 'plain text', GZIP, 400, /not gzip/],
        ['empty', 'svcgood', Buffer.alloc(0), GZIP, 400, /empty/],
        ['name mismatch', 'svcother', good, GZIP, 400, /holds package svcgood/],
        ['invalid name', '1bad', good, GZIP, 400, /not an R package name/],
        [
          'gzip but no package',
          'svcgood',
          Buffer.from([0x1f, 0x8b, 0, 1]),
          GZIP,
          400,
          /not a readable/,
        ],
        ['wrong type', 'svcgood', good, { 'Content-Type': 'text/plain' }, 415, /application\/gzip/],
      ];
    for (const [what, name, body, headers, status, message] of cases) {
      const answer = await admin('PUT', `packages/${name}`, {
        body,
        headers: { ...headers, ...JSON_ACCEPT },
      });
      expect([what, answer.status]).toEqual([what, status]);
      const error = (JSON.parse(answer.text) as { error: { message: string } }).error;
      expect([what, error.message]).toEqual([what, expect.stringMatching(message)]);
    }
    expect((await admin('GET', 'packages/svcgood')).status).toBe(405);
    expect((await admin('DELETE', 'packages/svcgood')).status).toBe(404);
    expect((await packages()).map((pkg) => pkg.name)).toEqual([]);
  }, 120_000);
});

/** webR runs in every environment: its nodes take uploads and say they cannot install them. */
describe('R packages on a webR node', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({ [APP]: { adminPrincipals: ['alice'] } })),
      R_ENGINE: 'webr',
    });
  }, 180_000);
  afterAll(async () => {
    await service?.stop();
  });

  it('reports each package as not supported by the webR engine', async () => {
    const url = `${service.url}${REST}/admin/packages`;
    const headers = { ...ALICE, 'X-SVC-Application-Name': APP };
    const put = await request(`${url}/svcdemo`, {
      method: 'PUT',
      headers: { ...headers, ...GZIP },
      body: buildPackage('svcdemo', '1.0', { tar: true }),
    });
    expect(put.status).toBe(201);
    const node = await waitFor(
      async () => {
        const answer = await request(url, { headers: { ...headers, ...JSON_ACCEPT } });
        const body = JSON.parse(answer.text) as { packages: { package?: PackageEntry } };
        const nodes = body.packages.package ? nodesOf(body.packages.package) : [];
        return nodes[0];
      },
      30_000,
      'the webR node to report',
    );
    expect(node).toMatchObject({
      state: 'unsupported',
      output: expect.stringContaining('not supported by the webR engine') as string,
    });
  }, 240_000);
});
