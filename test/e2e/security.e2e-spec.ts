import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { Controller, Get, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, NestFactory } from '@nestjs/core';
import { MASK } from '../../src/admin/masked-configuration';
import { ApiExceptionFilter } from '../../src/common/api-exception.filter';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { loadConfig } from '../../src/config/app-config';
import { ConfigModule } from '../../src/config/config.module';
import { explodeZip } from '../../src/jobs/job-archive';
import { QueueRepository } from '../../src/queue/queue.repository';
import { AccessGuard } from '../../src/security/access.guard';
import { hashSecret, verifySecret } from '../../src/common/secret-hash';
import { SecurityModule } from '../../src/security/security.module';
import { fileField, postForm, textField } from '../support/form-client';
import { parseXml, REST, waitForResult } from '../support/rest-client';
import { spawnService } from '../support/service-process';
import {
  createTestDatabase,
  startTestService,
  storedJobRows,
  TestDatabase,
  testEnvironment,
  TestService,
} from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/** Cheap hashes keep start-up and first checks fast; the format is the production one. */
const CHEAP = { N: 1024, r: 8, p: 1 };
const ADMIN_USER = 'root';
const ADMIN_PASSWORD = `root-${randomBytes(12).toString('hex')}`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/**
 * One HTTP request from a chosen loopback address (127.0.0.0/8 all reach the service), so the
 * failure limiter, which counts per client address, can be exercised without locking out the
 * other tests.
 */
function call(
  base: string,
  path: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: Buffer | string;
    from?: string;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${base}${path}`,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        localAddress: options.from ?? '127.0.0.1',
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const basic = (name: string, password: string) => ({
  Authorization: `Basic ${Buffer.from(`${name}:${password}`).toString('base64')}`,
});

const SCRIPT_ZIP = makeZip([{ name: 'job.R', content: 'writeLines("ok", "ok.txt")\n' }]);

/** POST /jobs for `app` with the given credentials; a ZIP script job unless told otherwise. */
async function postJob(
  base: string,
  credentials: Record<string, string>,
  app: string,
  body?: { type: string; content: Buffer | string },
): Promise<Answer> {
  return call(base, `${REST}/jobs`, {
    method: 'POST',
    headers: {
      ...credentials,
      'Content-Type': body?.type ?? 'application/zip',
      'X-SVC-Application-Name': app,
    },
    body: body?.content ?? (await SCRIPT_ZIP),
  });
}

type Mode = 'basic' | 'apiKey';
type Who =
  | 'anonymous'
  | 'stranger'
  | 'userByPrincipal'
  | 'userByRole'
  | 'appAdminByPrincipal'
  | 'appAdminByRole'
  | 'globalAdmin'
  | 'adminUser';

/** The configured principals: name and roles. Rules below refer to them by name or role. */
const PEOPLE: Record<Exclude<Who, 'anonymous' | 'adminUser'>, { name: string; roles: string[] }> = {
  stranger: { name: 'mallory', roles: ['guest'] },
  userByPrincipal: { name: 'ursula', roles: [] },
  userByRole: { name: 'rolf', roles: ['analyst'] },
  appAdminByPrincipal: { name: 'adam', roles: [] },
  appAdminByRole: { name: 'ada', roles: ['app-admin'] },
  globalAdmin: { name: 'gina', roles: [] },
};
const WHO: Who[] = ['anonymous', ...(Object.keys(PEOPLE) as Who[]), 'adminUser'];

const FLAGS: Record<string, { functionCallAllowed?: boolean; scriptSubmissionAllowed?: boolean }> =
  {
    both: { functionCallAllowed: true, scriptSubmissionAllowed: true },
    scripts: { scriptSubmissionAllowed: true },
    calls: { functionCallAllowed: true },
    neither: {},
  };
/** `unlisted` has no entry in APPLICATION_SECURITY: only global admins reach it. */
const APPS = [...Object.keys(FLAGS), 'unlisted'];

interface Fixture {
  env: Record<string, string>;
  /** Credentials of each kind of principal, as request headers. */
  credentials: Record<Who, Record<string, string>>;
  /** Every secret a log line must never hold. */
  secrets: string[];
}

async function securityFixture(mode: Mode): Promise<Fixture> {
  const users: Record<string, unknown> = {};
  const apiKeys: Record<string, unknown> = {};
  const credentials: Partial<Record<Who, Record<string, string>>> = {
    anonymous: {},
    adminUser: basic(ADMIN_USER, ADMIN_PASSWORD),
  };
  const secrets = [ADMIN_PASSWORD, basic(ADMIN_USER, ADMIN_PASSWORD).Authorization];
  let index = 0;
  for (const [who, { name, roles }] of Object.entries(PEOPLE)) {
    const secret = `${name}-${randomBytes(12).toString('hex')}`;
    if (mode === 'basic') {
      users[name] = { passwordHash: await hashSecret(secret, CHEAP), roles };
      credentials[who as Who] = basic(name, secret);
    } else {
      const id = `${name}-key`;
      apiKeys[id] = { principal: name, roles, keyHash: await hashSecret(secret, CHEAP) };
      // Both ways of sending a key are used.
      credentials[who as Who] =
        index++ % 2 === 0
          ? { 'X-SVC-API-Key': `${id}.${secret}` }
          : { Authorization: `Bearer ${id}.${secret}` };
    }
    secrets.push(secret, ...Object.values(credentials[who as Who] ?? {}));
  }
  const rules = {
    userPrincipals: [PEOPLE.userByPrincipal.name],
    userRoles: ['analyst'],
    adminPrincipals: [PEOPLE.appAdminByPrincipal.name],
    adminRoles: ['app-admin'],
  };
  const applicationSecurity = Object.fromEntries(
    Object.entries(FLAGS).map(([app, flags]) => [app, { ...rules, ...flags }]),
  );
  return {
    env: {
      AUTH_MODE: mode,
      ADMIN_USER,
      ADMIN_PASSWORD,
      USERS: JSON.stringify(users),
      API_KEYS: JSON.stringify(apiKeys),
      GLOBAL_ADMINS: JSON.stringify({ principals: [PEOPLE.globalAdmin.name] }),
      APPLICATION_SECURITY: JSON.stringify(applicationSecurity),
      AUTH_MAX_FAILURES: '5',
      AUTH_FAILURE_WINDOW_SECONDS: '600',
    },
    credentials: credentials as Record<Who, Record<string, string>>,
    secrets,
  };
}

interface CapturingService {
  service: TestService;
  logs(): string;
}

/** The whole service in this process, logging at trace level into memory. */
async function startCapturing(env: Record<string, string>): Promise<CapturingService> {
  const lines: string[] = [];
  const logger = new PinoLoggerService('trace', { write: (line: string) => lines.push(line) });
  return { service: await startTestService(env, logger), logs: () => lines.join('') };
}

/**
 * The actions of the matrix. Submissions: a ZIP script job, an XML or JSON function-call job, a
 * browser form (the application named in a form field), a synchronous call (`/process`). Results:
 * read, status, delete. Admin API: list and write an application's catalog, read the
 * configuration.
 */
const ACTIONS = [
  'script',
  'xmlCall',
  'jsonCall',
  'form',
  'process',
  'readResult',
  'jobStatus',
  'deleteResult',
  'catalogList',
  'catalogWrite',
  'configuration',
] as const;
type Action = (typeof ACTIONS)[number];

/** The rules of SPEC §10 as answers. */
function expectedAnswer(who: Who, action: Action, app: string): 'allowed' | 401 | 403 | 404 {
  if (who === 'anonymous') {
    return 401;
  }
  if (who === 'globalAdmin' || who === 'adminUser') {
    return 'allowed';
  }
  const flags = FLAGS[app];
  const listed = flags !== undefined;
  const appAdmin = listed && (who === 'appAdminByPrincipal' || who === 'appAdminByRole');
  const user = appAdmin || (listed && (who === 'userByPrincipal' || who === 'userByRole'));
  switch (action) {
    case 'readResult':
    case 'jobStatus':
    case 'deleteResult':
      return user ? 'allowed' : 404;
    case 'script':
    case 'form':
      return appAdmin || (user && flags.scriptSubmissionAllowed) ? 'allowed' : 403;
    case 'xmlCall':
    case 'jsonCall':
    case 'process':
      return appAdmin || (user && flags.functionCallAllowed) ? 'allowed' : 403;
    case 'catalogList':
    case 'catalogWrite':
      return appAdmin ? 'allowed' : 403;
    case 'configuration':
      return 403;
  }
}

/** Which answers mean "allowed". */
function isAllowedAnswer(action: Action, status: number): boolean {
  switch (action) {
    case 'script':
    case 'xmlCall':
    case 'jsonCall':
    case 'form':
      return status === 202;
    case 'deleteResult':
      return status === 204;
    case 'catalogWrite':
      // Created by the first admin to write it, replaced by the others.
      return status === 201 || status === 204;
    case 'process':
    case 'readResult':
    case 'jobStatus':
    case 'catalogList':
    case 'configuration':
      return status === 200;
  }
}

/** Function calls: submitted as jobs they only wait in the queue (no worker); /process runs them. */
const CALL_XML = '<call RFunction="hello"/>';
const CALL_JSON = '{"RFunction":"hello"}';
const FORM_FILE = fileField('job.R', 'writeLines("ok", "ok.txt")\n', 'text/plain');

/** Every application's R_FUNCTIONS: the JSON entry point answers with what it was sent. */
const ECHO_FUNCTION = 'svcJsonService <- function(payload) paste0("called:", payload)\n';

describe.each(['basic', 'apiKey'] as const)('AUTH_MODE=%s over HTTP', (mode) => {
  let fixture: Fixture;
  let running: CapturingService;
  let base: string;

  /** A synchronous function call (POST /process) with the given headers. */
  function callProcess(headers: Record<string, string>): Promise<Answer> {
    return call(base, `${REST}/process`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: CALL_JSON,
    });
  }

  /** Submits a script job as ADMIN_USER and completes it with a text result, as a worker would. */
  async function finishedJob(app: string): Promise<string> {
    const answer = await postJob(base, fixture.credentials.adminUser, app);
    expect(answer.status).toBe(202);
    const jobId = parseXml(answer.text).jobToken.jobId;
    const data = Buffer.from('result\n');
    await running.service.app.get(QueueRepository).complete(jobId, null, {
      success: true,
      type: 'txt',
      contentType: 'text/plain',
      data,
      sha256: createHash('sha256').update(data).digest('hex'),
    });
    return jobId;
  }

  beforeAll(async () => {
    fixture = await securityFixture(mode);
    // ROLE=api: no worker, so the tests finish jobs themselves; R runs only for /process.
    running = await startCapturing({ ...fixture.env, ROLE: 'api' });
    base = running.service.url;
    // Every application gets a function to call, loaded through the admin API by an admin.
    for (const app of APPS) {
      const loaded = await call(base, `${REST}/admin/catalog/R_FUNCTIONS/echo.R`, {
        method: 'PUT',
        headers: { ...fixture.credentials.adminUser, 'X-SVC-Application-Name': app },
        body: ECHO_FUNCTION,
      });
      expect(loaded.status).toBe(201);
    }
  });
  afterAll(async () => {
    await running?.service.stop();
  });

  it('401 with WWW-Authenticate and an error body for missing, wrong or foreign credentials', async () => {
    const from = '127.0.0.11';
    const challenge =
      mode === 'basic' ? /^Basic realm="svc"/ : /^Bearer realm="svc", Basic realm="svc"/;
    const cases: Array<Record<string, string>> = [
      {},
      basic(PEOPLE.userByRole.name, 'wrong-password'),
      basic(ADMIN_USER, 'wrong-password'),
      mode === 'basic'
        ? { Authorization: 'Bearer rolf-key.whatever' }
        : { 'X-SVC-API-Key': 'rolf-key.wrong-secret' },
    ];
    for (const headers of cases) {
      const answer = await call(base, `${REST}/results/both`, { headers, from });
      expect(answer.status).toBe(401);
      expect(answer.headers['www-authenticate']).toMatch(challenge);
      expect(answer.headers['content-type']).toMatch(/^application\/vnd\.svc\+xml/);
      expect(parseXml(answer.text).error.status).toBe('401');
    }
    // JSON when asked; and authentication comes before content negotiation (no 406 first).
    const json = await call(base, `${REST}/results/both`, {
      headers: { Accept: 'application/vnd.svc+json' },
      from,
    });
    expect(json.status).toBe(401);
    expect(JSON.parse(json.text)).toMatchObject({ error: { status: 401 } });
    const html = await call(base, `${REST}/results/both`, {
      headers: { Accept: 'text/html' },
      from,
    });
    expect(html.status).toBe(401);
    // Public routes need nothing.
    const unknownPath = await call(base, `${REST}/nothing-here`, { from });
    expect(unknownPath.status).toBe(404);
  });

  /** One action of the matrix as `who` on `app`; a follow-up check may add to `mismatches`. */
  async function perform(
    who: Who,
    action: Action,
    app: string,
    readable: string,
    mismatches: string[],
  ): Promise<number> {
    const headers = fixture.credentials[who];
    const inApp = { ...headers, 'X-SVC-Application-Name': app };
    switch (action) {
      case 'script':
        return (await postJob(base, headers, app)).status;
      case 'xmlCall':
        return (await postJob(base, headers, app, { type: 'application/xml', content: CALL_XML }))
          .status;
      case 'jsonCall':
        return (await postJob(base, headers, app, { type: 'application/json', content: CALL_JSON }))
          .status;
      case 'form':
        return (
          await postForm(base, [textField('X-SVC-Application-Name', app), FORM_FILE], headers)
        ).status;
      case 'process':
        return (await callProcess(inApp)).status;
      case 'readResult':
        return (await call(base, `${REST}/results/${app}/${readable}`, { headers })).status;
      case 'jobStatus':
        return (await call(base, `${REST}/jobs/${app}/${readable}`, { headers })).status;
      case 'deleteResult': {
        // Its own result, so an allowed delete does not take another case's away.
        const jobId = await finishedJob(app);
        const answer = await call(base, `${REST}/results/${app}/${jobId}`, {
          method: 'DELETE',
          headers,
        });
        const after = await call(base, `${REST}/results/${app}/${jobId}`, {
          headers: fixture.credentials.adminUser,
        });
        // A refused delete leaves the result in place.
        if ((answer.status === 204) !== (after.status === 404)) {
          mismatches.push(`${who} ${action} ${app}: delete ${answer.status}, then ${after.status}`);
        }
        return answer.status;
      }
      case 'catalogList':
        return (await call(base, `${REST}/admin/catalog`, { headers: inApp })).status;
      case 'catalogWrite': {
        const mark = `# written by ${who}\n`;
        const answer = await call(base, `${REST}/admin/catalog/R_SCRIPTS/x.R`, {
          method: 'PUT',
          headers: inApp,
          body: mark,
        });
        const after = await call(base, `${REST}/admin/catalog/R_SCRIPTS/x.R`, {
          headers: { ...fixture.credentials.adminUser, 'X-SVC-Application-Name': app },
        });
        // A refused write leaves the file as it was.
        if (answer.status < 300 !== (after.text === mark)) {
          mismatches.push(`${who} ${action} ${app}: write ${answer.status}, then "${after.text}"`);
        }
        return answer.status;
      }
      case 'configuration':
        return (await call(base, `${REST}/admin/system/configuration`, { headers: inApp })).status;
    }
  }

  it('matrix: each kind of principal × each action × applications with and without each flag', async () => {
    const readable = new Map<string, string>();
    for (const app of APPS) {
      readable.set(app, await finishedJob(app));
    }
    const mismatches: string[] = [];
    for (const who of WHO) {
      for (const app of APPS) {
        for (const action of ACTIONS) {
          const status = await perform(who, action, app, readable.get(app) ?? '', mismatches);
          const expected = expectedAnswer(who, action, app);
          const ok = expected === 'allowed' ? isAllowedAnswer(action, status) : status === expected;
          if (!ok) {
            mismatches.push(`${who} ${action} ${app}: expected ${expected}, got ${status}`);
          }
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('403 says why a submission is refused; 400 for a bad application name comes after authentication', async () => {
    const before = await storedJobRows(running.service);
    const refused = await postJob(base, fixture.credentials.userByRole, 'calls');
    expect(refused.status).toBe(403);
    expect(parseXml(refused.text).error.message).toContain('scriptSubmissionAllowed');
    expect(await storedJobRows(running.service)).toEqual(before);
    const badName = await postJob(base, fixture.credentials.userByRole, 'no-such/app');
    expect(badName.status).toBe(400);
  });

  it('the form post (application in the body): 401 with a challenge, 403 with the reason', async () => {
    const form = (who: Who, app: string) =>
      postForm(
        base,
        [textField('X-SVC-Application-Name', app), FORM_FILE],
        fixture.credentials[who],
      );
    const anonymous = await form('anonymous', 'scripts');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^(Basic|Bearer) realm="svc"/);
    const before = await storedJobRows(running.service);
    const refused = await form('userByRole', 'calls');
    expect(refused.status).toBe(403);
    expect(parseXml(refused.text).error.message).toContain('scriptSubmissionAllowed');
    // Refused before anything of it is kept: no job, no file, no byte of the upload.
    expect(await storedJobRows(running.service)).toEqual(before);
  });

  it('POST /process answers with the function’s string, or says why it is refused', async () => {
    const allowed = await callProcess({
      ...fixture.credentials.userByPrincipal,
      'X-SVC-Application-Name': 'calls',
    });
    expect(allowed.status).toBe(200);
    expect(allowed.text).toBe(`called:${CALL_JSON}`);
    const refused = await callProcess({
      ...fixture.credentials.userByPrincipal,
      'X-SVC-Application-Name': 'scripts',
    });
    expect(refused.status).toBe(403);
    // The request sent JSON: its error is plain JSON (docs/api.md, representations).
    expect((JSON.parse(refused.text) as { message: string }).message).toContain(
      'functionCallAllowed',
    );
  });

  it('the admin configuration shows the security settings masked and none of their secrets', async () => {
    const answer = await call(base, `${REST}/admin/system/configuration`, {
      headers: fixture.credentials.globalAdmin,
    });
    expect(answer.status).toBe(200);
    const configuration = JSON.parse(answer.text) as Record<string, unknown>;
    expect(configuration.adminPassword).toBe(MASK);
    // The mode's own credentials are set and masked; the other map is empty and shown as such.
    const [used, unused] = mode === 'basic' ? ['users', 'apiKeys'] : ['apiKeys', 'users'];
    expect(configuration[used]).toBe(MASK);
    expect(configuration[unused]).toEqual({});
    for (const secret of fixture.secrets) {
      expect(answer.text).not.toContain(secret);
    }
    expect(answer.text).not.toContain('scrypt$');
    // Who is an admin or a user is not a secret.
    expect(configuration.globalAdmins).toEqual({ principals: [PEOPLE.globalAdmin.name] });
  });

  it('404 hiding: a result of an application the caller may not see looks exactly like a missing one', async () => {
    const jobId = await finishedJob('neither');
    const missingId = '00000000-0000-4000-8000-000000000000';
    const stranger = fixture.credentials.stranger;
    const admin = fixture.credentials.adminUser;
    const paths = (id: string) => [
      ['GET', `${REST}/results/neither/${id}`],
      ['DELETE', `${REST}/results/neither/${id}`],
      ['GET', `${REST}/jobs/neither/${id}`],
      ['GET', `${REST}/result/neither/${id}.txt`],
    ];
    const existing = paths(jobId);
    const missing = paths(missingId);
    for (let i = 0; i < existing.length; i++) {
      const hidden = await call(base, existing[i][1], {
        method: existing[i][0],
        headers: stranger,
      });
      const absent = await call(base, missing[i][1], { method: missing[i][0], headers: admin });
      expect([existing[i][0], hidden.status]).toEqual([existing[i][0], 404]);
      expect(absent.status).toBe(404);
      expect(hidden.text.replaceAll(jobId, '<id>')).toBe(absent.text.replaceAll(missingId, '<id>'));
    }
    // The result is still there for those who may see it.
    expect((await call(base, `${REST}/results/neither/${jobId}`, { headers: admin })).status).toBe(
      200,
    );
    const list = await call(base, `${REST}/results/neither`, { headers: stranger });
    expect(list.status).toBe(404);
    expect(list.text).not.toContain(jobId);
    // Malformed ids are the same 400 as for anyone.
    expect(
      (await call(base, `${REST}/results/neither/not-a-uuid`, { headers: stranger })).status,
    ).toBe(400);
  });

  it('429 with Retry-After once an address has failed AUTH_MAX_FAILURES times; other addresses are unaffected', async () => {
    const from = '127.0.0.12';
    const wrong = basic(PEOPLE.userByRole.name, 'not-the-password');
    for (let i = 0; i < 5; i++) {
      expect((await call(base, `${REST}/results/both`, { headers: wrong, from })).status).toBe(401);
    }
    const blocked = await call(base, `${REST}/results/both`, { headers: wrong, from });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect(parseXml(blocked.text).error.status).toBe('429');
    // Not even the right credentials are checked from that address during the window.
    const right = await call(base, `${REST}/results/both`, {
      headers: fixture.credentials.userByRole,
      from,
    });
    expect(right.status).toBe(429);
    const elsewhere = await call(base, `${REST}/results/both`, {
      headers: fixture.credentials.userByRole,
      from: '127.0.0.13',
    });
    expect(elsewhere.status).toBe(200);
  });

  it('no secret reaches the logs (captured at trace level)', () => {
    const logs = running.logs();
    // The capture works: failed authentications were logged, with the address.
    expect(logs).toMatch(/authentication failed from [^"]*127\.0\.0\.1[123]/);
    for (const secret of fixture.secrets) {
      expect(logs).not.toContain(secret);
    }
    expect(logs).not.toContain('not-the-password');
    expect(logs).not.toContain('wrong-password');
  });
});

const ADMIN_ROUTES: Array<[method: string, path: string]> = [
  ['GET', `${REST}/admin/catalog`],
  ['PUT', `${REST}/admin/catalog/R_SCRIPTS/x.R`],
  ['GET', `${REST}/admin/system/configuration`],
  ['GET', `${REST}/admin/statistics`],
  ['GET', `${REST}/admin/statistics?application=demo`],
];

describe('the admin API without admins, and with AUTH_MODE=none', () => {
  /** Runs `check` against an API node started with `env`, then stops it. */
  async function withService(
    env: Record<string, string>,
    check: (base: string) => Promise<void>,
  ): Promise<void> {
    const service = await startTestService({ ...env, ROLE: 'api' });
    try {
      await check(service.url);
    } finally {
      await service.stop();
    }
  }
  const onAdminRoute = (
    base: string,
    [method, path]: [string, string],
    headers: Record<string, string>,
    from?: string,
  ) =>
    call(base, path, {
      method,
      headers: { ...headers, 'X-SVC-Application-Name': 'demo' },
      body: method === 'PUT' ? '# x\n' : undefined,
      from,
    });

  it('with no admin configured, the admin API answers 403 saying how to configure one', async () => {
    for (const env of [{}, { AUTH_MODE: 'basic' }] as Array<Record<string, string>>) {
      await withService(env, async (base) => {
        for (const route of ADMIN_ROUTES) {
          const answer = await onAdminRoute(base, route, basic('root', 'x'));
          expect([route[1], answer.status]).toEqual([route[1], 403]);
          expect(parseXml(answer.text).error.message).toMatch(/set ADMIN_USER and ADMIN_PASSWORD/i);
        }
      });
    }
  });

  it('AUTH_MODE=none: only ADMIN_USER (HTTP Basic) passes the admin rules; public routes are open', async () => {
    // The basic fixture's users, global and application admins exist in the configuration, but
    // with AUTH_MODE=none none of them is an admin.
    const fixture = await securityFixture('basic');
    await withService(
      { ...fixture.env, AUTH_MODE: 'none', AUTH_MAX_FAILURES: '100' },
      async (base) => {
        for (const route of ADMIN_ROUTES) {
          const anonymous = await onAdminRoute(base, route, {});
          expect([route[1], anonymous.status]).toEqual([route[1], 401]);
          expect(anonymous.headers['www-authenticate']).toMatch(/^Basic realm="svc"/);
          const wrong = await onAdminRoute(base, route, basic(ADMIN_USER, 'nope'), '127.0.0.14');
          expect([route[1], wrong.status]).toEqual([route[1], 401]);
          for (const who of ['globalAdmin', 'appAdminByPrincipal', 'appAdminByRole'] as Who[]) {
            const answer = await onAdminRoute(base, route, fixture.credentials[who], '127.0.0.14');
            expect([route[1], who, answer.status]).toEqual([route[1], who, 401]);
          }
          const admin = await onAdminRoute(base, route, fixture.credentials.adminUser);
          expect([route[1], admin.status]).toEqual([route[1], route[0] === 'PUT' ? 201 : 200]);
        }
        expect((await call(base, `${REST}/system/health/live`)).status).toBe(200);
      },
    );
  });
});

/**
 * A route without @Access does not exist in the service (access-coverage.spec.ts makes sure), so
 * the guard's deny-by-default can only be shown on a module made for it: one undeclared route
 * behind the real SecurityModule, guard and error filter.
 */
@Controller('undeclared')
class UndeclaredController {
  @Get()
  undeclared(): string {
    return 'undeclared';
  }
}

describe('deny by default', () => {
  it('a route that declares no access rule answers 403, even to ADMIN_USER', async () => {
    const config = loadConfig({ ADMIN_USER, ADMIN_PASSWORD, LOG_LEVEL: 'silent' });
    @Module({
      imports: [ConfigModule.forConfig(config), SecurityModule],
      controllers: [UndeclaredController],
      providers: [
        { provide: APP_GUARD, useExisting: AccessGuard },
        { provide: APP_FILTER, useClass: ApiExceptionFilter },
      ],
    })
    class UndeclaredModule {}
    const app = await NestFactory.create(UndeclaredModule, { logger: false });
    try {
      await app.listen(0, '127.0.0.1');
      const answer = await call(await app.getUrl(), '/undeclared', {
        headers: basic(ADMIN_USER, ADMIN_PASSWORD),
      });
      expect(answer.status).toBe(403);
      expect(parseXml(answer.text).error.message).toContain('declares no access rule');
    } finally {
      await app.close();
    }
  });
});

describe('svc hash-secret', () => {
  const cli = join(__dirname, '..', '..', 'bin', 'svc.js');
  function run(args: string[], input: string): Promise<{ code: number; stdout: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [cli, 'hash-secret', ...args], {
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.once('exit', (code) => resolve({ code: code ?? -1, stdout }));
      child.stdin.end(input);
    });
  }

  it('hashes a password read from stdin', async () => {
    const { code, stdout } = await run([], 's3cret pass\n');
    expect(code).toBe(0);
    const hash = stdout.trim();
    expect(hash).toMatch(/^scrypt\$/);
    await expect(verifySecret('s3cret pass', hash)).resolves.toBe(true);
  });

  it('makes an API key and its API_KEYS entry, which the configuration accepts', async () => {
    const { code, stdout } = await run(['--api-key', 'reporting', '--roles', 'analyst'], '');
    expect(code).toBe(0);
    const [key, entryJson] = stdout.trim().split('\n');
    const entry = JSON.parse(entryJson) as Record<string, { principal: string; keyHash: string }>;
    const [id] = Object.keys(entry);
    expect(key.startsWith(`${id}.`)).toBe(true);
    expect(entry[id]).toMatchObject({ principal: 'reporting', roles: ['analyst'] });
    await expect(verifySecret(key.slice(id.length + 1), entry[id].keyHash)).resolves.toBe(true);
    expect(() => loadConfig({ AUTH_MODE: 'apiKey', API_KEYS: entryJson })).not.toThrow();
  });
});

describe('R jobs see none of the service secrets (SPEC §10)', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database.drop();
  });

  it(`a job that writes Sys.getenv() finds no secret (R_ENGINE=${process.env.R_ENGINE ?? 'auto'})`, async () => {
    const canary = `canary-${randomBytes(8).toString('hex')}`;
    const fixture = await securityFixture('apiKey');
    const env = testEnvironment(database, {
      ...fixture.env,
      SVC_TEST_CANARY_TOKEN: canary,
      LOG_LEVEL: 'warn',
    });
    const service = await spawnService(env);
    try {
      const zip = await makeZip([
        {
          name: 'env.R',
          content:
            'e <- Sys.getenv()\nwriteLines(paste0(names(e), "=", as.character(e)), "env.txt")\n',
        },
      ]);
      const submitted = await postJob(service.url, fixture.credentials.adminUser, 'demo', {
        type: 'application/zip',
        content: zip,
      });
      expect(submitted.status).toBe(202);
      const token = parseXml(submitted.text).jobToken;
      const ready = await waitForResult(token.resultUri, fixture.credentials.adminUser);
      const result = parseXml(ready.text).result;
      expect(result.success).toBe('true');
      const data = await fetch(result.dataUri, { headers: fixture.credentials.adminUser });
      const files = await explodeZip(Buffer.from(await data.arrayBuffer()), {
        maxEntries: 10,
        maxUncompressedBytes: 1e8,
        maxCompressionRatio: 1e6,
      });
      const environment = files.find((file) => file.name === 'env.txt')?.content.toString('utf8');
      expect(environment).toBeDefined();
      const names = (environment ?? '').split('\n').map((line) => line.split('=')[0]);
      // R did list its environment (the test can see a variable when there is one).
      expect(names.length).toBeGreaterThan(3);
      for (const name of [
        'DATABASE_URL',
        'ADMIN_USER',
        'ADMIN_PASSWORD',
        'USERS',
        'API_KEYS',
        'APPLICATION_SECURITY',
        'SVC_TEST_CANARY_TOKEN',
      ]) {
        expect(names).not.toContain(name);
      }
      for (const secret of [canary, ADMIN_PASSWORD, ...fixture.secrets, database.url ?? canary]) {
        expect(environment).not.toContain(secret);
      }
    } finally {
      service.child.kill('SIGTERM');
      await service.exited();
    }
  });
});
