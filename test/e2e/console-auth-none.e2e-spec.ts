/**
 * The operator console and its API with AUTH_MODE=none and an ADMIN_USER, the mode of a first
 * start: every action taken from the console is recorded as the signed-in admin (a single cancel
 * too, which went through the job API and was audited as anonymous), the keys view says before a
 * key is made that this mode refuses API keys, and a job's progress note goes when it ends. In
 * Chromium with axe-core's WCAG 2.1 A/AA rules: no violation on the views these tests open.
 */
import { Browser, Page } from 'playwright-core';
import {
  ADMIN_AUTHORIZATION,
  ADMIN_ENV,
  TEST_ADMIN_PASSWORD,
  TEST_ADMIN_USER,
} from '../support/admin-auth';
import { axeViolations, launchChromium, violationText } from '../support/browser';
import { request, REST } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const JOB_WAIT_MS = 90000;
/** Says how far it is, then runs until cancelled. */
const LONG_SCRIPT = 'svc_progress(0.5, "halfway")\ncat("started\\n")\nSys.sleep(300)\n';
const ADMIN = { Authorization: ADMIN_AUTHORIZATION, Accept: 'application/json' };
const ADMIN_PRINCIPAL = `user:${TEST_ADMIN_USER}`;

interface AuditEvent {
  principal: string | null;
  action: string;
  jobId: string | null;
}

describe('the operator console with AUTH_MODE=none and an ADMIN_USER', () => {
  let service: TestService;
  let base: string;
  let browser: Browser;

  /** Submits a script job to demo without credentials, as this mode allows; its id. */
  async function submit(script: string): Promise<string> {
    const answer = await request(`${base}${REST}/jobs`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/zip',
        'X-SVC-Application-Name': 'demo',
        Accept: 'application/json',
      },
      body: await makeZip([{ name: 'job.R', content: script }]),
    });
    expect(answer.status).toBe(202);
    return (JSON.parse(answer.text) as { jobId: string }).jobId;
  }

  async function auditOf(jobId: string, action: string): Promise<AuditEvent[]> {
    const answer = await request(
      `${base}${REST}/admin/audit?format=json&action=${action}&limit=100`,
      { headers: ADMIN },
    );
    expect(answer.status).toBe(200);
    return (JSON.parse(answer.text) as { auditEvents: AuditEvent[] }).auditEvents.filter(
      (event) => event.jobId === jobId,
    );
  }

  async function running(jobId: string): Promise<boolean> {
    const answer = await request(`${base}${REST}/admin/jobs/demo/${jobId}`, { headers: ADMIN });
    return (JSON.parse(answer.text) as { state: string }).state === 'RUNNING';
  }

  async function noViolations(page: Page): Promise<void> {
    const violations = await axeViolations(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
    expect(violations.map(violationText)).toEqual([]);
  }

  async function adminPage(): Promise<{ page: Page; close: () => Promise<void> }> {
    // axe is injected as a script, which the page's Content-Security-Policy would refuse.
    const context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      httpCredentials: { username: TEST_ADMIN_USER, password: TEST_ADMIN_PASSWORD },
      bypassCSP: true,
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    return {
      page,
      close: async () => {
        await context.close();
        expect(errors).toEqual([]);
      },
    };
  }

  async function open(page: Page, hash: string, heading: string): Promise<void> {
    await page.goto(`${base}/svc/console/${hash}`);
    await waitFor(
      async () => ((await page.locator('#viewHeading').textContent()) ?? '').trim() === heading,
      JOB_WAIT_MS,
      `the heading ${heading}`,
    );
  }

  beforeAll(async () => {
    service = await startTestService({ ...ADMIN_ENV, SCRIPT_SLOTS: '2' });
    base = service.url;
    browser = await launchChromium();
  }, 120000);
  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });

  it('cancels one job through the console API in the admin’s name: 200, then 409, 404, 400, 401', async () => {
    const jobId = await submit(LONG_SCRIPT);
    const url = `${base}${REST}/admin/jobs/demo/${jobId}/cancel`;
    const cancelled = await request(url, { method: 'POST', headers: ADMIN });
    expect(cancelled.status).toBe(200);
    expect(JSON.parse(cancelled.text)).toMatchObject({
      jobId,
      outcome: 'cancelled',
      cancelledBy: ADMIN_PRINCIPAL,
    });
    expect((await auditOf(jobId, 'job.cancelled')).map((e) => e.principal)).toEqual([
      ADMIN_PRINCIPAL,
    ]);
    expect((await request(url, { method: 'POST', headers: ADMIN })).status).toBe(409);
    const unknown = `${base}${REST}/admin/jobs/demo/5b1e0c52-7d3e-4b8a-9c21-0e5f4d3b2a10/cancel`;
    expect((await request(unknown, { method: 'POST', headers: ADMIN })).status).toBe(404);
    const bad = `${base}${REST}/admin/jobs/demo/not-a-job/cancel`;
    expect((await request(bad, { method: 'POST', headers: ADMIN })).status).toBe(400);
    const anonymous = await request(url, {
      method: 'POST',
      headers: { Accept: 'application/json' },
    });
    expect(anonymous.status).toBe(401);
  });

  it('says in /admin/me and on the keys view, before a key is made, that this mode refuses keys', async () => {
    const me = await request(`${base}${REST}/admin/me`, { headers: ADMIN });
    expect(JSON.parse(me.text)).toMatchObject({
      principal: ADMIN_PRINCIPAL,
      apiKeysAccepted: false,
    });
    const { page, close } = await adminPage();
    try {
      await open(page, '#/keys', 'API keys');
      const note = page.locator('#keysRefused');
      await note.waitFor();
      expect(await note.textContent()).toMatch(/AUTH_MODE does not let API keys in/);
      // Said before the form, so it is read before the key is made.
      const order = await page.evaluate<number>(
        "document.getElementById('keysRefused').compareDocumentPosition(document.querySelector('#view form'))",
      );
      expect(order & 4).toBe(4);
      await noViolations(page);
    } finally {
      await close();
    }
  });

  it('records a cancel from a job’s page as the admin, and drops the progress note when it ends; its run time counts while it runs', async () => {
    const jobId = await submit(LONG_SCRIPT);
    await waitFor(() => running(jobId), JOB_WAIT_MS, 'the job running');
    const { page, close } = await adminPage();
    try {
      await open(page, `#/jobs/demo/${jobId}`, `Job ${jobId}`);
      const progress = page.locator('#jobProgress');
      await waitFor(
        async () => /halfway/.test((await progress.textContent()) ?? ''),
        JOB_WAIT_MS,
        'the progress shown',
      );
      // Its run time counts up while it runs.
      const elapsed = page.locator('#jobElapsed');
      const first = (await elapsed.textContent()) ?? '';
      expect(first).toMatch(/^running for \d/);
      await waitFor(
        async () => ((await elapsed.textContent()) ?? first) !== first,
        JOB_WAIT_MS,
        'the run time counting',
      );
      await noViolations(page);
      await page.getByRole('button', { name: `Cancel job ${jobId}` }).click();
      await page.locator('#jobDetail [data-outcome="cancelled"]').waitFor({ timeout: JOB_WAIT_MS });
      expect(await page.locator('.facts').first().textContent()).toContain(
        `Cancelled by${ADMIN_PRINCIPAL}`,
      );
      expect(((await progress.textContent()) ?? '').trim()).toBe('');
      expect((await auditOf(jobId, 'job.cancelled')).map((e) => e.principal)).toEqual([
        ADMIN_PRINCIPAL,
      ]);
    } finally {
      await close();
    }
  });

  it('records a cancel from the list as the admin', async () => {
    const jobId = await submit(LONG_SCRIPT);
    const { page, close } = await adminPage();
    try {
      await open(page, '#/jobs?application=demo', 'Jobs');
      const row = page.locator(`tr[data-job-id="${jobId}"]`);
      await row.waitFor({ timeout: JOB_WAIT_MS });
      await row.getByRole('button', { name: `Cancel job ${jobId}` }).click();
      await page
        .locator(`tr[data-job-id="${jobId}"][data-outcome="cancelled"]`)
        .waitFor({ timeout: JOB_WAIT_MS });
      expect(((await page.locator('.notes').textContent()) ?? '').trim()).toBe(
        `Job ${jobId} cancelled.`,
      );
      expect((await auditOf(jobId, 'job.cancelled')).map((e) => e.principal)).toEqual([
        ADMIN_PRINCIPAL,
      ]);
    } finally {
      await close();
    }
  });
});
