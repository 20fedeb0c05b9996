import { ROOT, ALICE, BOB, basicUsersEnvironment } from '../support/admin-auth';
import { postZip } from '../support/rest-client';
import { ServiceProcess, spawnNodes, stopServices } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const APPLICATIONS = '/svc/api/rest/admin/applications';
const SECRET = 'callback-secret-0123456789';

async function settingsEnvironment(): Promise<Record<string, string>> {
  return {
    ...(await basicUsersEnvironment({ lab: { userPrincipals: ['alice'] } })),
    // The applications the tests change are named by the configuration: settings for a name
    // nothing knows are made only with If-None-Match: * (tested on its own below).
    APPLICATION_SETTINGS: JSON.stringify({
      lab: { callbackHosts: ['example.org'], callbackSecret: SECRET, resultRetentionHours: 5 },
      race: {},
      shared: {},
      slotted: {},
      strict: {},
      quota: {},
    }),
    ROLE: 'api',
    AUTH_MAX_FAILURES: '1000',
  };
}

async function read(base: string, app: string, headers = ROOT): Promise<Response> {
  return fetch(`${base}${APPLICATIONS}/${app}`, { headers });
}

async function put(
  base: string,
  app: string,
  body: unknown,
  ifMatch: string | null,
  headers = ROOT,
): Promise<Response> {
  return fetch(`${base}${APPLICATIONS}/${app}`, {
    method: 'PUT',
    headers: {
      ...headers,
      'Content-Type': 'application/json',
      ...(ifMatch === null ? {} : { 'If-Match': ifMatch }),
    },
    body: JSON.stringify(body),
  });
}

/** The status bob gets on the catalog admin API of `app`: 200 once he is one of its admins. */
async function bobOnCatalog(base: string, app: string): Promise<number> {
  const answer = await fetch(`${base}/svc/api/rest/admin/catalog`, {
    headers: { ...BOB, 'X-SVC-Application-Name': app, Accept: 'application/json' },
  });
  return answer.status;
}

function messageOf(text: string): string {
  const match = /<message>([^<]*)<\/message>|"message"\s*:\s*"([^"]*)"/.exec(text);
  return match?.[1] ?? match?.[2] ?? text;
}

describe('application rights and settings at run time', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService(await settingsEnvironment());
  });
  afterAll(async () => {
    await service.stop();
  });

  it('lists every application known from the catalog, settings and jobs, with its jobs', async () => {
    const catalog = await fetch(`${service.url}/svc/api/rest/admin/catalog/R_SCRIPTS/listed.R`, {
      method: 'PUT',
      headers: { ...ROOT, 'X-SVC-Application-Name': 'catalogued' },
      body: 'x <- 1\n',
    });
    expect(catalog.status).toBeLessThan(300);
    const answer = await fetch(`${service.url}${APPLICATIONS}`, { headers: ROOT });
    expect(answer.status).toBe(200);
    const { applications } = (await answer.json()) as {
      applications: Array<{
        application: string;
        inCatalog: boolean;
        settings: string;
        jobs: object;
      }>;
    };
    expect(applications.find((a) => a.application === 'lab')).toEqual({
      application: 'lab',
      inCatalog: false,
      settings: 'configuration',
      jobs: { queued: 0, running: 0, succeeded: 0, failed: 0 },
    });
    expect(applications.find((a) => a.application === 'catalogued')).toMatchObject({
      inCatalog: true,
      settings: 'none',
    });
    expect(applications.map((a) => a.application)).not.toContain('misspelt');
    const forbidden = await fetch(`${service.url}${APPLICATIONS}`, { headers: BOB });
    expect(forbidden.status).toBe(403);
  });

  it('404 for an application nothing knows; settings for it only with If-None-Match: *', async () => {
    const missing = await read(service.url, 'misspelt');
    expect(missing.status).toBe(404);
    expect(messageOf(await missing.text())).toContain('If-None-Match: *');
    const quietly = await put(service.url, 'misspelt', { settings: {} }, '"0"');
    expect(quietly.status).toBe(404);
    expect((await read(service.url, 'misspelt')).status).toBe(404);
    const create = (): Promise<Response> =>
      fetch(`${service.url}${APPLICATIONS}/brandnew`, {
        method: 'PUT',
        headers: { ...ROOT, 'Content-Type': 'application/json', 'If-None-Match': '*' },
        body: JSON.stringify({ settings: { resultRetentionHours: 2 } }),
      });
    const created = await create();
    expect(created.status).toBe(200);
    expect(created.headers.get('etag')).toBe('"1"');
    expect((await read(service.url, 'brandnew')).status).toBe(200);
    const again = await create();
    expect(again.status).toBe(412);
    expect(messageOf(await again.text())).toContain('If-Match');
  });

  it('of two creations of one new application sent at once, one is stored and one gets 412', async () => {
    const create = (retention: number): Promise<Response> =>
      fetch(`${service.url}${APPLICATIONS}/twins`, {
        method: 'PUT',
        headers: { ...ROOT, 'Content-Type': 'application/json', 'If-None-Match': '*' },
        body: JSON.stringify({ settings: { resultRetentionHours: retention } }),
      });
    const answers = await Promise.all([create(3), create(4)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 412]);
    expect((await read(service.url, 'twins')).headers.get('etag')).toBe('"1"');
  });

  it('makes no settings for a new application for anyone but a global admin', async () => {
    const answer = await fetch(`${service.url}${APPLICATIONS}/takeover`, {
      method: 'PUT',
      headers: { ...ALICE, 'Content-Type': 'application/json', 'If-None-Match': '*' },
      body: JSON.stringify({ security: { adminPrincipals: ['alice'] } }),
    });
    expect(answer.status).toBe(403);
    expect((await read(service.url, 'takeover')).status).toBe(404);
  });

  it('answers the configured entry as version 0, never the callback secret', async () => {
    const answer = await read(service.url, 'lab');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('etag')).toBe('"0"');
    const text = await answer.text();
    expect(text).not.toContain(SECRET);
    expect(JSON.parse(text)).toEqual({
      application: 'lab',
      source: 'configuration',
      version: 0,
      updatedAt: null,
      updatedBy: null,
      security: { userPrincipals: ['alice'] },
      settings: {
        callbackHosts: ['example.org'],
        resultRetentionHours: 5,
        callbackSecretSet: true,
      },
      slots: null,
    });
  });

  it('replaces the rights under If-Match: the new admin gets in, the secret is kept, the version grows', async () => {
    expect(await bobOnCatalog(service.url, 'lab')).toBe(403);
    const current = (await (await read(service.url, 'lab')).json()) as Record<string, unknown>;
    const changed = await put(
      service.url,
      'lab',
      { ...current, security: { userPrincipals: ['alice'], adminPrincipals: ['bob'] } },
      '"0"',
    );
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).toBe('"1"');
    const body = (await changed.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      source: 'stored',
      version: 1,
      updatedBy: 'user:root',
      security: { userPrincipals: ['alice'], adminPrincipals: ['bob'] },
      settings: {
        callbackHosts: ['example.org'],
        resultRetentionHours: 5,
        callbackSecretSet: true,
      },
      restartRequired: [],
    });
    expect(await bobOnCatalog(service.url, 'lab')).toBe(200);

    // The secret goes with null; the rights go with an empty security.
    const cleared = await put(service.url, 'lab', { settings: { callbackSecret: null } }, '"1"');
    expect(cleared.status).toBe(200);
    expect(await cleared.json()).toMatchObject({
      version: 2,
      security: {},
      settings: { callbackSecretSet: false },
    });
    expect(await bobOnCatalog(service.url, 'lab')).toBe(403);
  });

  it('needs If-Match (428) and refuses an old one (412) without changing anything', async () => {
    const before = await read(service.url, 'lab');
    const etag = before.headers.get('etag') ?? '';
    expect((await put(service.url, 'lab', {}, null)).status).toBe(428);
    const stale = await put(service.url, 'lab', {}, '"0"');
    expect(stale.status).toBe(412);
    expect(messageOf(await stale.text())).toMatch(/changed since that ETag/);
    expect((await put(service.url, 'lab', {}, 'garbage')).status).toBe(412);
    expect((await read(service.url, 'lab')).headers.get('etag')).toBe(etag);
  });

  it('two changes sent at once with the same If-Match: one 200, one 412', async () => {
    const etag = (await read(service.url, 'race')).headers.get('etag');
    expect(etag).toBe('"0"');
    const answers = await Promise.all(
      ['alice', 'bob'].map((name) =>
        put(service.url, 'race', { security: { adminPrincipals: [name] } }, etag),
      ),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 412]);
    const again = await Promise.all(
      ['alice', 'bob'].map((name) =>
        put(service.url, 'race', { security: { adminPrincipals: [name] } }, '"1"'),
      ),
    );
    expect(again.map((answer) => answer.status).sort()).toEqual([200, 412]);
    expect((await read(service.url, 'race')).headers.get('etag')).toBe('"2"');
  });

  it('a limit set at run time holds at once and a raised one lets jobs in again, without a restart', async () => {
    const zip = await makeZip([{ name: 'main.R', content: 'writeLines("hi", "out.txt")\n' }]);
    const submit = () => postZip(service.url, zip, { ...ALICE, 'X-SVC-Application-Name': 'quota' });
    const rights = { userPrincipals: ['alice'], scriptSubmissionAllowed: true };
    const limited = await put(
      service.url,
      'quota',
      { security: rights, settings: { maxQueuedJobs: 1 } },
      '"0"',
    );
    expect(limited.status).toBe(200);
    // ROLE=api runs no jobs: what is queued stays queued.
    expect((await submit()).status).toBe(202);
    const refused = await submit();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(messageOf(refused.text)).toContain('maxQueuedJobs');

    const raised = await put(
      service.url,
      'quota',
      { security: rights, settings: { maxQueuedJobs: 2 } },
      '"1"',
    );
    expect(raised.status).toBe(200);
    expect((await submit()).status).toBe(202);
    expect((await submit()).status).toBe(429);
  });

  it('says that a changed slot count needs a restart', async () => {
    const changed = await put(service.url, 'slotted', { slots: 2 }, '"0"');
    expect(changed.status).toBe(200);
    expect(await changed.json()).toMatchObject({ slots: 2, restartRequired: ['slots'] });
    const same = await put(service.url, 'slotted', { slots: 2, settings: {} }, '"1"');
    expect(await same.json()).toMatchObject({ slots: 2, restartRequired: [] });
  });

  it.each([
    ['not an object', [], /JSON object/],
    ['an unknown part', { rights: {} }, /^rights: unknown field/],
    ['security not an object', { security: [] }, /^security: must be an object/],
    [
      'a list that is not one',
      { security: { userRoles: 'analyst' } },
      /^security: userRoles must be a list/,
    ],
    [
      'a flag that is not one',
      { security: { scriptSubmissionAllowed: 'yes' } },
      /^security: scriptSubmissionAllowed must be true or false/,
    ],
    ['an unknown right', { security: { superUser: true } }, /^security: unknown setting superUser/],
    [
      'a network flag that is not one',
      { settings: { networkAllowed: 1 } },
      /^settings: networkAllowed must be true or false/,
    ],
    [
      'negative retention',
      { settings: { resultRetentionHours: -1 } },
      /^settings: resultRetentionHours/,
    ],
    [
      'a callback host with a path',
      { settings: { callbackHosts: ['a/b'] } },
      /^settings: callbackHosts/,
    ],
    [
      'a short callback secret',
      { settings: { callbackSecret: 'short' } },
      /^settings: callbackSecret must be a string of at least 16/,
    ],
    ['an unknown setting', { settings: { colour: 'blue' } }, /^settings: unknown setting "colour"/],
    [
      'a drop directory',
      { settings: { dropDirectory: '/srv/drop' } },
      /^settings: dropDirectory is set in APPLICATION_SETTINGS only/,
    ],
    ['no slots', { slots: 0 }, /^slots: /],
    ['too many slots', { slots: 257 }, /^slots: /],
  ])('answers 400 naming the field for %s, and stores nothing', async (_what, body, message) => {
    const answer = await put(service.url, 'strict', body, '"0"');
    expect(answer.status).toBe(400);
    expect(messageOf(await answer.text())).toMatch(message);
    expect((await read(service.url, 'strict')).headers.get('etag')).toBe('"0"');
  });

  it('is for global admins only, with a valid application name', async () => {
    expect((await read(service.url, 'lab', ALICE)).status).toBe(403);
    expect((await put(service.url, 'lab', {}, '"0"', ALICE)).status).toBe(403);
    expect((await read(service.url, 'lab', {})).status).toBe(401);
    expect((await read(service.url, 'no-such-app!')).status).toBe(400);
    const text = await fetch(`${service.url}${APPLICATIONS}/lab`, {
      method: 'PUT',
      headers: { ...ROOT, 'Content-Type': 'text/plain', 'If-Match': '"0"' },
      body: 'x',
    });
    expect(text.status).toBe(415);
    const post = await fetch(`${service.url}${APPLICATIONS}/lab`, {
      method: 'POST',
      headers: ROOT,
    });
    expect(post.status).toBe(405);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Two nodes need a shared database server; the embedded database belongs to one process.
describeWithServer('application settings across two nodes', () => {
  let database: TestDatabase;
  let nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    const env = testEnvironment(database, { ...(await settingsEnvironment()), LOG_LEVEL: 'warn' });
    nodes = await spawnNodes(env, 2);
  });
  afterAll(async () => {
    await stopServices(nodes);
    await database.drop();
  });

  it('a change made on node A applies on node B within a second', async () => {
    const [a, b] = nodes;
    expect(await bobOnCatalog(b.url, 'shared')).toBe(403);
    const granted = await put(a.url, 'shared', { security: { adminPrincipals: ['bob'] } }, '"0"');
    expect(granted.status).toBe(200);
    await waitFor(async () => (await bobOnCatalog(b.url, 'shared')) === 200, 1000, 'B to grant');
    const revoked = await put(b.url, 'shared', { security: {} }, '"1"');
    expect(revoked.status).toBe(200);
    await waitFor(async () => (await bobOnCatalog(a.url, 'shared')) === 403, 1000, 'A to revoke');
  });
});
