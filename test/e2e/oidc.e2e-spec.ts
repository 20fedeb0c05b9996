import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { decodeJwt, exportSPKI, importJWK, SignJWT, type JWK, type JWTPayload } from 'jose';
import { hashSecret } from '../../src/common/secret-hash';
import { loadTestCatalog } from '../support/function-calls';
import {
  publicPart,
  signingKey,
  TEST_AUDIENCE,
  TestOidcProvider,
  type TestClient,
} from '../support/oidc-provider';
import { basicAuthorization } from '../support/admin-auth';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { runCli } from '../support/service-process';
import { faultAnswer, jobEnvelope, postSoap, processAnswer } from '../support/soap-client';
import { startTestService, type TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/** A client-credentials client of the provider. */
function machine(id: string): TestClient {
  return {
    client_id: id,
    client_secret: `${id}-secret-${randomBytes(8).toString('hex')}`,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
  };
}

/**
 * Who calls. The provider issues each a token through the client-credentials grant; the claims
 * are shaped like the access tokens of the two providers docs/security.md describes.
 */
const CLIENTS = {
  /** A machine: no claims besides the standard ones, named by its client id. */
  reporting: machine('reporting'),
  /** Keycloak: the user's name in preferred_username, realm roles in realm_access.roles. */
  keycloakAlice: machine('keycloak-alice'),
  /** Entra ID: app roles in roles, group object ids in groups. */
  entraBob: machine('entra-bob'),
  /** Known to the provider, granted nothing by svc. */
  outsider: machine('outsider'),
};
const ADMINS_GROUP = '5f1c1a42-7d0e-4b8a-9c11-6a1f0e3b2d77';
const CLIENT_CLAIMS = {
  'keycloak-alice': {
    preferred_username: 'alice',
    realm_access: { roles: ['analyst', 'offline_access'] },
  },
  'entra-bob': {
    preferred_username: 'bob@contoso.example',
    roles: ['Svc.User'],
    groups: [ADMINS_GROUP],
  },
};

/** An API key from configuration, which AUTH_MODE=apiKey,oidc keeps accepting beside tokens. */
const API_KEY_SECRET = randomBytes(24).toString('base64url');

const JSON_CALL = '{"RFunction":"hello","name":"token"}';
const HELLO_ZIP = makeZip([{ name: 'hello.R', content: 'writeLines("hello", "hello.txt")\n' }]);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request with node:http (fetch refuses nothing, but this shows the server's own answer to huge headers). */
function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: options.method ?? 'GET', headers: options.headers },
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
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const bearer = (token: string): Record<string, string> => ({ Authorization: `Bearer ${token}` });

function base64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** Polls until `check` holds (a change in another process), failing after `timeoutMs`. */
async function eventually(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error('the condition did not hold in time');
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('OpenID Connect bearer tokens from a real provider (AUTH_MODE=apiKey,oidc)', () => {
  let provider: TestOidcProvider;
  let service: TestService;
  let firstKey: JWK;
  const tokens: Record<keyof typeof CLIENTS, string> = {
    reporting: '',
    keycloakAlice: '',
    entraBob: '',
    outsider: '',
  };

  const url = (path: string) => `${service.url}${REST}${path}`;

  /** A token the provider could have issued to alice, signed with `key`, with `claims` changed. */
  async function forged(
    claims: JWTPayload,
    key: JWK = firstKey,
    header: Record<string, unknown> = {},
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      iss: provider.issuer,
      aud: TEST_AUDIENCE,
      sub: 'alice',
      preferred_username: 'alice',
      realm_access: { roles: ['analyst'] },
      iat: now,
      exp: now + 300,
      ...claims,
    })
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: key.kid, ...header })
      .sign(await importJWK(key, 'RS256'));
  }

  async function freshTokens(): Promise<void> {
    for (const [who, client] of Object.entries(CLIENTS)) {
      tokens[who as keyof typeof CLIENTS] = await provider.clientCredentialsToken(client);
    }
  }

  beforeAll(async () => {
    firstKey = await signingKey('first-key');
    provider = await TestOidcProvider.start(
      { clients: Object.values(CLIENTS), clientClaims: CLIENT_CLAIMS },
      [firstKey],
    );
    service = await startTestService({
      AUTH_MODE: 'apiKey,oidc',
      OIDC_ISSUER: provider.issuer,
      OIDC_AUDIENCE: TEST_AUDIENCE,
      // Unknown key ids may fetch the keys again every second here (30 s by default).
      OIDC_JWKS_COOLDOWN_SECONDS: '1',
      // Every hostile token below is a failure from 127.0.0.1: do not lock the tests out.
      AUTH_MAX_FAILURES: '100000',
      GLOBAL_ADMINS: JSON.stringify({ roles: [ADMINS_GROUP] }),
      API_KEYS: JSON.stringify({
        legacy: {
          principal: 'reporting',
          keyHash: await hashSecret(API_KEY_SECRET, { N: 1024, r: 8, p: 1 }),
        },
      }),
      APPLICATION_SECURITY: JSON.stringify({
        demo: {
          userRoles: ['analyst', 'Svc.User'],
          // The machine client and the API key are two callers that both go by "reporting".
          userPrincipals: ['client:reporting', 'key:reporting'],
          functionCallAllowed: true,
          scriptSubmissionAllowed: true,
        },
      }),
    });
    await loadTestCatalog(service);
    await freshTokens();
  });
  afterAll(async () => {
    // The provider first: it is a child of this process, which the service's leak check counts.
    await provider?.stop();
    await service?.stop();
  });

  it('the provider issues JWT access tokens for the API, shaped like Keycloak and Entra ID', () => {
    expect(decodeJwt(tokens.keycloakAlice)).toMatchObject({
      iss: provider.issuer,
      aud: TEST_AUDIENCE,
      preferred_username: 'alice',
      realm_access: { roles: ['analyst', 'offline_access'] },
    });
    expect(decodeJwt(tokens.entraBob)).toMatchObject({
      roles: ['Svc.User'],
      groups: [ADMINS_GROUP],
    });
    expect(decodeJwt(tokens.reporting)).toMatchObject({ sub: 'reporting', client_id: 'reporting' });
  });

  it('a user with a realm role submits a script job and reads its result with the token', async () => {
    const submitted = await postZip(service.url, await HELLO_ZIP, bearer(tokens.keycloakAlice));
    expect(submitted.status).toBe(202);
    const { resultUri } = parseXml(submitted.text).jobToken;
    const result = parseXml((await waitForResult(resultUri, bearer(tokens.keycloakAlice))).text);
    expect(result.result.success).toBe('true');
    // Another caller who may not see the application finds nothing there.
    expect((await request(resultUri, { headers: bearer(tokens.outsider) })).status).toBe(404);
  });

  it('a machine token (client credentials) is named by its client and calls a function', async () => {
    const answer = await call(url('/process'), {
      method: 'POST',
      headers: {
        ...bearer(tokens.reporting),
        'Content-Type': 'application/json',
        'X-SVC-Application-Name': 'demo',
      },
      body: JSON_CALL,
    });
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('token');
    // The same principal's API key, as a bearer token or in its header, works beside tokens.
    for (const headers of [
      bearer(`legacy.${API_KEY_SECRET}`),
      { 'X-SVC-API-Key': `legacy.${API_KEY_SECRET}` },
    ]) {
      expect((await call(url('/results/demo'), { headers })).status).toBe(200);
    }
    const wrongKey = await call(url('/results/demo'), { headers: bearer('legacy.wrong') });
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.headers['www-authenticate']).toMatch(
      /^Bearer realm="svc", error="invalid_token"/,
    );
  });

  it('roles and groups: an Entra ID group is a global admin; others get 403 from the admin API', async () => {
    const catalog = (token: string) =>
      call(url('/admin/catalog'), {
        headers: { ...bearer(token), 'X-SVC-Application-Name': 'demo' },
      });
    expect((await catalog(tokens.entraBob)).status).toBe(200);
    for (const token of [tokens.keycloakAlice, tokens.outsider, tokens.reporting]) {
      const answer = await catalog(token);
      expect(answer.status).toBe(403);
      expect(answer.headers['www-authenticate']).toBeUndefined();
    }
    const submitted = await postZip(service.url, await HELLO_ZIP, bearer(tokens.outsider));
    expect(submitted.status).toBe(403);
  });

  it('every bad token is a 401 with error="invalid_token" and a description, never a 5xx', async () => {
    const now = Math.floor(Date.now() / 1000);
    const stranger = await signingKey('stranger-key');
    const publicPem = await exportSPKI(
      (await importJWK(publicPart(firstKey), 'RS256')) as Parameters<typeof exportSPKI>[0],
    );
    const [header, , signature] = tokens.keycloakAlice.split('.');
    const cases: Array<[string, string, RegExp]> = [
      ['expired', await forged({ exp: now - 3600, iat: now - 7200 }), /has expired/],
      ['not yet valid', await forged({ nbf: now + 3600 }), /not valid yet/],
      ['another issuer', await forged({ iss: 'https://evil.example' }), /another issuer/],
      ['another audience', await forged({ aud: 'https://other.example/api' }), /another audience/],
      [
        'alg none',
        `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ iss: provider.issuer, aud: TEST_AUDIENCE, sub: 'alice', exp: now + 300 })}.`,
        /signing algorithm is not accepted/,
      ],
      [
        'HS256 signed with the public key',
        await new SignJWT({
          iss: provider.issuer,
          aud: TEST_AUDIENCE,
          sub: 'alice',
          exp: now + 300,
        })
          .setProtectedHeader({ alg: 'HS256', kid: firstKey.kid })
          .sign(Buffer.from(publicPem)),
        /signing algorithm is not accepted/,
      ],
      [
        'tampered payload',
        `${header}.${base64url({ ...decodeJwt(tokens.keycloakAlice), realm_access: { roles: ['admin'] } })}.${signature}`,
        /signature is not valid/,
      ],
      ['unknown key id', await forged({}, stranger), /signing key the issuer does not publish/],
      ['no exp', await forged({ exp: undefined }), /exp claim/],
      ['garbage', 'bm90LWpzb24.bm90LWpzb24.c2ln', /malformed/],
      ['12 KB', `${'a'.repeat(12 * 1024)}.${'b'.repeat(10)}.c`, /malformed/],
      ['64 KB', `${'a'.repeat(40 * 1024)}.${'b'.repeat(24 * 1024)}.c`, /too long/],
    ];
    for (const [name, token, description] of cases) {
      const answer = await call(url('/results/demo'), { headers: bearer(token) });
      expect({ name, status: answer.status }).toEqual({ name, status: 401 });
      const challenge = String(answer.headers['www-authenticate']);
      expect(challenge).toMatch(
        /^Bearer realm="svc", error="invalid_token", error_description="[^"]+"/,
      );
      expect({ name, challenge }).toEqual({ name, challenge: expect.stringMatching(description) });
      expect(JSON.stringify(parseXml(answer.text).error)).toMatch(/bearer token is not valid/);
    }
    // No token at all: the challenge without an error (RFC 6750 §3.1).
    const anonymous = await call(url('/results/demo'));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="svc"');
    // The forged tokens are refused for what they are: one signed right is accepted.
    expect((await call(url('/results/demo'), { headers: bearer(await forged({})) })).status).toBe(
      200,
    );
  });

  it('REST, /process, the admin API, the job log stream and SOAP answer a bad token alike', async () => {
    const expired = await forged({ exp: Math.floor(Date.now() / 1000) - 60, iat: 1 });
    const jobId = '0d6f1c2e-4c1a-4b8e-9a55-2b7e1f0c9d31';
    const requests: Array<[string, () => Promise<{ status: number; challenge: string | null }>]> = [
      [
        'results',
        () => challenged(call(url(`/results/demo/${jobId}`), { headers: bearer(expired) })),
      ],
      [
        'process',
        () =>
          challenged(
            call(url('/process'), {
              method: 'POST',
              headers: {
                ...bearer(expired),
                'Content-Type': 'application/json',
                'X-SVC-Application-Name': 'demo',
              },
              body: JSON_CALL,
            }),
          ),
      ],
      [
        'admin',
        () =>
          challenged(
            call(url('/admin/catalog'), {
              headers: { ...bearer(expired), 'X-SVC-Application-Name': 'demo' },
            }),
          ),
      ],
      [
        'job log',
        () => challenged(call(url(`/jobs/demo/${jobId}/log`), { headers: bearer(expired) })),
      ],
      [
        'SOAP',
        async () => {
          const answer = await postSoap(
            service.url,
            jobEnvelope('demo', [
              { name: 'call.json', contentType: 'application/json', data: JSON_CALL },
            ]),
            undefined,
            undefined,
            bearer(expired),
          );
          const challenge = answer.headers.get('www-authenticate');
          expect((await faultAnswer(answer)).faultcode).toBe('soap:Client');
          return { status: answer.status, challenge };
        },
      ],
    ];
    for (const [name, send] of requests) {
      const { status, challenge } = await send();
      expect({ name, status }).toEqual({ name, status: 401 });
      expect({ name, challenge }).toEqual({
        name,
        challenge: expect.stringMatching(
          /^Bearer realm="svc", error="invalid_token", error_description="the token has expired"/,
        ),
      });
    }
    // And a good token passes SOAP's HTTP Authorization header.
    const soap = await postSoap(
      service.url,
      jobEnvelope('demo', [
        { name: 'call.json', contentType: 'application/json', data: JSON_CALL },
      ]),
      undefined,
      undefined,
      bearer(tokens.reporting),
    );
    expect((await processAnswer(soap)).result.success).toBe(true);
  });

  it('a new signing key at the provider is taken without a restart; stopped, cached keys still work', async () => {
    const secondKey = await signingKey('second-key');
    const before = tokens.keycloakAlice;
    // Rotation: the provider now signs with the second key and still publishes the first.
    await provider.restart([secondKey, firstKey]);
    const rotated = await provider.clientCredentialsToken(CLIENTS.keycloakAlice);
    const { kid } = JSON.parse(Buffer.from(rotated.split('.')[0], 'base64url').toString()) as {
      kid: string;
    };
    expect(kid).toBe('second-key');
    const read = (token: string) => call(url('/results/demo'), { headers: bearer(token) });
    // The first token naming the new key makes svc fetch the keys again (cooldown 1 s here).
    await eventually(async () => (await read(rotated)).status === 200);
    expect((await read(before)).status).toBe(200);

    // The provider goes away: tokens signed with keys svc holds keep working.
    await provider.stop();
    expect((await read(rotated)).status).toBe(200);
    expect((await read(before)).status).toBe(200);
    // A key svc never saw cannot be fetched now: 401, not a 5xx, again after the cooldown.
    const unknown = await forged({}, await signingKey('third-key'));
    for (let attempt = 0; attempt < 2; attempt++) {
      const answer = await read(unknown);
      expect(answer.status).toBe(401);
      expect(answer.headers['www-authenticate']).toMatch(/error="invalid_token"/);
      await new Promise((resolve) => setTimeout(resolve, 1100));
    }
  });
});

async function challenged(
  answer: Promise<Answer>,
): Promise<{ status: number; challenge: string | null }> {
  const { status, headers } = await answer;
  const challenge = headers['www-authenticate'];
  return { status, challenge: typeof challenge === 'string' ? challenge : null };
}

describe('OpenID Connect: the issuer unreachable when svc starts', () => {
  let provider: TestOidcProvider;
  let service: TestService;
  const client = machine('late-client');

  beforeAll(async () => {
    // The provider's port is known before it runs: started once, stopped, and svc starts then.
    provider = await TestOidcProvider.start(
      { clients: [client], clientClaims: { 'late-client': { roles: ['analyst'] } } },
      [await signingKey('late-key')],
    );
    await provider.stop();
    service = await startTestService({
      AUTH_MODE: 'oidc',
      OIDC_ISSUER: provider.issuer,
      OIDC_AUDIENCE: TEST_AUDIENCE,
      OIDC_JWKS_COOLDOWN_SECONDS: '1',
      AUTH_MAX_FAILURES: '100000',
      APPLICATION_SECURITY: JSON.stringify({ demo: { userRoles: ['analyst'] } }),
    });
  });
  afterAll(async () => {
    // The provider first: it is a child of this process, which the service's leak check counts.
    await provider?.stop();
    await service?.stop();
  });

  it('starts all the same, refuses tokens with 401 until the issuer answers, then accepts them', async () => {
    const token = await new SignJWT({
      iss: provider.issuer,
      aud: TEST_AUDIENCE,
      sub: 'late-client',
      client_id: 'late-client',
      roles: ['analyst'],
    })
      .setProtectedHeader({ alg: 'RS256', kid: 'late-key' })
      .setExpirationTime('5m')
      .sign(await importJWK(provider.keys[0], 'RS256'));
    const read = () => call(`${service.url}${REST}/results/demo`, { headers: bearer(token) });
    const refused = await read();
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toMatch(
      /error="invalid_token", error_description="the issuer's signing keys are not available yet"/,
    );
    await provider.restart();
    await eventually(async () => (await read()).status === 200);
    // Once there, tokens the provider issues itself are accepted too.
    const issued = await provider.clientCredentialsToken(client);
    expect(
      (await call(`${service.url}${REST}/results/demo`, { headers: bearer(issued) })).status,
    ).toBe(200);
  });
});

describe('OpenID Connect: a name is a caller only with its kind (AUTH_MODE=basic,apiKey,oidc)', () => {
  /** carol is a Basic user and a global admin; every other caller below spells her name. */
  const CAROL_PASSWORD = `carol-${randomBytes(8).toString('hex')}`;
  const CAROL = basicAuthorization('carol', CAROL_PASSWORD);
  const KEY_SECRET = randomBytes(24).toString('base64url');
  /** A user name as long as names may be: with its kind it is longer than 128 characters. */
  const LONG_NAME = 'l'.repeat(128);
  const LONG = basicAuthorization(LONG_NAME, CAROL_PASSWORD);
  const clients = {
    /** A client registered at the provider under the admin's name. */
    carol: machine('carol'),
    /** A client whose tokens carry preferred_username carol, as a user who picked that name. */
    impostor: machine('impostor'),
    /** A machine the team application grants, as client:team-bot. */
    teamBot: machine('team-bot'),
  };
  let provider: TestOidcProvider;
  let service: TestService;
  let key: JWK;
  const url = (path: string) => `${service.url}${REST}${path}`;
  /** Every caller that spells carol but is not the Basic user carol. */
  const impostors: Record<string, Record<string, string>> = {};

  beforeAll(async () => {
    key = await signingKey('kinds-key');
    provider = await TestOidcProvider.start(
      {
        clients: Object.values(clients),
        clientClaims: { impostor: { preferred_username: 'carol' } },
      },
      [key],
    );
    service = await startTestService({
      AUTH_MODE: 'basic,apiKey,oidc',
      OIDC_ISSUER: provider.issuer,
      OIDC_AUDIENCE: TEST_AUDIENCE,
      AUTH_MAX_FAILURES: '100000',
      USERS: JSON.stringify({
        carol: { passwordHash: await hashSecret(CAROL_PASSWORD, { N: 1024, r: 8, p: 1 }) },
        [LONG_NAME]: { passwordHash: await hashSecret(CAROL_PASSWORD, { N: 1024, r: 8, p: 1 }) },
      }),
      API_KEYS: JSON.stringify({
        carolkey: {
          principal: 'carol',
          keyHash: await hashSecret(KEY_SECRET, { N: 1024, r: 8, p: 1 }),
        },
      }),
      GLOBAL_ADMINS: JSON.stringify({ principals: ['user:carol'] }),
      APPLICATION_SECURITY: JSON.stringify({
        team: {
          userPrincipals: ['user:carol', 'client:team-bot', `user:${LONG_NAME}`],
          scriptSubmissionAllowed: true,
        },
      }),
    });
    impostors['client id carol'] = bearer(await provider.clientCredentialsToken(clients.carol));
    impostors['preferred_username carol'] = bearer(
      await provider.clientCredentialsToken(clients.impostor),
    );
    impostors['API key of principal carol'] = { 'X-SVC-API-Key': `carolkey.${KEY_SECRET}` };
  });
  afterAll(async () => {
    await provider?.stop();
    await service?.stop();
  });

  it("the provider's tokens spell carol as a client id and as preferred_username", () => {
    const [, clientToken] = impostors['client id carol'].Authorization.split(' ');
    const [, userToken] = impostors['preferred_username carol'].Authorization.split(' ');
    expect(decodeJwt(clientToken)).toMatchObject({ sub: 'carol', client_id: 'carol' });
    expect(decodeJwt(userToken)).toMatchObject({ preferred_username: 'carol' });
  });

  it("a token or key spelling a Basic global admin's name gets 403 from the admin API", async () => {
    const admin = (headers: Record<string, string>) =>
      Promise.all(
        ['/admin/api-keys', '/admin/applications/team'].map((path) =>
          call(url(path), { headers: { ...headers, Accept: 'application/json' } }),
        ),
      );
    for (const answer of await admin(CAROL)) {
      expect(answer.status).toBe(200);
    }
    const expected: Record<string, string> = {
      'client id carol': 'client:carol',
      'preferred_username carol': 'oidc:carol',
      'API key of principal carol': 'key:carol',
    };
    for (const [who, headers] of Object.entries(impostors)) {
      for (const answer of await admin(headers)) {
        expect({ who, status: answer.status }).toEqual({ who, status: 403 });
        expect(answer.text).toContain(`${expected[who]} is not a global admin.`);
      }
    }
  });

  it("cannot read, list or add to the Basic user's results", async () => {
    const submitted = await postZip(service.url, await HELLO_ZIP, {
      ...CAROL,
      'X-SVC-Application-Name': 'team',
    });
    expect(submitted.status).toBe(202);
    const { resultUri } = parseXml(submitted.text).jobToken;
    expect(parseXml((await waitForResult(resultUri, CAROL)).text).result.success).toBe('true');
    for (const [who, headers] of Object.entries(impostors)) {
      const read = await request(resultUri, { headers });
      expect({ who, status: read.status }).toEqual({ who, status: 404 });
      expect(read.text).not.toContain('hello');
      const listed = await call(url('/results/team'), { headers });
      expect({ who, status: listed.status }).toEqual({ who, status: 404 });
      const added = await postZip(service.url, await HELLO_ZIP, {
        ...headers,
        'X-SVC-Application-Name': 'team',
      });
      expect({ who, status: added.status }).toEqual({ who, status: 403 });
    }
    // The client the application names, by its kind, reads it.
    const teamBot = bearer(await provider.clientCredentialsToken(clients.teamBot));
    expect((await request(resultUri, { headers: teamBot })).status).toBe(200);
  });

  it("a user's token without preferred_username is refused, not named by a sub that spells carol", async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({
      iss: provider.issuer,
      aud: TEST_AUDIENCE,
      sub: 'carol',
      azp: 'some-web-app',
      iat: now,
      exp: now + 300,
    })
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: key.kid })
      .sign(await importJWK(key, 'RS256'));
    const answer = await call(url('/admin/api-keys'), { headers: bearer(token) });
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toContain(
      'error_description="the token has no preferred_username claim (OIDC_PRINCIPAL_CLAIM) and is no client\'s own token"',
    );
  });

  it("a token's name is bounded; the longest user name is recorded with its kind", async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({
      iss: provider.issuer,
      aud: TEST_AUDIENCE,
      sub: 'someone',
      preferred_username: 'x'.repeat(129),
      iat: now,
      exp: now + 300,
    })
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: key.kid })
      .sign(await importJWK(key, 'RS256'));
    const refused = await call(url('/results/team'), { headers: bearer(token) });
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toContain(
      'error_description="the token\'s name is longer than 128 characters"',
    );
    // The submission's audit row holds user:<128 characters>, in the same statement as the job.
    const submitted = await postZip(service.url, await HELLO_ZIP, {
      ...LONG,
      'X-SVC-Application-Name': 'team',
    });
    expect(submitted.status).toBe(202);
    const audit = await call(url(`/admin/audit?principal=user:${LONG_NAME}&action=job.submitted`), {
      headers: { ...CAROL, Accept: 'application/json' },
    });
    expect(audit.status).toBe(200);
    expect(audit.text).toContain(`"principal":"user:${LONG_NAME}"`);
  });

  it('a stored rule with a bare name is refused with 400 naming the kinds to write', async () => {
    const current = await call(url('/admin/applications/team'), {
      headers: { ...CAROL, Accept: 'application/json' },
    });
    const answer = await call(url('/admin/applications/team'), {
      method: 'PUT',
      headers: {
        ...CAROL,
        'Content-Type': 'application/json',
        Accept: 'application/json',
        'If-Match': String(current.headers.etag),
      },
      body: JSON.stringify({ security: { adminPrincipals: ['carol'] } }),
    });
    expect(answer.status).toBe(400);
    expect(answer.text).toContain(
      'security: adminPrincipals: \\"carol\\" is a bare name, which AUTH_MODE=basic,apiKey,oidc lets 4 kinds of caller carry',
    );
  });

  it('refuses to start with one line when a rule names a bare name more than one kind could carry', async () => {
    const started = await runCli('main.js', [], {
      ...process.env,
      AUTH_MODE: 'basic,oidc',
      OIDC_ISSUER: provider.issuer,
      OIDC_AUDIENCE: TEST_AUDIENCE,
      GLOBAL_ADMINS: JSON.stringify({ principals: ['carol'] }),
    });
    expect(started.code).toBe(78);
    expect(started.output.trim().split('\n')).toEqual([
      'svc: configuration: GLOBAL_ADMINS: principals: "carol" is a bare name, which AUTH_MODE=basic,oidc lets 3 kinds of caller carry: write the kind before each name (user:carol, oidc:carol, client:carol; docs/security.md#who-a-caller-is)',
    ]);
  });
});
