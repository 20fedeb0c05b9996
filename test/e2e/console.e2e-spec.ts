import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { ALICE, basicUsersEnvironment, changeSettingsMeanwhile, ROOT } from '../support/admin-auth';
import { axeViolations, expectPageFiles, launchChromium, violationText } from '../support/browser';
import { request, REST } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/** Screenshots land here (CI keeps test-artifacts/); docs/console.md describes them. */
const ARTIFACTS = resolve(__dirname, '../../test-artifacts');
/** Long enough for a job on webR; a wait ends as soon as its condition holds. */
const JOB_WAIT_MS = 90000;
const WIDE = { width: 1280, height: 900 };
const NARROW = { width: 390, height: 844 };

/** Prints, sleeps (the console must show it running meanwhile), writes a file. */
const WORK_SCRIPT = `
cat("working\\n")
Sys.sleep(5)
writeLines("all good", "report.txt")
`;
const FAIL_SCRIPT = 'stop("no data today")\n';
const LONG_SCRIPT = 'cat("started\\n")\nSys.sleep(300)\n';

/**
 * Injected before the page's own script: counts the console's `jobs` events and records each
 * request it makes (method and address), passing both on to the browser's own.
 */
const INSTRUMENT = `(() => {
  const test = { jobsEvents: 0, requests: [] };
  window.svcTest = test;
  const nativeFetch = window.fetch.bind(window);
  window.fetch = (input, init) => {
    test.requests.push(((init && init.method) || 'GET') + ' ' + String(input));
    return nativeFetch(input, init);
  };
  const NativeEventSource = window.EventSource;
  window.EventSource = class extends NativeEventSource {
    constructor(url, options) {
      super(url, options);
      this.addEventListener('jobs', () => {
        test.jobsEvents += 1;
      });
    }
  };
})();`;

/** root: the global admin; alice: admin of demo only; bob: an admin of nothing. */
const USERS = {
  root: { username: 'root', password: 'root-secret-1' },
  alice: { username: 'alice', password: 'alice-secret-1' },
  bob: { username: 'bob', password: 'bob-secret-1' },
};

/** axe-core's WCAG 2.1 A/AA rules on the page as it is now: every violation, briefly. */
async function wcagViolations(page: Page): Promise<Array<{ impact: string; text: string }>> {
  const violations = await axeViolations(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
  return violations.map((v) => ({ impact: v.impact, text: violationText(v) }));
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `console-${name}.png`), fullPage: true });
}

async function textOf(locator: Locator): Promise<string> {
  return ((await locator.textContent()) ?? '').trim();
}

/** Waits until the locator's text is `expected` (the page changes it on its own). */
async function waitForText(
  locator: Locator,
  expected: string | RegExp,
  what: string,
): Promise<void> {
  await waitFor(
    async () => {
      const text = await locator.textContent().catch(() => null);
      return (
        text !== null &&
        (typeof expected === 'string' ? text.trim() === expected : expected.test(text))
      );
    },
    JOB_WAIT_MS,
    what,
  );
}

describe('the operator console in Chromium', () => {
  let service: TestService;
  let browser: Browser;
  let base: string;
  let scheduleId: string;

  /** Submits a script job to an application as root; answers its id. */
  async function submit(application: string, script: string): Promise<string> {
    const answer = await request(`${base}${REST}/jobs`, {
      method: 'POST',
      headers: {
        ...ROOT,
        'Content-Type': 'application/zip',
        'X-SVC-Application-Name': application,
        Accept: 'application/json',
      },
      body: await makeZip([{ name: 'job.R', content: script }]),
    });
    expect(answer.status).toBe(202);
    return (JSON.parse(answer.text) as { jobId: string }).jobId;
  }

  async function signedIn(user: keyof typeof USERS, options: { bypassCSP?: boolean } = {}) {
    const context = await browser.newContext({
      viewport: WIDE,
      httpCredentials: USERS[user],
      ...options,
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    return { context, page, errors };
  }

  /** Opens a view by its address and waits for its heading. */
  async function open(page: Page, hash: string, heading: string | RegExp): Promise<void> {
    await page.goto(`${base}/svc/console/${hash}`);
    await waitForText(page.locator('#viewHeading'), heading, `the heading ${String(heading)}`);
  }

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    service = await startTestService(
      await basicUsersEnvironment({
        demo: { adminPrincipals: ['user:alice'] },
        other: { adminPrincipals: ['user:root'] },
      }),
    );
    base = service.url;
    const script = await request(`${base}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
      method: 'PUT',
      headers: { ...ROOT, 'X-SVC-Application-Name': 'demo' },
      body: 'writeLines("tick", "tick.txt")\n',
    });
    expect([201, 204]).toContain(script.status);
    const schedule = await request(`${base}${REST}/admin/schedules`, {
      method: 'POST',
      headers: {
        ...ROOT,
        'X-SVC-Application-Name': 'demo',
        'Content-Type': 'application/json',
        Accept: 'application/json',
      },
      body: JSON.stringify({ name: 'hourly tick', cron: '0 * * * *', job: { rScript: 'tick.R' } }),
    });
    expect(schedule.status).toBe(201);
    scheduleId = (JSON.parse(schedule.text) as { id: string }).id;
    browser = await launchChromium();
  }, 120000);
  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });

  it('is served by the service itself under the pages’ Content-Security-Policy', async () => {
    const answers = await expectPageFiles(base, [
      ['/svc/console/', 'text/html'],
      ['/svc/console/console.js', 'text/javascript'],
      ['/svc/console/console.css', 'text/css'],
      ['/svc/page-base.css', 'text/css'],
      ['/svc/result-preview.js', 'text/javascript'],
    ]);
    // No inline script or style, which the policy would refuse.
    for (const answer of answers) {
      expect(answer.text).not.toMatch(/<script>|style="/);
    }
    const bare = await request(`${base}/svc/console`, { redirect: 'manual' });
    expect([bare.status, bare.headers.get('location')]).toEqual([302, 'console/']);
  });

  it('tells a signed-in user who administers nothing that the console is not theirs', async () => {
    const { context, page, errors } = await signedIn('bob');
    try {
      await page.goto(`${base}/svc/console/`);
      const gate = page.locator('#view .message.error');
      await gate.waitFor();
      expect(await textOf(gate)).toMatch(
        /The console is for admins: user:bob is not an admin of any application/,
      );
      expect(await page.locator('#nav').isHidden()).toBe(true);
      await screenshot(page, 'not-an-admin');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  describe('as the global admin', () => {
    let context: BrowserContext;
    let page: Page;
    let errors: string[];

    beforeAll(async () => {
      ({ context, page, errors } = await signedIn('root'));
    });
    afterAll(async () => {
      expect(errors).toEqual([]);
      await context.close();
    });

    it('shows a job appear, run and finish in the overview and in the list, without reloading', async () => {
      await open(page, '#/overview', 'Overview');
      await waitForText(page.locator('#liveState'), /^Live/, 'the event stream open');
      expect(await textOf(page.locator('#accountName'))).toBe(
        'Signed in as user:root (global admin)',
      );
      const jobId = await submit('demo', WORK_SCRIPT);
      const demo = page.locator('tr[data-application="demo"]');
      await waitForText(demo.locator('td[data-label="Running"]'), '1', 'demo running one job');
      await waitForText(
        demo.locator('td[data-label="Done (last hour)"]'),
        '1',
        'demo done one job',
      );
      expect(await textOf(demo.locator('td[data-label="Running"]'))).toBe('0');
      // Four charts as pictures, each with its words for those who cannot see it.
      const charts = page.locator('svg.chart[role="img"]');
      expect(await charts.count()).toBe(4);
      await waitForText(
        page.locator('#chartThroughput-desc'),
        /^done: latest \d+, highest [1-9]\d*; failed: /,
        'the job counted done',
      );
      expect(await textOf(page.locator('#chartThroughput-title'))).toBe(
        'Jobs done and failed per minute (last hour)',
      );
      expect(await textOf(page.locator('#chartWait-title'))).toBe(
        'Wait time, submission to start (last hour)',
      );
      await waitForText(
        page.locator('#chartRun-desc'),
        /^median \(p50\): latest \d/,
        'a run time drawn',
      );
      expect(await page.locator('#chartRun path').count()).toBeGreaterThan(0);
      const worker = page.locator('#view table').last().locator('tbody tr').first();
      expect(await textOf(worker.locator('td[data-label="Slots"]'))).toMatch(/\d+ busy, \d+ free/);
      expect(await textOf(worker.locator('td[data-label="R engine"]'))).toMatch(/native|webr/);
      await screenshot(page, 'overview');
      await page.setViewportSize(NARROW);
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(
        true,
      );
      await screenshot(page, 'overview-narrow');
      await page.setViewportSize(WIDE);
      await page.click('a[href="#/overview?period=day"]');
      await waitForText(
        page.locator('#chartWait-title'),
        'Wait time, submission to start (last day)',
        'the day',
      );

      // The list, open while a second job runs: its row changes on its own.
      await page.click('#nav a[data-view="jobs"]');
      await waitForText(page.locator('#viewHeading'), 'Jobs', 'the jobs view');
      expect(await page.evaluate('document.activeElement.id')).toBe('viewHeading');
      const second = await submit('demo', WORK_SCRIPT);
      const row = page.locator(`tr[data-job-id="${second}"]`);
      await row.waitFor({ timeout: JOB_WAIT_MS });
      await page
        .locator(`tr[data-job-id="${second}"][data-outcome="running"]`)
        .waitFor({ timeout: JOB_WAIT_MS });
      await page
        .locator(`tr[data-job-id="${second}"][data-outcome="succeeded"]`)
        .waitFor({ timeout: JOB_WAIT_MS });
      expect(await textOf(row.locator('td[data-label="Outcome"]'))).toBe('Succeeded');
      expect(await textOf(row.locator('td[data-label="Submitted by"]'))).toBe('user:root');
      await page.locator(`tr[data-job-id="${jobId}"][data-outcome="succeeded"]`).waitFor();
      await screenshot(page, 'jobs');
      await page.setViewportSize(NARROW);
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(
        true,
      );
      await screenshot(page, 'jobs-narrow');
      await page.setViewportSize(WIDE);

      // A job's page: its facts, what R printed and its result's files.
      await row.getByRole('link', { name: `Job ${second} of demo` }).click();
      await waitForText(page.locator('#viewHeading'), `Job ${second}`, 'the job page');
      expect(page.url()).toBe(`${base}/svc/console/#/jobs/demo/${second}`);
      await waitForText(page.locator('#jobLog'), 'working', 'the log');
      await page
        .locator('#previewFiles li[data-name="report.txt"]')
        .waitFor({ timeout: JOB_WAIT_MS });
      expect(await textOf(page.locator('#previewFiles li[data-name="report.txt"] pre'))).toBe(
        'all good',
      );
      expect(await textOf(page.locator('.facts').first())).toContain('Attempts1');
      await screenshot(page, 'job');
    });

    it('retries a failed job from the list', async () => {
      const jobId = await submit('demo', FAIL_SCRIPT);
      await open(page, '#/jobs?state=FAILED', 'Jobs');
      const row = page.locator(`tr[data-job-id="${jobId}"][data-outcome="failed"]`);
      await row.waitFor({ timeout: JOB_WAIT_MS });
      await row.getByRole('button', { name: `Retry job ${jobId}` }).click();
      await waitForText(page.locator('.notes'), `Job ${jobId} is queued again.`, 'the retry said');
      await open(page, `#/jobs/demo/${jobId}`, `Job ${jobId}`);
      await waitForText(page.locator('.facts').first(), /Attempts2/, 'the second attempt counted');
      await page.locator('#jobDetail [data-outcome="failed"]').waitFor({ timeout: JOB_WAIT_MS });
      await waitForText(page.locator('#jobFailure'), /no data today/, 'what R said');
    });

    it('cancels a running job from its page', async () => {
      const jobId = await submit('demo', LONG_SCRIPT);
      await open(page, `#/jobs/demo/${jobId}`, `Job ${jobId}`);
      await waitForText(page.locator('#jobLog'), 'started', 'the job started');
      await page.getByRole('button', { name: `Cancel job ${jobId}` }).click();
      await page.locator('#jobDetail [data-outcome="cancelled"]').waitFor({ timeout: JOB_WAIT_MS });
      expect(await textOf(page.locator('.facts').first())).toMatch(/Cancelled by\S+/);
    });

    it('creates an API key, shows it once, and revokes it', async () => {
      await open(page, '#/keys', 'API keys');
      await page.getByLabel('Principal (who the key signs in as)').fill('nightly-report');
      await page.getByLabel('Roles (comma-separated)').fill('analyst, auditor');
      await page.getByRole('button', { name: 'Create the key' }).click();
      const key = page.locator('#newKey');
      await key.waitFor();
      const secret = await key.inputValue();
      expect(secret).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      const keyId = secret.split('.')[0];
      const row = page.locator(`tr[data-key-id="${keyId}"]`);
      await row.waitFor();
      expect(await textOf(row.locator('td[data-label="Roles"]'))).toBe('analyst, auditor');
      expect(await textOf(page.locator('#view'))).toContain('shown only this once');
      await screenshot(page, 'keys');
      // Shown once: a fresh view has the key listed, never its secret.
      await open(page, '#/overview', 'Overview');
      await open(page, '#/keys', 'API keys');
      await row.waitFor();
      expect(await page.locator('#newKey').count()).toBe(0);
      expect(await page.content()).not.toContain(secret);
      // AUTH_MODE=basic lets no key in: the view said so above the form.
      expect(await page.locator('#keysRefused').count()).toBe(1);
      page.once('dialog', (dialog) => void dialog.accept());
      await row.getByRole('button', { name: `Revoke key ${keyId}` }).click();
      await row.waitFor({ state: 'detached' });
      const refused = await request(`${base}${REST}/admin/api-keys`, {
        headers: { 'X-SVC-API-Key': secret },
      });
      expect(refused.status).toBe(401);
    });

    it('explains the 412 when the settings changed after they were opened', async () => {
      await open(page, '#/settings?application=demo&editor=json', 'Application settings');
      const editor = page.locator('#settingsText');
      await waitFor(
        async () => (await editor.inputValue()).includes('"security"'),
        JOB_WAIT_MS,
        'the settings',
      );
      // Someone else stores a change meanwhile.
      expect(
        await changeSettingsMeanwhile(base, 'demo', {
          security: { adminPrincipals: ['user:alice'] },
          settings: { resultRetentionHours: 48 },
        }),
      ).toBe(200);
      const mine = JSON.parse(await editor.inputValue()) as { settings: Record<string, unknown> };
      mine.settings = { ...mine.settings, resultRetentionHours: 12 };
      await editor.fill(JSON.stringify(mine, null, 2));
      const [saved] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'PUT'),
        page.getByRole('button', { name: 'Save the settings' }).click(),
      ]);
      expect(saved.status()).toBe(412);
      const alert = page.locator('#settingsMessage [role="alert"]');
      await alert.waitFor();
      expect(await textOf(alert)).toMatch(
        /^Not saved: someone changed the settings of demo after you opened them \(you edited version \d+\)\. Nothing was stored\./,
      );
      await screenshot(page, 'settings');
      await page.getByRole('button', { name: 'Load the current settings' }).click();
      await waitFor(
        async () => (await editor.inputValue()).includes('"resultRetentionHours": 48'),
        JOB_WAIT_MS,
        'the current settings',
      );
      await editor.fill(
        (await editor.inputValue()).replace(
          '"resultRetentionHours": 48',
          '"resultRetentionHours": 12',
        ),
      );
      await page.getByRole('button', { name: 'Save the settings' }).click();
      await waitForText(
        page.locator('#settingsMessage'),
        /^Saved as version \d+/,
        'the change stored',
      );
    });

    it('pauses a schedule and shows its state', async () => {
      await open(page, '#/schedules', 'Schedules');
      const row = page.locator('tr[data-schedule="hourly tick"]');
      await row.waitFor();
      expect(await textOf(row.locator('td[data-label="State"]'))).toBe('Active');
      await row.getByRole('button', { name: 'Pause schedule hourly tick' }).click();
      await waitForText(row.locator('td[data-label="State"]'), 'Paused', 'the schedule paused');
      expect(await textOf(row.locator('td[data-label="Next run"]'))).toBe('none while paused');
      await screenshot(page, 'schedules');
      const stored = await request(`${base}${REST}/admin/schedules/${scheduleId}`, {
        headers: { ...ROOT, 'X-SVC-Application-Name': 'demo', Accept: 'application/json' },
      });
      expect((JSON.parse(stored.text) as { paused: boolean }).paused).toBe(true);
    });

    it('filters the audit trail, links its jobs as everywhere else, and downloads it as CSV', async () => {
      await open(page, '#/audit?action=job.retried', 'Audit trail');
      const first = page.locator('#view tbody tr').first();
      await first.waitFor();
      expect(await textOf(first.locator('td[data-label="Action"]'))).toBe('job.retried');
      const link = first.locator('td[data-label="Job"] a');
      const href = await link.getAttribute('href');
      expect(href).toMatch(/^#\/jobs\/demo\/[0-9a-f-]{36}$/);
      await screenshot(page, 'audit');
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.click('#auditCsv'),
      ]);
      expect(download.suggestedFilename()).toBe('audit.csv');
      const csv = readFileSync(await download.path(), 'utf8');
      const [header, ...rows] = csv.trim().split(/\r?\n/);
      expect(header).toContain('action');
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.every((line) => line.includes('job.retried'))).toBe(true);
      // The same address of the job in the audit trail, the API's links and the console.
      expect(csv).toContain(`${base}/svc/console/${href ?? ''}`);
      // The action filter lists the actions the trail records.
      const action = page.getByLabel('Action', { exact: true });
      expect(await action.inputValue()).toBe('job.retried');
      const actions = await action.locator('option').allTextContents();
      expect(actions).toEqual(expect.arrayContaining(['Any', 'job.cancelled', 'apiKey.created']));
      await action.selectOption('job.cancelled');
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await waitForText(
        page.locator('#view tbody tr td[data-label="Action"]').first(),
        'job.cancelled',
        'the cancels listed',
      );
      expect(page.url()).toContain('action=job.cancelled');
    });

    it('lists, uploads and deletes catalog files, and lists packages', async () => {
      await open(page, '#/catalog?application=demo', 'Catalog');
      await page.locator('tr', { hasText: 'tick.R' }).waitFor();
      await page.setInputFiles('#catalogFile', {
        name: 'extra.R',
        mimeType: 'text/plain',
        buffer: Buffer.from('1\n'),
      });
      await page.getByRole('button', { name: 'Upload' }).click();
      const row = page.locator('tr', { hasText: 'extra.R' });
      await row.waitFor();
      await screenshot(page, 'catalog');
      page.once('dialog', (dialog) => void dialog.accept());
      await row.getByRole('button', { name: 'Delete R_SCRIPTS/extra.R' }).click();
      await row.waitFor({ state: 'detached' });
      await open(page, '#/packages?application=demo', 'R packages');
      await waitForText(
        page.locator('#view .empty'),
        'demo has no packages of its own.',
        'no packages',
      );
      await screenshot(page, 'packages');
    });
  });

  it('keeps an edit of the settings when jobs change meanwhile: no refetch replaces it (hostile)', async () => {
    const { context, page, errors } = await signedIn('root');
    const heard = (): Promise<number> => page.evaluate<number>('window.svcTest.jobsEvents');
    const requests = (): Promise<string[]> => page.evaluate<string[]>('window.svcTest.requests');
    try {
      await context.addInitScript(INSTRUMENT);
      await page.clock.install();
      await open(page, '#/overview', 'Overview');
      await waitForText(page.locator('#liveState'), /^Live/, 'the event stream open');
      // From here on the page's timers fire only when the test moves its clock.
      await page.clock.pauseAt((await page.evaluate<number>('Date.now()')) + 1000);
      const before = await heard();
      await submit('demo', 'writeLines("x", "x.txt")\n');
      await waitFor(async () => (await heard()) > before, JOB_WAIT_MS, 'a jobs event heard');
      // The overview's refetch is now due in a second; the settings are opened before it is.
      await page.evaluate("location.hash = '#/settings?application=demo&editor=json'");
      await waitForText(page.locator('#viewHeading'), 'Application settings', 'the settings');
      const editor = page.locator('#settingsText');
      await waitFor(
        async () => (await editor.inputValue()).includes('"security"'),
        JOB_WAIT_MS,
        'the settings read',
      );
      const opened = (await requests()).length;
      expect(
        await changeSettingsMeanwhile(base, 'demo', {
          security: { adminPrincipals: ['user:alice'] },
          settings: { resultRetentionHours: 36 },
        }),
      ).toBe(200);
      const mine = JSON.parse(await editor.inputValue()) as { settings: Record<string, unknown> };
      mine.settings = { ...mine.settings, resultRetentionHours: 7 };
      await editor.fill(JSON.stringify(mine, null, 2));
      // The moment the refetch was due passes: it must not read the settings again.
      await page.clock.runFor(3000);
      expect((await requests()).slice(opened)).toEqual([]);
      expect(await editor.inputValue()).toContain('"resultRetentionHours": 7');
      const [saved] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'PUT'),
        page.getByRole('button', { name: 'Save the settings' }).click(),
      ]);
      expect(saved.status()).toBe(412);
      await page.locator('#settingsMessage [role="alert"]').waitFor();
      expect(await editor.inputValue()).toContain('"resultRetentionHours": 7');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('finds a job by its id or its first characters from any view, and counts and pages the list', async () => {
    const { context, page, errors } = await signedIn('root', { bypassCSP: true });
    try {
      for (let i = 0; i < 3; i++) {
        await submit('demo', 'writeLines("x", "x.txt")\n');
      }
      const listed = await request(`${base}${REST}/admin/jobs?application=demo&limit=200`, {
        headers: { ...ROOT, Accept: 'application/json' },
      });
      const jobs = (JSON.parse(listed.text) as { jobs: Array<{ jobId: string }> }).jobs;
      expect(jobs.length).toBeGreaterThanOrEqual(3);
      const target = jobs[1].jobId;
      await open(page, '#/schedules', 'Schedules');
      await page
        .getByLabel('Find a job by its id or its first characters')
        .fill(target.slice(0, 8));
      await page.getByRole('button', { name: 'Find', exact: true }).click();
      await waitForText(page.locator('#viewHeading'), `Job ${target}`, 'the job found');
      expect(page.url()).toBe(`${base}/svc/console/#/jobs/demo/${target}`);
      expect((await wcagViolations(page)).map((v) => v.text)).toEqual([]);
      // No job has these: the list says so, with the id in its filter.
      await page.getByLabel('Find a job by its id or its first characters').fill('ffffffffffff');
      await page.getByRole('button', { name: 'Find', exact: true }).click();
      await waitForText(page.locator('#view .empty'), 'No job matches.', 'nothing found');
      expect(await page.locator('#jobsId').inputValue()).toBe('ffffffffffff');
      // Two a page: the total, the page's place, and the next page.
      const pages = Math.ceil(jobs.length / 2);
      await open(page, '#/jobs?application=demo&limit=2', 'Jobs');
      await waitForText(
        page.locator('#jobsTotal'),
        `${jobs.length} jobs match; 1–2 shown, page 1 of ${pages}.`,
        'the total',
      );
      expect((await wcagViolations(page)).map((v) => v.text)).toEqual([]);
      await page.getByRole('link', { name: 'Next page (2)' }).click();
      await waitForText(
        page.locator('#jobsTotal'),
        `${jobs.length} jobs match; 3–${Math.min(4, jobs.length)} shown, page 2 of ${pages}.`,
        'the second page',
      );
      expect(await page.locator(`tr[data-job-id="${jobs[2].jobId}"]`).count()).toBe(1);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('shows an application admin only their applications', async () => {
    const otherJob = await submit('other', 'writeLines("x", "x.txt")\n');
    const demoJob = await submit('demo', 'writeLines("x", "x.txt")\n');
    const { context, page, errors } = await signedIn('alice');
    try {
      await open(page, '#/jobs', 'Jobs');
      await page.locator(`tr[data-job-id="${demoJob}"]`).waitFor({ timeout: JOB_WAIT_MS });
      expect(await page.locator(`tr[data-job-id="${otherJob}"]`).count()).toBe(0);
      expect(await textOf(page.locator('#accountName'))).toBe('Signed in as user:alice');
      await open(page, '#/overview', 'Overview');
      await page.locator('tr[data-application="demo"]').waitFor();
      expect(await page.locator('tr[data-application="other"]').count()).toBe(0);
      await screenshot(page, 'application-admin');
      // The global admins' views are not offered; their addresses say whose they are.
      for (const globalView of ['keys', 'settings', 'audit']) {
        expect(await page.locator(`#nav a[data-view="${globalView}"]`).isVisible()).toBe(false);
      }
      expect(await page.locator('#nav a[data-view="schedules"]').isVisible()).toBe(true);
      await open(page, '#/keys', 'API keys');
      expect(await textOf(page.locator('#view'))).toBe(
        'Only global admins manage API keys; you administer demo.',
      );
      const direct = await request(`${base}${REST}/admin/jobs/other/${otherJob}`, {
        headers: { ...ALICE, Accept: 'application/json' },
      });
      expect(direct.status).toBe(404);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('links an accepted job from the upload page to its console address', async () => {
    const { context, page } = await signedIn('root');
    try {
      await page.goto(`${base}/svc/`);
      await page.fill('#applicationName', 'demo');
      await page.setInputFiles('#jobFiles', [
        { name: 'ok.R', mimeType: 'text/plain', buffer: Buffer.from('writeLines("x", "x.txt")\n') },
      ]);
      await page.click('#jobSubmitButton');
      await waitForText(page.locator('#jobId'), /^[0-9a-f-]{36}$/, 'the job accepted');
      const jobId = await textOf(page.locator('#jobId'));
      expect(await page.locator('#jobConsoleLink').getAttribute('href')).toBe(
        `/svc/console/#/jobs/demo/${jobId}`,
      );
      const job = await request(`${base}${REST}/admin/jobs/demo/${jobId}`, {
        headers: { ...ROOT, Accept: 'application/json' },
      });
      expect((JSON.parse(job.text) as { links: { console: string } }).links.console).toBe(
        `${base}/svc/console/#/jobs/demo/${jobId}`,
      );
      await page.click('#jobConsoleLink');
      await waitForText(page.locator('#viewHeading'), `Job ${jobId}`, 'the console on the job');
    } finally {
      await context.close();
    }
  });

  it('can be used with the keyboard alone', async () => {
    const { context, page } = await signedIn('root');
    try {
      await open(page, '#/overview', 'Overview');
      await page.keyboard.press('Tab');
      expect(await textOf(page.locator(':focus'))).toBe('Skip to the content');
      // Through the account and the navigation to the jobs link, then Enter.
      for (
        let i = 0;
        i < 20 && (await page.locator(':focus').getAttribute('data-view')) !== 'jobs';
        i++
      ) {
        await page.keyboard.press('Tab');
      }
      await page.keyboard.press('Enter');
      await waitForText(page.locator('#viewHeading'), 'Jobs', 'the jobs view');
      expect(await page.evaluate('document.activeElement.id')).toBe('viewHeading');
      expect(await page.locator('#nav a[aria-current="page"]').textContent()).toBe('Jobs');
    } finally {
      await context.close();
    }
  });

  it('has no serious or critical axe-core violations on any view, wide and narrow', async () => {
    // axe is injected as a script, which the page's Content-Security-Policy would refuse.
    const { context, page } = await signedIn('root', { bypassCSP: true });
    const results: Record<string, Array<{ impact: string; text: string }>> = {};
    try {
      const views: Array<[string, string | RegExp, string]> = [
        ['#/overview', 'Overview', 'tr[data-application="demo"]'],
        ['#/jobs', 'Jobs', 'tbody tr'],
        ['#/schedules', 'Schedules', 'tr[data-schedule]'],
        ['#/keys', 'API keys', '#view form'],
        ['#/settings?application=demo', 'Application settings', '#settingsFields select'],
        ['#/audit', 'Audit trail', 'tbody tr'],
        ['#/packages?application=demo', 'R packages', '#view .empty'],
        ['#/catalog?application=demo', 'Catalog', 'tbody tr'],
      ];
      const list = await request(
        `${base}${REST}/admin/jobs?application=demo&state=SUCCEEDED&limit=1`,
        {
          headers: { ...ROOT, Accept: 'application/json' },
        },
      );
      const done = (JSON.parse(list.text) as { jobs: Array<{ jobId: string }> }).jobs[0].jobId;
      views.push([`#/jobs/demo/${done}`, `Job ${done}`, '#previewFiles li']);
      for (const [hash, heading, ready] of views) {
        await open(page, hash, heading);
        await page.locator(ready).first().waitFor({ timeout: JOB_WAIT_MS });
        results[hash] = await wcagViolations(page);
      }
      await page.setViewportSize(NARROW);
      for (const [hash, heading, ready] of views.slice(0, 2)) {
        await open(page, hash, heading);
        await page.locator(ready).first().waitFor();
        results[`${hash} at 390 px`] = await wcagViolations(page);
      }
    } finally {
      await context.close();
    }
    // Every view's findings, whatever their impact, for docs/console.md and the review.
    writeFileSync(join(ARTIFACTS, 'console-axe.json'), `${JSON.stringify(results, null, 2)}\n`);
    for (const [view, violations] of Object.entries(results)) {
      const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      expect([view, serious.map((v) => v.text)]).toEqual([view, []]);
    }
    expect(Object.keys(results)).toHaveLength(11);
  });
});
