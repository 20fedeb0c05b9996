import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { Controller, Get, INestApplication, Module, Post, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { APP_FILTER, APP_GUARD, NestFactory } from '@nestjs/core';
import { RunningService, startService } from '../../src/bootstrap';
import { ApiExceptionFilter } from '../../src/common/api-exception.filter';
import { NegotiationGuard } from '../../src/common/negotiation.guard';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { ConfigModule } from '../../src/config/config.module';
import { explodeZip } from '../../src/jobs/job-archive';
import { QueueRepository } from '../../src/queue/queue.repository';
import { Access } from '../../src/security/access.decorator';
import { AccessGuard } from '../../src/security/access.guard';
import { RequestAccessService } from '../../src/security/request-access.service';
import { hashSecret, verifySecret } from '../../src/security/secret-hash';
import { SecurityModule } from '../../src/security/security.module';
import { parseXml, REST, waitForResult } from '../support/rest-client';
import { spawnService } from '../support/service-process';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';
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
  service: RunningService;
  url: string;
  logs(): string;
  stop(): Promise<void>;
}

/** The whole service in this process, logging at trace level into memory. */
async function startCapturing(env: Record<string, string>): Promise<CapturingService> {
  const database = await createTestDatabase();
  const config = loadConfig(testEnvironment(database, env));
  const lines: string[] = [];
  const logger = new PinoLoggerService('trace', { write: (line: string) => lines.push(line) });
  const service = await startService(config, logger);
  return {
    service,
    url: service.url ?? '',
    logs: () => lines.join(''),
    stop: async () => {
      await service.close();
      await database.drop();
    },
  };
}

/**
 * Which answers mean "allowed": a script job is accepted (202); a function call passes the guard
 * (this branch may still answer 415 for the body, but never 401/403); results are shown (200)
 * and deleted (204).
 */
type Action = 'script' | 'functionCall' | 'readResult' | 'jobStatus' | 'deleteResult';
const ACTIONS: Action[] = ['script', 'functionCall', 'readResult', 'jobStatus', 'deleteResult'];

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
      return appAdmin || (user && flags.scriptSubmissionAllowed) ? 'allowed' : 403;
    case 'functionCall':
      return appAdmin || (user && flags.functionCallAllowed) ? 'allowed' : 403;
  }
}

function isAllowedAnswer(action: Action, status: number): boolean {
  switch (action) {
    case 'script':
      return status === 202;
    case 'functionCall':
      return status !== 401 && status !== 403 && status !== 404;
    case 'readResult':
    case 'jobStatus':
      return status === 200;
    case 'deleteResult':
      return status === 204;
  }
}

describe.each(['basic', 'apiKey'] as const)('AUTH_MODE=%s over HTTP', (mode) => {
  let fixture: Fixture;
  let running: CapturingService;
  let base: string;

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
    // ROLE=api: no worker, so the tests finish jobs themselves and nothing runs R.
    running = await startCapturing({ ...fixture.env, ROLE: 'api' });
    base = running.url;
  });
  afterAll(async () => {
    await running?.stop();
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

  it('matrix: each kind of principal × each action × applications with and without each flag', async () => {
    const readable = new Map<string, string>();
    for (const app of APPS) {
      readable.set(app, await finishedJob(app));
    }
    const mismatches: string[] = [];
    for (const who of WHO) {
      for (const app of APPS) {
        for (const action of ACTIONS) {
          const headers = { ...fixture.credentials[who] };
          let answer: Answer;
          switch (action) {
            case 'script':
              answer = await postJob(base, headers, app);
              break;
            case 'functionCall':
              answer = await postJob(base, headers, app, {
                type: 'application/json',
                content: '{"mean":{"x":[1,2,3]}}',
              });
              break;
            case 'readResult':
              answer = await call(base, `${REST}/results/${app}/${readable.get(app)}`, {
                headers,
              });
              break;
            case 'jobStatus':
              answer = await call(base, `${REST}/jobs/${app}/${readable.get(app)}`, { headers });
              break;
            case 'deleteResult': {
              // Its own result, so an allowed delete does not take another case's away.
              const jobId = await finishedJob(app);
              answer = await call(base, `${REST}/results/${app}/${jobId}`, {
                method: 'DELETE',
                headers,
              });
              const after = await call(base, `${REST}/results/${app}/${jobId}`, {
                headers: fixture.credentials.adminUser,
              });
              // A refused delete leaves the result in place.
              if ((answer.status === 204) !== (after.status === 404)) {
                mismatches.push(
                  `${who} ${action} ${app}: delete ${answer.status}, then ${after.status}`,
                );
              }
              break;
            }
          }
          const expected = expectedAnswer(who, action, app);
          const ok =
            expected === 'allowed'
              ? isAllowedAnswer(action, answer.status)
              : answer.status === expected;
          if (!ok) {
            mismatches.push(`${who} ${action} ${app}: expected ${expected}, got ${answer.status}`);
          }
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('403 says why a submission is refused; 400 for a bad application name comes after authentication', async () => {
    const refused = await postJob(base, fixture.credentials.userByRole, 'calls');
    expect(refused.status).toBe(403);
    expect(parseXml(refused.text).error.message).toContain('scriptSubmissionAllowed');
    const badName = await postJob(base, fixture.credentials.userByRole, 'no-such/app');
    expect(badName.status).toBe(400);
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

@Controller('probe')
class ProbeController {
  constructor(private readonly access: RequestAccessService) {}

  /** Stands in for the form post: the application is known only once the body is read. */
  @Post('form')
  @Access('submitJob')
  async form(@Req() req: Request, @Query('app') app: string): Promise<string> {
    await this.access.authorizeSubmission(req, app, 'script');
    return 'accepted';
  }
  @Post('process')
  @Access('functionCall')
  process(): string {
    return 'called';
  }
  @Get('public')
  @Access('public')
  open(): string {
    return 'public';
  }
  @Get('global')
  @Access('globalAdmin')
  global(): string {
    return 'global';
  }
  @Get('application')
  @Access('applicationAdmin')
  application(): string {
    return 'application';
  }
  @Get('undeclared')
  undeclared(): string {
    return 'undeclared';
  }
}

/**
 * The admin rules over HTTP, on a probe controller (the admin API itself is another module):
 * the real SecurityModule, guard order and error filter.
 */
async function startProbe(
  env: Record<string, string>,
): Promise<{ app: INestApplication; url: string }> {
  const config: AppConfig = loadConfig({ ...env, LOG_LEVEL: 'silent' });
  @Module({
    imports: [ConfigModule.forConfig(config), SecurityModule],
    controllers: [ProbeController],
    providers: [
      { provide: APP_GUARD, useExisting: AccessGuard },
      { provide: APP_GUARD, useClass: NegotiationGuard },
      { provide: APP_FILTER, useClass: ApiExceptionFilter },
    ],
  })
  class ProbeModule {}
  const app = await NestFactory.create(ProbeModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as import('node:http').Server;
  const { port } = server.address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}` };
}

describe('admin rules and undeclared routes', () => {
  const apps: INestApplication[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });
  async function probe(env: Record<string, string>): Promise<string> {
    const { app, url } = await startProbe(env);
    apps.push(app);
    return url;
  }

  it('with no admin configured, the admin rules answer 403 saying how to configure one', async () => {
    for (const env of [{}, { AUTH_MODE: 'basic' }] as Array<Record<string, string>>) {
      const url = await probe(env);
      for (const path of ['/probe/global', '/probe/application']) {
        const answer = await call(url, path, {
          headers: { 'X-SVC-Application-Name': 'demo', ...basic('root', 'x') },
        });
        expect(answer.status).toBe(403);
        expect(parseXml(answer.text).error.message).toMatch(/set ADMIN_USER and ADMIN_PASSWORD/i);
      }
    }
  });

  it('AUTH_MODE=none: only ADMIN_USER (HTTP Basic) passes the admin rules; public is open; undeclared is denied', async () => {
    const url = await probe({ ADMIN_USER, ADMIN_PASSWORD });
    const anonymous = await call(url, '/probe/global');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Basic realm="svc"/);
    expect(
      (await call(url, '/probe/global', { headers: basic(ADMIN_USER, 'nope'), from: '127.0.0.14' }))
        .status,
    ).toBe(401);
    const admin = basic(ADMIN_USER, ADMIN_PASSWORD);
    expect((await call(url, '/probe/global', { headers: admin })).status).toBe(200);
    expect(
      (
        await call(url, '/probe/application', {
          headers: { ...admin, 'X-SVC-Application-Name': 'demo' },
        })
      ).status,
    ).toBe(200);
    expect((await call(url, '/probe/public')).status).toBe(200);
    const undeclared = await call(url, '/probe/undeclared', { headers: admin });
    expect(undeclared.status).toBe(403);
    expect(parseXml(undeclared.text).error.message).toContain('declares no access rule');
  });

  it('AUTH_MODE=basic: application admins by principal or role for their application; global admins everywhere', async () => {
    const fixture = await securityFixture('basic');
    const url = await probe(fixture.env);
    const ask = (who: Who, path: string, app = 'both') =>
      call(url, path, {
        headers: { ...fixture.credentials[who], 'X-SVC-Application-Name': app },
      }).then((answer) => answer.status);
    for (const who of [
      'appAdminByPrincipal',
      'appAdminByRole',
      'globalAdmin',
      'adminUser',
    ] as Who[]) {
      expect([who, await ask(who, '/probe/application')]).toEqual([who, 200]);
    }
    for (const who of ['userByPrincipal', 'userByRole', 'stranger'] as Who[]) {
      expect([who, await ask(who, '/probe/application')]).toEqual([who, 403]);
    }
    expect(await ask('appAdminByRole', '/probe/application', 'unlisted')).toBe(403);
    expect(await ask('anonymous', '/probe/application')).toBe(401);
    expect(await ask('globalAdmin', '/probe/global')).toBe(200);
    expect(await ask('adminUser', '/probe/global')).toBe(200);
    expect(await ask('appAdminByPrincipal', '/probe/global')).toBe(403);
    // The synchronous function call (POST /process): functionCallAllowed, or an admin.
    const process = (who: Who, app: string) =>
      call(url, '/probe/process', {
        method: 'POST',
        headers: { ...fixture.credentials[who], 'X-SVC-Application-Name': app },
      }).then((answer) => answer.status);
    expect(await process('userByPrincipal', 'calls')).toBe(201);
    expect(await process('userByPrincipal', 'scripts')).toBe(403);
    expect(await process('appAdminByRole', 'scripts')).toBe(201);
    expect(await process('stranger', 'calls')).toBe(403);
    expect(await process('anonymous', 'calls')).toBe(401);
  });
});

describe('a submission whose application is in the body (the form post hook)', () => {
  it('the guard only authenticates; authorizeSubmission applies the application rules', async () => {
    const fixture = await securityFixture('basic');
    const { app, url } = await startProbe(fixture.env);
    try {
      const post = (who: Who, application: string) =>
        call(url, `/probe/form?app=${application}`, {
          method: 'POST',
          headers: {
            ...fixture.credentials[who],
            'Content-Type': 'multipart/form-data; boundary=x',
          },
          body: '--x--\r\n',
        });
      const anonymous = await post('anonymous', 'scripts');
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers['www-authenticate']).toMatch(/^Basic /);
      expect((await post('userByRole', 'scripts')).status).toBe(201);
      expect((await post('userByRole', 'calls')).status).toBe(403);
      expect((await post('stranger', 'scripts')).status).toBe(403);
      expect((await post('appAdminByPrincipal', 'neither')).status).toBe(201);
      expect((await post('globalAdmin', 'unlisted')).status).toBe(201);
    } finally {
      await app.close();
    }
  });
});

describe('npm run hash-secret', () => {
  const cli = join(__dirname, '..', '..', 'dist', 'src', 'cli', 'hash-secret.js');
  function run(args: string[], input: string): Promise<{ code: number; stdout: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [cli, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
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
