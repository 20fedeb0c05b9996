/**
 * Signing in on the pages through an identity provider: PKCE and the sealed cookie.
 *
 * @ci-pass node24
 */
import { Client } from 'pg';
import { randomBytes } from 'node:crypto';
import { Browser } from 'playwright-core';
import { launchChromium } from '../support/browser';
import { TEST_AUDIENCE, TestOidcProvider, signingKey } from '../support/oidc-provider';
import { REST, request } from '../support/rest-client';
import {
  freePort,
  spawnService,
  stopServices,
  type ServiceProcess,
} from '../support/service-process';
import { createTestDatabase, testEnvironment, type TestDatabase } from '../support/test-service';

/** Long enough for a job on webR; a wait ends as soon as its condition holds. */
const JOB_WAIT_MS = 90_000;

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * The upload page signs in with a real OpenID provider (authorization code with PKCE), in
 * Chromium, through the provider's own login form; the service runs as its own process, as in
 * production (openid-client is loaded by Node's require of ES modules).
 */
describe('the upload page signs in with the identity provider (AUTH_MODE=oidc)', () => {
  let provider: TestOidcProvider;
  let database: TestDatabase;
  let service: ServiceProcess;
  let browser: Browser;
  const client = {
    client_id: 'svc-page',
    client_secret: `page-secret-${randomBytes(8).toString('hex')}`,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: [] as string[],
  };

  beforeAll(async () => {
    const port = await freePort();
    client.redirect_uris = [`http://127.0.0.1:${port}/svc/sign-in/callback`];
    provider = await TestOidcProvider.start(
      {
        clients: [client],
        // Keycloak-shaped: the realm role analyst makes alice a user of demo; mallory has none.
        accountClaims: { alice: { realm_access: { roles: ['analyst'] } } },
      },
      [await signingKey('page-key')],
    );
    database = await createTestDatabase();
    service = await spawnService(
      {
        ...testEnvironment(database),
        PORT: String(port),
        LOG_LEVEL: 'warn',
        AUTH_MODE: 'oidc',
        OIDC_ISSUER: provider.issuer,
        OIDC_AUDIENCE: TEST_AUDIENCE,
        OIDC_CLIENT_ID: client.client_id,
        OIDC_CLIENT_SECRET: client.client_secret,
        AUTH_MAX_FAILURES: '1000',
        APPLICATION_SECURITY: JSON.stringify({
          demo: { userRoles: ['analyst'], scriptSubmissionAllowed: true },
        }),
        // The embedded database and webR start slower than a server and native R.
      },
      180_000,
    );
    browser = await launchChromium();
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
    await provider?.stop();
    if (service) {
      await stopServices([service]);
    }
    await database?.drop();
  });

  it('signs in through the provider, shows the user, submits a job, refuses cross-site posts, signs out', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${service.url}/svc/`);
    await page.locator('#signInLink').waitFor({ state: 'visible' });
    expect(await page.locator('#accountName').textContent()).toBe('Not signed in');

    // The provider's own login form (oidc-provider's development interactions).
    await page.click('#signInLink');
    await page.waitForURL((url) => url.href.startsWith(provider.issuer));
    await page.fill('input[name="login"]', 'alice');
    await page.fill('input[name="password"]', 'any password');
    await page.click('button[type="submit"]');
    await page.waitForURL(`${service.url}/svc/`);
    await until(
      async () => (await page.locator('#accountName').textContent()) === 'Signed in as alice',
      'the page to show the signed-in user',
    );
    expect(await page.locator('#signOutButton').isVisible()).toBe(true);

    const [cookie] = (await context.cookies()).filter((c) => c.name === 'svc_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/svc', secure: false });

    // A job submitted from the page runs as alice.
    await page.fill('#applicationName', 'demo');
    await page.setInputFiles('#jobFiles', [
      {
        name: 'hello.R',
        mimeType: 'text/plain',
        buffer: Buffer.from('writeLines("hi", "hi.txt")\n'),
      },
    ]);
    await page.click('#jobSubmitButton');
    await until(
      async () => (await page.locator('#jobPanel').getAttribute('data-state')) === 'DONE',
      'the job panel to show DONE',
      JOB_WAIT_MS,
    );
    // The outcome follows once the page has read the result.
    await until(
      async () => (await page.locator('#jobOutcomeText').textContent()) === 'The job succeeded.',
      'the page to show that the job succeeded',
    );

    // The cookie alone, as another site's form or script would send it: refused.
    const withCookie = { Cookie: `svc_session=${cookie.value}` };
    const readable = await request(`${service.url}${REST}/results/demo`, { headers: withCookie });
    expect(readable.status).toBe(200);
    const foreigners: Array<Record<string, string>> = [
      { 'Sec-Fetch-Site': 'cross-site' },
      { Origin: 'https://evil.example' },
    ];
    for (const foreign of foreigners) {
      const posted = await request(`${service.url}${REST}/jobs`, {
        method: 'POST',
        headers: {
          ...withCookie,
          ...foreign,
          'Content-Type': 'multipart/form-data; boundary=x',
        },
        body: '--x--\r\n',
      });
      expect(posted.status).toBe(403);
      expect(posted.text).toMatch(/must come from the page of this service/);
    }

    // Sign-out ends the session on the server: the cookie is worth nothing afterwards.
    await page.click('#signOutButton');
    await page.locator('#signInLink').waitFor({ state: 'visible' });
    expect((await context.cookies()).some((c) => c.name === 'svc_session')).toBe(false);
    const after = await request(`${service.url}${REST}/results/demo`, { headers: withCookie });
    expect(after.status).toBe(401);
    await context.close();

    // The audit trail has the sign-in, the job the session submitted and the sign-out, as alice
    // (read from the server database; the embedded one belongs to the service's process).
    if (database.url !== null) {
      const db = new Client({ connectionString: database.url });
      await db.connect();
      try {
        const { rows } = await db.query<{ action: string; principal: string; auth_method: string }>(
          `SELECT action, principal, auth_method FROM audit_event
            WHERE action IN ('signed.in', 'job.submitted', 'signed.out') ORDER BY id`,
        );
        expect(rows).toEqual([
          { action: 'signed.in', principal: 'oidc:alice', auth_method: 'oidc' },
          { action: 'job.submitted', principal: 'oidc:alice', auth_method: 'oidc' },
          { action: 'signed.out', principal: 'oidc:alice', auth_method: 'oidc' },
        ]);
      } finally {
        await db.end();
      }
    }
  });

  it('stores nothing for anonymous sign-in starts; a changed sign-in cookie opens nothing', async () => {
    const starts = await Promise.all(
      Array.from({ length: 40 }, () => request(`${service.url}/svc/sign-in`)),
    );
    const cookies = starts.map((answer) => {
      expect(answer.status).toBe(303);
      expect(answer.headers.get('location')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/auth\?/);
      return /svc_sign_in=([\w-]+)/.exec(answer.headers.get('set-cookie') ?? '')?.[1] ?? '';
    });
    expect(new Set(cookies).size).toBe(40);
    if (database.url !== null) {
      const db = new Client({ connectionString: database.url });
      await db.connect();
      try {
        const { rows } = await db.query<{ count: string }>(
          'SELECT count(*) FROM web_session WHERE principal IS NULL',
        );
        expect(rows[0].count).toBe('0');
      } finally {
        await db.end();
      }
    }
    const callback = (cookie: string) =>
      request(`${service.url}/svc/sign-in/callback?code=stolen&state=forged`, {
        headers: { cookie: `svc_sign_in=${cookie}` },
      });
    // The sealed state opens (the provider's state then does not match: refused after it) ...
    const genuine = await callback(cookies[0]);
    expect(genuine.status).toBe(400);
    expect(genuine.text).toMatch(/did not sign you in/);
    // ... a changed one does not open at all.
    const flipped =
      cookies[1].slice(0, 30) + (cookies[1][30] === 'A' ? 'B' : 'A') + cookies[1].slice(31);
    for (const cookie of [flipped, cookies[2].slice(0, -4), 'A'.repeat(300)]) {
      const answer = await callback(cookie);
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(/No sign-in is under way/);
      expect(answer.headers.get('set-cookie') ?? '').not.toMatch(/svc_session=/);
    }
  });

  it('a callback without a sign-in under way is a 400, not a session', async () => {
    const answer = await request(`${service.url}/svc/sign-in/callback?code=stolen&state=x`);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('set-cookie') ?? '').not.toMatch(/svc_session=/);
  });
});
