/**
 * What operators coming from Sidekiq Web, Oban Web or Posit Connect look for in the console:
 * retrying every failed job a filter matches (a confirmation naming the count, audited, within
 * the application's maxQueuedJobs), a function call's R function in the list, per worker its
 * running jobs, version, start and memory, a job's input files with their download, and the
 * settings as a form generated from their schema (the raw JSON kept, the 412 too). Over the API
 * and in Chromium, each view with axe-core's WCAG 2.1 A/AA rules and no violation.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { SERVICE_VERSION } from '../../src/config/app-config';
import { loadTestCatalog } from '../support/function-calls';
import { ALICE, basicUsersEnvironment, changeSettingsMeanwhile, ROOT } from '../support/admin-auth';
import { axeViolations, launchChromium, violationText } from '../support/browser';
import { request, REST } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const ARTIFACTS = resolve(__dirname, '../../test-artifacts');
const JOB_WAIT_MS = 90000;
const FAIL_SCRIPT = 'stop("no data today")\n';
const LONG_SCRIPT = 'cat("started\\n")\nSys.sleep(300)\n';
const JSON_HEADERS = { ...ROOT, Accept: 'application/json' };

interface Job {
  jobId: string;
  state: string;
  outcome: string;
  functionName: string | null;
  inputFiles?: { total: number; files: Array<{ name: string; size: number; uri: string }> };
}

describe('the console’s operator tools', () => {
  let service: TestService;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let errors: string[];

  async function submit(application: string, script: string, extra: Buffer | null = null) {
    const files = [{ name: 'job.R', content: script }];
    if (extra !== null) {
      files.push({ name: 'data.csv', content: extra.toString('utf8') });
    }
    const answer = await request(`${base}${REST}/jobs`, {
      method: 'POST',
      headers: {
        ...JSON_HEADERS,
        'Content-Type': 'application/zip',
        'X-SVC-Application-Name': application,
      },
      body: await makeZip(files),
    });
    expect(answer.status).toBe(202);
    return (JSON.parse(answer.text) as { jobId: string }).jobId;
  }

  async function job(application: string, jobId: string, headers = JSON_HEADERS): Promise<Job> {
    const answer = await request(`${base}${REST}/admin/jobs/${application}/${jobId}`, { headers });
    expect(answer.status).toBe(200);
    return JSON.parse(answer.text) as Job;
  }

  async function until(application: string, jobId: string, state: string): Promise<Job> {
    return waitFor(
      async () => {
        const now = await job(application, jobId);
        return now.state === state ? now : null;
      },
      JOB_WAIT_MS,
      `job ${jobId} ${state}`,
    );
  }

  function post(path: string, body: unknown, headers: Record<string, string> = JSON_HEADERS) {
    return request(`${base}${REST}${path}`, {
      method: 'POST',
      headers: { ...headers, Accept: 'application/json', 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  async function noViolations(): Promise<void> {
    const violations = await axeViolations(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
    expect(violations.map(violationText)).toEqual([]);
  }

  /** Screenshots land in test-artifacts/ (CI keeps it); docs/console.md describes them. */
  async function screenshot(name: string): Promise<void> {
    await page.screenshot({ path: join(ARTIFACTS, `console-${name}.png`), fullPage: true });
  }

  async function open(hash: string, heading: string): Promise<void> {
    await page.goto(`${base}/svc/console/${hash}`);
    await waitFor(
      async () => ((await page.locator('#viewHeading').textContent()) ?? '').trim() === heading,
      JOB_WAIT_MS,
      `the heading ${heading}`,
    );
  }

  async function textOf(selector: string): Promise<string> {
    return ((await page.locator(selector).first().textContent()) ?? '').trim();
  }

  beforeAll(async () => {
    const environment = await basicUsersEnvironment({
      demo: { adminPrincipals: ['user:alice'] },
      limited: { adminPrincipals: ['user:root'] },
    });
    service = await startTestService({
      ...environment,
      SCRIPT_SLOTS: '3',
      // limited: one job queued at most, and one running, so that retried jobs stay queued.
      APPLICATION_SETTINGS: JSON.stringify({ limited: { maxQueuedJobs: 1, maxRunningJobs: 1 } }),
    });
    base = service.url;
    mkdirSync(ARTIFACTS, { recursive: true });
    await loadTestCatalog(service);
    browser = await launchChromium();
    // axe is injected as a script, which the page's Content-Security-Policy would refuse.
    context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      httpCredentials: { username: 'root', password: 'root-secret-1' },
      bypassCSP: true,
      acceptDownloads: true,
    });
    page = await context.newPage();
    errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
  }, 120000);
  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });
  afterEach(() => {
    expect(errors).toEqual([]);
  });

  it('retries the failed jobs a filter matches: the count confirmed, each audited, within maxQueuedJobs', async () => {
    // One at a time: limited takes one queued job at most.
    const failed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await submit('limited', FAIL_SCRIPT);
      expect((await until('limited', id, 'DONE')).outcome).toBe('failed');
      failed.push(id);
    }
    // It runs the one job limited may run at once: whatever is retried stays queued.
    const long = await submit('limited', LONG_SCRIPT);
    await until('limited', long, 'RUNNING');

    expect((await post('/admin/jobs/retry', { application: 'limited', dryRun: true })).text).toBe(
      JSON.stringify({ failed: 3, capped: false }),
    );
    // Bad bodies, and an application its caller does not administer.
    for (const body of [{ state: 'FAILED' }, { dryRun: 'yes' }, { limit: 0 }, []]) {
      expect([body, (await post('/admin/jobs/retry', body)).status]).toEqual([body, 400]);
    }
    const foreign = await post('/admin/jobs/retry', { application: 'limited' }, ALICE);
    expect(foreign.status).toBe(403);

    await open('#/jobs?application=limited&state=FAILED', 'Jobs');
    await page.locator(`tr[data-job-id="${failed[0]}"]`).waitFor({ timeout: JOB_WAIT_MS });
    let confirmation = '';
    page.once('dialog', (dialog) => {
      confirmation = dialog.message();
      void dialog.accept();
    });
    await page.getByRole('button', { name: 'Retry the failed jobs that match' }).click();
    await waitFor(
      async () => /^Retried 1 failed job\./.test(await textOf('.notes')),
      JOB_WAIT_MS,
      'the retry reported',
    );
    expect(confirmation).toBe('Retry 3 failed jobs that match the filter?');
    await screenshot('retry-failed');
    expect(await textOf('.notes')).toBe(
      'Retried 1 failed job. 2 of limited not retried: it has 1 job queued, its limit (maxQueuedJobs).',
    );
    await noViolations();

    // The newest was retried and waits; a single retry of another meets the same limit.
    const states = await Promise.all(failed.map((id) => job('limited', id)));
    expect(states.map((s) => s.state)).toEqual(['DONE', 'DONE', 'QUEUED']);
    const single = await post(`/admin/jobs/limited/${failed[0]}/retry`, {});
    expect([single.status, single.headers.get('retry-after')]).toEqual([429, '10']);
    expect(JSON.parse(single.text)).toMatchObject({
      message:
        'The application "limited" has 1 jobs queued, its limit (maxQueuedJobs: 1): retry once some have started.',
    });

    const audit = await request(
      `${base}${REST}/admin/audit?format=json&action=job.retried&limit=100`,
      { headers: JSON_HEADERS },
    );
    const rows = (
      JSON.parse(audit.text) as {
        auditEvents: Array<{ principal: string; jobId: string; details: string | null }>;
      }
    ).auditEvents;
    expect(rows.map((row) => [row.principal, row.jobId])).toEqual([['user:root', failed[2]]]);
    expect(JSON.parse(rows[0].details ?? '{}')).toEqual({ filter: { application: 'limited' } });

    const cancelled = await post('/admin/jobs/cancel', { application: 'limited' });
    expect(JSON.parse(cancelled.text)).toMatchObject({ cancelled: 2 });
  });

  it('names a function call’s R function in the list and on the job’s page', async () => {
    const call = await request(`${base}${REST}/jobs`, {
      method: 'POST',
      headers: {
        ...JSON_HEADERS,
        'Content-Type': 'application/json',
        'X-SVC-Application-Name': 'demo',
      },
      body: '{"RFunction":"hello"}',
    });
    expect(call.status).toBe(202);
    const plain = JSON.parse(call.text) as { jobToken?: { jobId: string }; jobId?: string };
    const plainId = plain.jobId ?? plain.jobToken!.jobId;
    const exported = await request(`${base}${REST}/functions/demo/sum2`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, 'Content-Type': 'application/json', Prefer: 'respond-async' },
      body: '{"x": 1, "y": 2}',
    });
    expect(exported.status).toBe(202);
    const exportedId = (JSON.parse(exported.text) as { jobId: string }).jobId;
    const script = await submit('demo', 'cat("hi")\n');
    // Kept after the job succeeded (its input file, which names an exported call, is gone then).
    expect((await until('demo', exportedId, 'DONE')).functionName).toBe('sum2');
    expect((await until('demo', plainId, 'DONE')).functionName).toBe('svcJsonService');
    expect((await until('demo', script, 'DONE')).functionName).toBeNull();

    await open('#/jobs?application=demo', 'Jobs');
    const cell = (id: string) => page.locator(`tr[data-job-id="${id}"] td[data-label="Function"]`);
    await cell(exportedId).waitFor({ timeout: JOB_WAIT_MS });
    expect(
      await Promise.all(
        [exportedId, plainId, script].map(async (id) => (await cell(id).textContent())?.trim()),
      ),
    ).toEqual(['sum2', 'svcJsonService', '–']);
    await noViolations();
    await open(`#/jobs/demo/${exportedId}`, `Job ${exportedId}`);
    await page.locator('.facts dd code', { hasText: 'sum2' }).waitFor();
  });

  it('shows per worker its running jobs, version, start and memory; an application admin sees only theirs', async () => {
    const mine = await submit('demo', LONG_SCRIPT);
    try {
      const theirs = await submit('limited', LONG_SCRIPT);
      await until('demo', mine, 'RUNNING');
      await until('limited', theirs, 'RUNNING');
      type Worker = {
        node: string;
        busy: number;
        version: string;
        startedAt: string;
        memoryBytes: number;
        runningJobs: Array<{ applicationName: string; jobId: string }>;
      };
      const workersOf = async (headers: Record<string, string>) =>
        (
          JSON.parse(
            (
              await request(`${base}${REST}/admin/overview`, {
                headers: { ...headers, Accept: 'application/json' },
              })
            ).text,
          ) as { workers: Worker[] }
        ).workers;
      const [worker] = await workersOf(ROOT);
      expect(worker.version).toBe(SERVICE_VERSION);
      expect(Date.parse(worker.startedAt)).toBeLessThan(Date.now());
      expect(worker.memoryBytes).toBeGreaterThan(10 * 2 ** 20);
      expect(new Set(worker.runningJobs.map((j) => j.jobId))).toEqual(new Set([mine, theirs]));
      // alice administers demo only: limited's job counts in busy, unnamed.
      const [seenByAlice] = await workersOf(ALICE);
      expect([seenByAlice.busy, seenByAlice.runningJobs.map((j) => j.jobId)]).toEqual([2, [mine]]);

      await open('#/overview', 'Overview');
      const row = page.locator(`tr[data-node="${worker.node}"]`);
      await row.locator(`a[href="#/jobs/demo/${mine}"]`).waitFor({ timeout: JOB_WAIT_MS });
      expect(await row.locator('td[data-label="Version"]').textContent()).toBe(SERVICE_VERSION);
      expect(await row.locator('td[data-label="Memory"]').textContent()).toMatch(
        /^\d+(\.\d)? [MG]iB$/,
      );
      expect(await row.locator('td[data-label="Running jobs"]').textContent()).toMatch(
        /demo, running for \d/,
      );
      await screenshot('workers');
      await noViolations();
    } finally {
      // The next tests need the slots: the running jobs end whatever was seen.
      await post('/admin/jobs/cancel', {});
    }
  });

  it('lists a job’s input files with their sizes, and downloads one for its admins only', async () => {
    const data = Buffer.from('x,y\n1,2\n3,4\n');
    const failed = await submit('demo', FAIL_SCRIPT, data);
    await until('demo', failed, 'DONE');
    const { inputFiles } = await job('demo', failed);
    expect(inputFiles).toEqual({
      total: 2,
      files: [
        {
          name: 'data.csv',
          size: data.length,
          uri: expect.stringMatching(/\/files\/\d+$/) as string,
        },
        { name: 'job.R', size: FAIL_SCRIPT.length, uri: expect.any(String) as string },
      ],
    });
    const uri = inputFiles!.files[0].uri;
    const download = await request(uri, { headers: ROOT });
    expect([
      download.status,
      download.headers.get('content-type'),
      download.headers.get('content-disposition'),
      download.text,
    ]).toEqual([
      200,
      'application/octet-stream',
      `attachment; filename="data.csv"; filename*=UTF-8''data.csv`,
      data.toString('utf8'),
    ]);
    // Another application's admin, a file id of another job, a bad file id.
    const limitedJob = await submit('limited', FAIL_SCRIPT);
    await until('limited', limitedJob, 'DONE');
    const limitedFile = (await job('limited', limitedJob)).inputFiles!.files[0].uri;
    expect((await request(limitedFile, { headers: ALICE })).status).toBe(404);
    const fileId = limitedFile.split('/').pop()!;
    expect((await request(`${uri.replace(/\d+$/, fileId)}`, { headers: ROOT })).status).toBe(404);
    expect((await request(uri.replace(/\d+$/, 'x1'), { headers: ROOT })).status).toBe(400);

    await open(`#/jobs/demo/${failed}`, `Job ${failed}`);
    const link = page.locator('#jobInputs a', { hasText: 'data.csv' });
    await link.waitFor({ timeout: JOB_WAIT_MS });
    expect(await textOf('#jobInputs td[data-label="Size"]')).toBe(`${data.length} bytes`);
    await screenshot('job-inputs');
    const [saved] = await Promise.all([page.waitForEvent('download'), link.click()]);
    expect(saved.suggestedFilename()).toBe('data.csv');
    await noViolations();
    // A succeeded job's inputs are gone, and its page says why.
    const done = await submit('demo', 'cat("ok")\n');
    await until('demo', done, 'DONE');
    expect((await job('demo', done)).inputFiles).toEqual({ total: 0, files: [] });
    await open(`#/jobs/demo/${done}`, `Job ${done}`);
    await page.locator('#jobInputs .empty', { hasText: 'removed once it succeeds' }).waitFor();
  });

  it('edits the settings in a form generated from their schema, keeps the 412, and the JSON as an option', async () => {
    await open('#/settings?application=demo', 'Application settings');
    const queued = page.getByLabel('Most jobs queued', { exact: true });
    await queued.waitFor({ timeout: JOB_WAIT_MS });
    // The form shows what is stored: alice administers demo.
    expect(await page.getByLabel('Admins (principals)', { exact: true }).inputValue()).toBe(
      'user:alice',
    );
    await noViolations();
    await queued.fill('5');
    await page.getByLabel('Network allowed', { exact: true }).selectOption('true');
    await screenshot('settings-form');
    // Someone else stores a change meanwhile.
    const url = `${base}${REST}/admin/applications/demo`;
    expect(
      await changeSettingsMeanwhile(base, 'demo', {
        security: { adminPrincipals: ['user:alice'] },
        settings: { resultRetentionHours: 48 },
      }),
    ).toBe(200);
    const save = page.getByRole('button', { name: 'Save the settings' });
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'PUT'),
      save.click(),
    ]);
    expect(refused.status()).toBe(412);
    await page
      .locator('#settingsMessage [role="alert"]', { hasText: /^Not saved: someone changed/ })
      .waitFor();
    await page.getByRole('button', { name: 'Load the current settings' }).click();
    const retention = page.getByLabel('Result retention (hours)', { exact: true });
    await waitFor(
      async () => (await retention.inputValue()) === '48',
      JOB_WAIT_MS,
      'the current settings',
    );
    expect(await queued.inputValue()).toBe('');
    await queued.fill('5');
    await save.click();
    await page.locator('#settingsMessage', { hasText: /^Saved as version \d+/ }).waitFor();
    const stored = JSON.parse((await request(url, { headers: ROOT })).text) as {
      security: unknown;
      settings: unknown;
    };
    expect(stored.security).toEqual({ adminPrincipals: ['user:alice'] });
    expect(stored.settings).toEqual({
      resultRetentionHours: 48,
      maxQueuedJobs: 5,
      callbackSecretSet: false,
    });
    // The JSON editor carries the form's values, and back.
    await page.getByRole('button', { name: 'Edit as JSON' }).click();
    const editor = page.locator('#settingsText');
    expect(JSON.parse(await editor.inputValue())).toEqual({
      security: { adminPrincipals: ['user:alice'] },
      settings: { resultRetentionHours: 48, maxQueuedJobs: 5 },
    });
    await editor.fill(
      JSON.stringify({ security: { adminPrincipals: ['user:alice'] }, settings: { weight: 2 } }),
    );
    await page.getByRole('button', { name: 'Edit as a form' }).click();
    expect(await page.getByLabel('Weight', { exact: true }).inputValue()).toBe('2');
    expect(await queued.inputValue()).toBe('');
  });
});
