import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { explodeZip } from '../../src/jobs/job-archive';
import { axeViolations, expectPageFiles, launchChromium, violationText } from '../support/browser';
import { parseXml, request, REST, waitForResult } from '../support/rest-client';
import { spawnService } from '../support/service-process';
import {
  createTestDatabase,
  startTestService,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

/** Screenshots land here (CI keeps test-artifacts/); look at them after a change to the page. */
const ARTIFACTS = resolve(__dirname, '../../test-artifacts');
/** Long enough for a job on webR; a wait ends as soon as its condition holds. */
const JOB_WAIT_MS = 90000;

/** Reads configuration.txt and the data, as a person's analysis would. */
const REPORT_SCRIPT = `
conf <- readLines("configuration.txt")
data <- read.csv("data.csv")
writeLines(c(conf[nzchar(conf)], paste("rows:", nrow(data))), "report.txt")
`;

const JOB_FILES = [
  { name: 'report.R', mimeType: 'text/plain', buffer: Buffer.from(REPORT_SCRIPT) },
  { name: 'data.csv', mimeType: 'text/csv', buffer: Buffer.from('x,y\n1,2\n3,4\n') },
];

/** Prints, reports progress, sleeps (the page must show the first line meanwhile), writes files. */
const WATCH_SCRIPT = `
cat("first line\\n")
svc_progress(0.5, "half way")
Sys.sleep(4)
cat("second line\\n")
writeLines(c("a,b", "1,2"), "table.csv")
writeLines('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80"><rect width="120" height="80" fill="#1f5fbf"/></svg>', "chart.svg")
pdf("plot.pdf")
plot(1:10)
invisible(dev.off())
svc_progress(1, "done")
`;

const SIZE_SCRIPT = 'writeLines(format(file.size("big.dat")), "size.txt")\n';

/** Records every state the job panel shows, in order, from before the submission. */
const WATCH_STATES = `(() => {
  const panel = document.getElementById('jobPanel');
  window.seenStates = [];
  new MutationObserver(() => {
    const state = panel.dataset.state;
    if (state && window.seenStates[window.seenStates.length - 1] !== state) {
      window.seenStates.push(state);
    }
  }).observe(panel, { attributes: true, attributeFilter: ['data-state'] });
})()`;

/** axe-core's WCAG A/AA rules on the page as it is now; returns the violations, briefly. */
async function accessibilityViolations(page: Page): Promise<string[]> {
  return (
    await axeViolations(page, ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'])
  ).map(violationText);
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

async function text(page: Page, selector: string): Promise<string> {
  return ((await page.locator(selector).textContent()) ?? '').trim();
}

describe('the upload page in Chromium (SPEC §6)', () => {
  let service: TestService;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    service = await startTestService();
    base = service.url;
    browser = await launchChromium();
  });
  afterAll(async () => {
    // The browser is a child of this process: close it before the service's leak check.
    await browser?.close();
    await service?.stop();
  });

  it('serves the page and its files itself, with nothing from another origin', async () => {
    await expectPageFiles(base, [
      ['/svc/', 'text/html'],
      ['/svc', 'text/html'],
      ['/svc/index.html', 'text/html'],
      ['/svc/app.js', 'text/javascript'],
      ['/svc/app.css', 'text/css'],
      ['/svc/vendor/fflate.js', 'text/javascript'],
    ]);
  });

  describe('with JavaScript', () => {
    let context: BrowserContext;
    let page: Page;

    beforeAll(async () => {
      context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
      page = await context.newPage();
    });
    afterAll(async () => {
      await context.close();
    });

    it('takes a person from choosing files to downloading and deleting the result', async () => {
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      const response = await page.goto(`${base}/svc/`);
      expect(response?.status()).toBe(200);
      expect(await page.title()).toBe('svc: run an R job');
      expect(await page.locator('form[name="jobUploadForm"]').count()).toBe(1);

      // The form's fields line up: the callback URL and the files as wide as the application name.
      const width = async (selector: string): Promise<number | undefined> =>
        (await page.locator(selector).boundingBox())?.width;
      expect(await width('#callbackUrl')).toBe(await width('#applicationName'));
      expect(await width('#jobFiles')).toBe(await width('#applicationName'));

      await page.getByLabel('Application name (required)').fill('demo');
      await page.setInputFiles('#jobFiles', JOB_FILES);

      // A meta row, added and filled with the keyboard alone.
      await page.focus('#addMetaButton');
      await page.keyboard.press('Enter');
      expect(await page.evaluate('document.activeElement.id')).toBe('metaName1');
      await page.keyboard.type('colour');
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement.id')).toBe('metaValue1');
      await page.keyboard.type('blue');
      // A second row, removed again: it must not reach the job.
      await page.click('#addMetaButton');
      await page.fill('#metaName2', 'unwanted');
      await page.fill('#metaValue2', 'x');
      await page.click('button[aria-label="Remove meta parameter 2"]');
      expect(await page.locator('.meta-row').count()).toBe(1);

      await page.evaluate(WATCH_STATES);
      await page.click('#jobSubmitButton');
      // Polled from here: the page's Content-Security-Policy forbids waitForFunction's eval.
      await waitFor(
        async () => (await page.locator('#jobPanel').getAttribute('data-state')) === 'DONE',
        JOB_WAIT_MS,
        'the job panel to show DONE',
      );
      const states = await page.evaluate<string[]>('window.seenStates');
      expect(states[0]).toBe('QUEUED');
      expect(states[states.length - 1]).toBe('DONE');
      expect(['QUEUED,DONE', 'QUEUED,RUNNING,DONE']).toContain(states.join(','));
      expect(await text(page, '#jobState')).toBe('Done.');

      const jobId = await text(page, '#jobId');
      expect(jobId).toMatch(/^[0-9a-f-]{36}$/);
      await page.locator('#jobOutcome').waitFor({ state: 'visible' });
      expect(await text(page, '#jobOutcomeText')).toBe('The job succeeded.');
      expect(await text(page, '#jobDownload')).toBe('Download the result (ZIP)');

      // The results panel lists the job, newest first, with its outcome and type.
      const row = page.locator(`#resultsBody tr[data-job-id="${jobId}"]`);
      await row.waitFor({ state: 'visible' });
      expect(await row.locator('td[data-label="Outcome"]').textContent()).toBe('Succeeded');
      expect(await row.locator('td[data-label="Type"]').textContent()).toBe('zip');
      await screenshot(page, 'upload-page');
      await page.setViewportSize({ width: 360, height: 800 });
      expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(
        true,
      );
      await screenshot(page, 'upload-page-narrow');
      await page.setViewportSize({ width: 1000, height: 900 });

      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.click('#jobDownload'),
      ]);
      expect(download.suggestedFilename()).toBe(`${jobId}.zip`);
      const zip = readFileSync(await download.path());
      const entries = await explodeZip(zip, {
        maxEntries: 10,
        maxUncompressedBytes: 1e6,
        maxCompressionRatio: 1e4,
      });
      expect(entries.map((entry) => entry.name)).toEqual(['report.txt']);
      expect(entries[0].content.toString('utf8')).toBe('colour = blue\nrows: 2\n');

      page.once('dialog', (dialog) => void dialog.accept());
      await row.getByRole('button', { name: `Delete the result of job ${jobId}` }).click();
      await row.waitFor({ state: 'detached' });
      expect(await text(page, '#resultsMessage')).toMatch(/^Deleted the result of job /);
      const gone = await request(`${base}${REST}/results/demo/${jobId}`);
      expect(gone.status).toBe(404);
      expect(pageErrors).toEqual([]);
    });

    it('shows a failed job with what R said', async () => {
      await page.goto(`${base}/svc/`);
      await page.fill('#applicationName', 'demo');
      await page.setInputFiles('#jobFiles', [
        { name: 'fail.R', mimeType: 'text/plain', buffer: Buffer.from('stop("no data today")\n') },
      ]);
      await page.click('#jobSubmitButton');
      await page.locator('#jobFailure').waitFor({ state: 'visible', timeout: JOB_WAIT_MS });
      expect(await text(page, '#jobOutcomeText')).toBe('The job failed. What R said:');
      expect(await text(page, '#jobFailure')).toContain('no data today');
      expect(await text(page, '#jobDownload')).toBe('Download the result (TXT)');
      const jobId = await text(page, '#jobId');
      const row = page.locator(`#resultsBody tr[data-job-id="${jobId}"]`);
      await row.waitFor({ state: 'visible' });
      expect(await row.locator('td[data-label="Outcome"]').textContent()).toBe('Failed');
      await screenshot(page, 'upload-page-failed');
    });

    it('shows the live log and progress while the job runs, then its files inline', async () => {
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(`${base}/svc/`);
      await page.fill('#applicationName', 'demo');
      await page.setInputFiles('#jobFiles', [
        { name: 'watch.R', mimeType: 'text/plain', buffer: Buffer.from(WATCH_SCRIPT) },
      ]);
      await page.click('#jobSubmitButton');
      // The first line is on the page while R still sleeps before printing the second.
      await waitFor(
        async () => (await text(page, '#jobLog')).includes('first line'),
        JOB_WAIT_MS,
        'the first line in the page',
      );
      expect(await text(page, '#jobLog')).not.toContain('second line');
      expect(await page.locator('#jobPanel').getAttribute('data-state')).toBe('RUNNING');
      expect(await page.locator('#jobCancelButton').isVisible()).toBe(true);
      await waitFor(
        async () => (await text(page, '#jobProgressText')) === '50 %: half way',
        JOB_WAIT_MS,
        'the progress bar at half way',
      );
      expect(
        await page
          .locator('#jobProgress')
          .evaluate((bar: { value: number; max: number }) => bar.value),
      ).toBe(0.5);
      await screenshot(page, 'upload-page-running');
      await page.locator('#jobPreview').waitFor({ state: 'visible', timeout: JOB_WAIT_MS });
      await waitFor(
        async () => (await page.locator('#previewFiles li').count()) === 3,
        JOB_WAIT_MS,
        'the three result files in the preview',
      );
      // The log stream reads the job's lines every 250 ms: its last lines may follow the result.
      await waitFor(
        async () => (await text(page, '#jobLog')) === 'first line\nsecond line',
        JOB_WAIT_MS,
        'both lines in the log',
      );
      await waitFor(
        async () => (await text(page, '#jobProgressText')) === '100 %: done',
        JOB_WAIT_MS,
        'the progress bar at done',
      );
      expect(await page.locator('#jobCancelButton').isHidden()).toBe(true);
      expect(await text(page, '#previewMessage')).toBe(
        '3 files; text files, images and PDFs are shown below.',
      );
      const names = await page
        .locator('#previewFiles li')
        .evaluateAll((items) =>
          items.map((item) => (item as { dataset: { name?: string } }).dataset.name),
        );
      expect(names.sort()).toEqual(['chart.svg', 'plot.pdf', 'table.csv']);
      expect(await text(page, '#previewFiles li[data-name="table.csv"] pre')).toBe('a,b\n1,2');
      const image = page.locator('#previewFiles li[data-name="chart.svg"] img');
      await waitFor(
        async () =>
          (await image.evaluate((img: { naturalWidth: number }) => img.naturalWidth)) === 120,
        JOB_WAIT_MS,
        'the SVG image drawn',
      );
      const frame = page.locator('#previewFiles li[data-name="plot.pdf"] iframe');
      expect(await frame.getAttribute('src')).toMatch(/^blob:/);
      expect(await frame.getAttribute('title')).toBe('The PDF plot.pdf from the result');
      await screenshot(page, 'upload-page-preview');
      expect(pageErrors).toEqual([]);
    });

    it('cancels a running job with its Cancel button', async () => {
      await page.goto(`${base}/svc/`);
      await page.fill('#applicationName', 'demo');
      await page.setInputFiles('#jobFiles', [
        {
          name: 'long.R',
          mimeType: 'text/plain',
          buffer: Buffer.from('cat("started\\n")\nSys.sleep(300)\n'),
        },
      ]);
      await page.click('#jobSubmitButton');
      await waitFor(
        async () => (await page.locator('#jobPanel').getAttribute('data-state')) === 'RUNNING',
        JOB_WAIT_MS,
        'the job to run',
      );
      await page.click('#jobCancelButton');
      await page.locator('#jobFailure').waitFor({ state: 'visible', timeout: JOB_WAIT_MS });
      expect(await text(page, '#jobOutcomeText')).toBe('The job was cancelled.');
      expect(await text(page, '#jobFailure')).toMatch(/ was cancelled by anonymous at /);
      expect(await page.locator('#jobCancelButton').isHidden()).toBe(true);
      await screenshot(page, 'upload-page-cancelled');
    });

    it('shows how much of a large upload was sent', async () => {
      await page.goto(`${base}/svc/`);
      await page.fill('#applicationName', 'demo');
      // From a file on disk: the browser reads it itself (a buffer would cross the protocol).
      const dir = mkdtempSync(join(tmpdir(), 'upload-'));
      const big = join(dir, 'big.dat');
      writeFileSync(big, Buffer.alloc(30e6, 'x'));
      writeFileSync(join(dir, 'size.R'), SIZE_SCRIPT);
      await page.setInputFiles('#jobFiles', [join(dir, 'size.R'), big]);
      await page.click('#jobSubmitButton');
      await page.locator('#jobPreview').waitFor({ state: 'visible', timeout: JOB_WAIT_MS });
      expect(await page.locator('#uploadStatus').isVisible()).toBe(true);
      const sent = await page
        .locator('#uploadProgress')
        .evaluate((bar: { value: number; max: number }) => [bar.value, bar.max]);
      expect(sent[0]).toBe(sent[1]);
      // The form's multipart body: the file, the script and the boundaries.
      expect(sent[1]).toBeGreaterThan(30e6);
      expect(await text(page, '#uploadProgressText')).toMatch(
        /^Sent 30\.\d MB of 30\.\d MB \(100 %\)$/,
      );
      await waitFor(
        async () => (await text(page, '#previewFiles li[data-name="size.txt"] pre')) === '3e+07',
        JOB_WAIT_MS,
        'the size the job saw',
      );
      rmSync(dir, { recursive: true, force: true });
    });

    it('shows a clear message when the service refuses the application name', async () => {
      await page.goto(`${base}/svc/`);
      await page.fill('#applicationName', 'my analysis!');
      await page.setInputFiles('#jobFiles', JOB_FILES);
      await page.click('#jobSubmitButton');
      const message = page.locator('#formMessage');
      await message.waitFor({ state: 'visible' });
      expect(await message.getAttribute('role')).toBe('alert');
      expect(((await message.textContent()) ?? '').trim()).toBe(
        'The service could not accept the form. The form field X-SVC-Application-Name ' +
          '"my analysis!" is invalid: use ASCII letters, digits and underscores only.',
      );
      expect(await page.locator('#jobPanel').isHidden()).toBe(true);
      await screenshot(page, 'upload-page-error');
    });
  });

  it('still posts the form without JavaScript and answers the XML job token', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false });
    try {
      const page = await context.newPage();
      await page.goto(`${base}/svc/`);
      // What needs the script stays out of the way.
      expect(await page.locator('#addMetaButton').isHidden()).toBe(true);
      expect(await page.locator('#resultsPanel').isHidden()).toBe(true);
      await page.fill('#applicationName', 'demo');
      await page.setInputFiles('#jobFiles', JOB_FILES);
      const [answer] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith(`${REST}/jobs`)),
        page.click('#jobSubmitButton'),
      ]);
      expect(answer.status()).toBe(202);
      expect(answer.headers()['content-type']).toBe('application/xml; charset=utf-8');
      const token = parseXml(await answer.text()).jobToken;
      expect(token.applicationName).toBe('demo');
      await page.waitForLoadState();
      await screenshot(page, 'upload-page-nojs');
      const result = parseXml((await waitForResult(token.resultUri)).text).result;
      expect(result.success).toBe('true');
    } finally {
      await context.close();
    }
  });

  it('passes axe-core accessibility checks with a meta row, an error and a results list', async () => {
    // axe is injected as a script, which the page's Content-Security-Policy would refuse.
    const context = await browser.newContext({ bypassCSP: true });
    try {
      const page = await context.newPage();
      await page.goto(`${base}/svc/`);
      expect(await accessibilityViolations(page)).toEqual([]);

      await page.click('#addMetaButton');
      await page.fill('#resultsApplication', 'demo');
      await page.click('#showResultsButton');
      await page.locator('#resultsBody tr').first().waitFor({ state: 'visible' });
      await page.fill('#applicationName', 'bad name');
      await page.click('#jobSubmitButton');
      await page.locator('#formMessage').waitFor({ state: 'visible' });
      expect(await accessibilityViolations(page)).toEqual([]);

      await page.setViewportSize({ width: 320, height: 700 });
      expect(await accessibilityViolations(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('the built service (npm start)', () => {
  it('prints the upload page address at start-up and serves the page from dist/', async () => {
    const database = await createTestDatabase();
    try {
      const node = await spawnService({ ...testEnvironment(database), ROLE: 'api' });
      try {
        const port = new URL(node.url).port;
        expect(node.output()).toContain(`Upload page: http://localhost:${port}/svc/`);
        // The upload page's files, those it shares with the console, and the console's.
        for (const path of [
          '/svc/',
          '/svc/app.js',
          '/svc/app.css',
          '/svc/vendor/fflate.js',
          '/svc/page-base.css',
          '/svc/result-preview.js',
          '/svc/console/',
          '/svc/console/console.js',
          '/svc/console/console.css',
        ]) {
          expect([path, (await request(`${node.url}${path}`)).status]).toEqual([path, 200]);
        }
      } finally {
        node.child.kill('SIGTERM');
        expect(await node.exited()).toBe(0);
      }
    } finally {
      await database.drop();
    }
  });
});
