/**
 * The first start, as a new user meets it: the built service on a fresh embedded DATA_DIR with no
 * admin configured. Its start-up lines name the console and the API page, and say the one command
 * that makes an admin; the admin API (whose words the console's gate shows) says the same. That
 * command, `svc admin create <name>`, run beside the running service, makes a global admin at
 * once (HTTP Basic, in AUTH_MODE none), the data directory kept and nothing restarted.
 * @ci-pass embedded
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { axeViolations, launchChromium, violationText } from '../support/browser';
import { runSvc, spawnService, type ServiceProcess } from '../support/service-process';
import { parseXml, request, REST } from '../support/rest-client';

describe('the first start', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let service: ServiceProcess;
  let browser: Browser;
  let password = '';

  beforeAll(async () => {
    browser = await launchChromium();
    dataDir = mkdtempSync(join(tmpdir(), 'svc-first-start-'));
    env = {
      ...process.env,
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
    };
    delete env.DATABASE_URL;
    delete env.ADMIN_USER;
    delete env.ADMIN_PASSWORD;
    delete env.AUTH_MODE;
    // A first start creates the database (initdb), migrates it and loads the example catalog:
    // the slowest start there is; the hook waits longer than the start may take.
    service = await spawnService(env, 240000);
  }, 300000);
  afterAll(async () => {
    await browser.close();
    service.child.kill('SIGTERM');
    await service.exited();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('names the console and the API page, and the command that makes an admin', () => {
    const port = new URL(service.url).port;
    const lines = service
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(lines).toContain(`Console: http://localhost:${port}/svc/console/`);
    expect(lines).toContain(`API page: http://localhost:${port}/svc/api/`);
    const noAdmin = lines.find((line) => line.startsWith('No administrator is configured'));
    expect(noAdmin).toContain(`DATA_DIR=${dataDir} npx svc admin create <name>`);
  });

  it('says the same command on the console’s gate', async () => {
    const answer = await request(`${service.url}${REST}/admin/me`);
    expect(answer.status).toBe(403);
    expect(parseXml(answer.text).error.message).toContain('npx svc admin create <name>');

    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${service.url}/svc/console/`);
      const gate = page.locator('#view .message.error');
      await gate.waitFor();
      expect(await gate.textContent()).toMatch(
        /^The console is for admins: No administrator is configured\. Run `npx svc admin create <name>`/,
      );
      const violations = await axeViolations(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
      expect(violations.map(violationText)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('makes a global admin through the running service, who signs in at once', async () => {
    const made = await runSvc(['admin', 'create', 'ops'], env);
    expect(made.code).toBe(0);
    password = made.stdout.trim();
    expect(password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(made.output).toContain('created the global admin ops');

    // The console's browser is now asked for credentials instead of being told there is no admin.
    const anonymous = await request(`${service.url}${REST}/admin/me`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic realm="svc"/);

    const basic = (secret: string) => ({
      Authorization: `Basic ${Buffer.from(`ops:${secret}`).toString('base64')}`,
      Accept: 'application/json',
    });
    const me = await request(`${service.url}${REST}/admin/me`, { headers: basic(password) });
    expect(me.status).toBe(200);
    expect(JSON.parse(me.text)).toMatchObject({ principal: 'user:ops', globalAdmin: true });
    expect(
      (await request(`${service.url}${REST}/admin/me`, { headers: basic(`${password}x`) })).status,
    ).toBe(401);

    const audit = await request(`${service.url}${REST}/admin/audit?action=admin.created`, {
      headers: basic(password),
    });
    expect(audit.status).toBe(200);
    expect(audit.text).toContain('admin.created');
  });

  it('opens the console to the admin made', async () => {
    expect(password).not.toBe('');
    const context = await browser.newContext({ httpCredentials: { username: 'ops', password } });
    try {
      const page = await context.newPage();
      await page.goto(`${service.url}/svc/console/`);
      await page.locator('#nav').waitFor();
      expect(await page.locator('#accountName').textContent()).toBe(
        'Signed in as user:ops (global admin)',
      );
    } finally {
      await context.close();
    }
  });

  it('refuses a name that is not a user name, before touching the database', async () => {
    const refused = await runSvc(['admin', 'create', 'two words'], env);
    expect(refused.code).toBe(2);
    expect(refused.output).toContain('is not a user name');
  });
});
