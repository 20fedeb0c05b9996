import { randomBytes } from 'node:crypto';
import { hashSecret } from '../../src/common/secret-hash';
import { runSvc, ServiceProcess, spawnNodes, stopServices } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

const KEYS = '/svc/api/rest/admin/api-keys';
const ADMIN = { Authorization: `Basic ${Buffer.from('root:root-secret-1').toString('base64')}` };
const CONFIGURED_SECRET = randomBytes(16).toString('hex');

/** apiKey mode; global admins are `ops-bot` and whoever holds the role `ops`. */
async function keysEnvironment(): Promise<Record<string, string>> {
  return {
    ROLE: 'api',
    AUTH_MODE: 'apiKey',
    ADMIN_USER: 'root',
    ADMIN_PASSWORD: 'root-secret-1',
    API_KEYS: JSON.stringify({
      configured: {
        principal: 'ops-bot',
        keyHash: await hashSecret(CONFIGURED_SECRET, { N: 1024, r: 8, p: 1 }),
      },
    }),
    GLOBAL_ADMINS: JSON.stringify({ principals: ['ops-bot'], roles: ['ops'] }),
    // Hostile cases below fail on purpose; the limiter is tested elsewhere.
    AUTH_MAX_FAILURES: '1000',
  };
}

const withKey = (key: string): Record<string, string> => ({ 'X-SVC-API-Key': key });

async function createKey(
  base: string,
  body: unknown,
  headers: Record<string, string> = ADMIN,
): Promise<Response> {
  return fetch(`${base}${KEYS}`, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** The status a key gets on the admin API's key list (200 for an admin key). */
async function statusWith(base: string, key: string): Promise<number> {
  return (await fetch(`${base}${KEYS}`, { headers: withKey(key) })).status;
}

describe('API keys made at run time', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService(await keysEnvironment());
  });
  afterAll(async () => {
    await service.stop();
  });

  it('creates a key shown once, which then authenticates with its roles, and lists it without secrets', async () => {
    const created = await createKey(service.url, {
      principal: 'nightly-report',
      roles: ['ops', 'reporting'],
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const body = (await created.json()) as Record<string, unknown>;
    expect(body).toEqual({
      key: expect.stringMatching(/^k[0-9a-f]{16}\.[A-Za-z0-9_-]{43}$/),
      id: expect.any(String),
      principal: 'nightly-report',
      roles: ['ops', 'reporting'],
      createdAt: expect.any(String),
      createdBy: 'user:root',
      expiresAt: null,
      lastUsedAt: null,
    });
    const key = body.key as string;
    expect(key.split('.')[0]).toBe(body.id);
    expect(created.headers.get('location')).toBe(`${KEYS}/${body.id as string}`);

    // The role `ops` makes it a global admin; both ways of sending a key work.
    expect(await statusWith(service.url, key)).toBe(200);
    const bearer = await fetch(`${service.url}${KEYS}`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(bearer.status).toBe(200);
    const listText = await bearer.text();
    expect(listText).not.toContain(key.split('.')[1]);
    expect(listText).not.toMatch(/sha256|secret|hash/i);
    const listed = (JSON.parse(listText) as { apiKeys: Array<Record<string, unknown>> }).apiKeys;
    expect(listed).toEqual([
      {
        id: body.id,
        principal: 'nightly-report',
        roles: ['ops', 'reporting'],
        createdAt: body.createdAt,
        createdBy: 'user:root',
        expiresAt: null,
        lastUsedAt: expect.any(String),
      },
    ]);
  });

  it('keys from API_KEYS keep working beside stored ones', async () => {
    expect(await statusWith(service.url, `configured.${CONFIGURED_SECRET}`)).toBe(200);
    expect(await statusWith(service.url, `configured.${CONFIGURED_SECRET}x`)).toBe(401);
  });

  it('a key without admin rights gets 403, a wrong secret or an unknown id 401', async () => {
    const created = await createKey(service.url, { principal: 'analyst' });
    const { key, id } = (await created.json()) as { key: string; id: string };
    expect(await statusWith(service.url, key)).toBe(403);
    expect((await createKey(service.url, { principal: 'x' }, withKey(key))).status).toBe(403);
    expect(await statusWith(service.url, `${id}.${'A'.repeat(43)}`)).toBe(401);
    expect(await statusWith(service.url, `k0000000000000000.${'A'.repeat(43)}`)).toBe(401);
    expect(await statusWith(service.url, `${id}.`)).toBe(401);
    expect((await createKey(service.url, { principal: 'x' }, {})).status).toBe(401);
    const anonymousList = await fetch(`${service.url}${KEYS}`);
    expect(anonymousList.status).toBe(401);
  });

  it('revokes a key: refused at once, a second revocation is 404', async () => {
    const { key, id } = (await (
      await createKey(service.url, { principal: 'temp', roles: ['ops'] })
    ).json()) as {
      key: string;
      id: string;
    };
    expect(await statusWith(service.url, key)).toBe(200);
    const revoked = await fetch(`${service.url}${KEYS}/${id}`, {
      method: 'DELETE',
      headers: ADMIN,
    });
    expect(revoked.status).toBe(204);
    expect(await statusWith(service.url, key)).toBe(401);
    const again = await fetch(`${service.url}${KEYS}/${id}`, { method: 'DELETE', headers: ADMIN });
    expect(again.status).toBe(404);
    const configured = await fetch(`${service.url}${KEYS}/configured`, {
      method: 'DELETE',
      headers: ADMIN,
    });
    expect(configured.status).toBe(404);
    const odd = await fetch(`${service.url}${KEYS}/${'%2e%2e'}`, {
      method: 'DELETE',
      headers: ADMIN,
    });
    expect(odd.status).toBe(404);
    const list = (await (await fetch(`${service.url}${KEYS}`, { headers: ADMIN })).json()) as {
      apiKeys: Array<{ id: string }>;
    };
    expect(list.apiKeys.map((k) => k.id)).not.toContain(id);
  });

  it('refuses a key once it has expired', async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const created = await createKey(service.url, { principal: 'short', roles: ['ops'], expiresAt });
    expect(created.status).toBe(201);
    const { key, expiresAt: shown } = (await created.json()) as { key: string; expiresAt: string };
    expect(shown).toBe(expiresAt);
    // Polled: the point is that the same key flips to 401 by itself, whenever that is.
    await waitFor(async () => (await statusWith(service.url, key)) === 401, 20000, 'expiry');
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
  });

  it.each([
    ['not an object', [], /JSON object/],
    ['no principal', { roles: [] }, /^principal: /],
    ['a principal with a space', { principal: 'a b' }, /^principal: /],
    ['a principal of 129 characters', { principal: 'p'.repeat(129) }, /^principal: /],
    ['roles not a list', { principal: 'p', roles: 'ops' }, /^roles: /],
    ['a role that is not a name', { principal: 'p', roles: ['ok', 7] }, /^roles: /],
    [
      'too many roles',
      { principal: 'p', roles: Array.from({ length: 101 }, (_, i) => `r${i}`) },
      /^roles: /,
    ],
    ['expiresAt not a time', { principal: 'p', expiresAt: 'tomorrow' }, /^expiresAt: /],
    [
      'expiresAt without a zone',
      { principal: 'p', expiresAt: '2099-01-01T00:00:00' },
      /^expiresAt: /,
    ],
    [
      'expiresAt in the past',
      { principal: 'p', expiresAt: '2001-01-01T00:00:00Z' },
      /^expiresAt: .*future/,
    ],
    ['an impossible date', { principal: 'p', expiresAt: '2099-02-31T00:00:00Z' }, /^expiresAt: /],
    ['an unknown field', { principal: 'p', secret: 'mine' }, /^secret: unknown field/],
  ])('answers 400 naming the field for %s', async (_what, body, message) => {
    const answer = await fetch(`${service.url}${KEYS}`, {
      method: 'POST',
      headers: { ...ADMIN, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
    });
    expect(answer.status).toBe(400);
    const text = await answer.text();
    const error = /<message>([^<]*)<\/message>|"message"\s*:\s*"([^"]*)"/.exec(text);
    expect(error?.[1] ?? error?.[2]).toMatch(message);
  });

  it('answers 400 for a body that is not JSON, 415 for another type, 413 for a huge one, 405 for other methods', async () => {
    const post = (body: string, type: string) =>
      fetch(`${service.url}${KEYS}`, {
        method: 'POST',
        headers: { ...ADMIN, 'Content-Type': type },
        body,
      });
    expect((await post('{"principal":', 'application/json')).status).toBe(400);
    expect((await post('principal=p', 'application/x-www-form-urlencoded')).status).toBe(415);
    expect((await post(`{"principal":"${'p'.repeat(70000)}"}`, 'application/json')).status).toBe(
      413,
    );
    const put = await fetch(`${service.url}${KEYS}`, { method: 'PUT', headers: ADMIN });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, POST');
  });

  it('answers 400 for a field the validation would drop and for lists nested deeper than it walks, and makes no key', async () => {
    const post = async (body: string) => {
      const answer = await fetch(`${service.url}${KEYS}`, {
        method: 'POST',
        headers: { ...ADMIN, 'Content-Type': 'application/json', Accept: 'application/json' },
        body,
      });
      return {
        status: answer.status,
        message: ((await answer.json()) as { message: string }).message,
      };
    };
    const count = async (): Promise<number> => {
      const list = await fetch(`${service.url}${KEYS}`, {
        headers: { ...ADMIN, Accept: 'application/json' },
      });
      return ((await list.json()) as { apiKeys: unknown[] }).apiKeys.length;
    };
    const before = await count();
    expect(await post('{"principal": "p", "constructor": "x"}')).toEqual({
      status: 400,
      message: 'The body has a field named "constructor", which no field may be named.',
    });
    // About 20 KB: deep enough to overflow a recursive walk (a 500) if it were not refused first.
    const deep = `{"principal": "p", "roles": ${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
    expect(await post(deep)).toEqual({
      status: 400,
      message: 'The body nests objects and lists deeper than 32 levels.',
    });
    expect(await count()).toBe(before);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Two nodes need a shared database server; the embedded database belongs to one process.
describeWithServer('API keys across two nodes and the command line', () => {
  let database: TestDatabase;
  let env: NodeJS.ProcessEnv;
  let nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    env = testEnvironment(database, { ...(await keysEnvironment()), LOG_LEVEL: 'warn' });
    nodes = await spawnNodes(env, 2);
  });
  afterAll(async () => {
    await stopServices(nodes);
    await database.drop();
  });

  it('a key revoked on node A is refused on node B within a second, though B had just accepted it', async () => {
    const [a, b] = nodes;
    const { key, id } = (await (
      await createKey(a.url, { principal: 'shared', roles: ['ops'] })
    ).json()) as {
      key: string;
      id: string;
    };
    // B checks it once, so it holds the key in its cache from here on.
    expect(await statusWith(b.url, key)).toBe(200);
    expect(await statusWith(b.url, key)).toBe(200);
    const revoked = await fetch(`${a.url}${KEYS}/${id}`, { method: 'DELETE', headers: ADMIN });
    expect(revoked.status).toBe(204);
    await waitFor(async () => (await statusWith(b.url, key)) === 401, 1000, 'B to refuse the key');
  });

  it('svc keys create, list and revoke work on the same keys, and nodes hear the revocation', async () => {
    const cli = { ...env, LOG_LEVEL: 'warn' };
    const made = await runSvc(['keys', 'create', 'cli-bot', '--roles', 'ops,reporting'], cli);
    expect(made.code).toBe(0);
    const key = made.stdout.trim();
    expect(key).toMatch(/^k[0-9a-f]{16}\.\S{43}$/);
    const id = key.split('.')[0];
    expect(made.output).toContain(`created API key ${id} for cli-bot`);

    const [a, b] = nodes;
    expect(await statusWith(a.url, key)).toBe(200);
    expect(await statusWith(b.url, key)).toBe(200);

    const listed = await runSvc(['keys', 'list'], cli);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(
      new RegExp(`^${id}\\tcli-bot\\tops,reporting\\t\\S+\\tnever\\t`, 'm'),
    );
    expect(listed.stdout).not.toContain(key.split('.')[1]);

    const revoked = await runSvc(['keys', 'revoke', id], cli);
    expect(revoked).toMatchObject({ code: 0, stdout: `revoked ${id}\n` });
    await waitFor(
      async () => (await statusWith(a.url, key)) === 401 && (await statusWith(b.url, key)) === 401,
      1000,
      'both nodes to refuse the key',
    );
    expect((await runSvc(['keys', 'revoke', id], cli)).code).toBe(1);
    expect((await runSvc(['keys', 'create', 'p', '--expires', 'soon'], cli)).code).toBe(2);
  });
});
