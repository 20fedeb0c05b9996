/**
 * The service on a single database connection, as the embedded database has.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { Receiver } from '../support/callback-receiver';
import { fileField, postForm, textField } from '../support/form-client';
import { loadTestCatalog } from '../support/function-calls';
import { Answer, postZip, request, REST, waitForResult } from '../support/rest-client';
import { jobEnvelope, postSoap } from '../support/soap-client';
import { buildPackage } from '../support/r-packages';
import { SmtpRecorder, startSmtpRecorder } from '../support/smtp-recorder';
import { SERVER_DATABASE_URL, sleep, startTestService, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/**
 * No path needs two connections at once: the embedded database has one, and on a server the
 * node runs here with a pool of one (DATABASE_POOL_SIZE=1). Every feature that writes runs at
 * the same time; a request that has not answered within WATCHDOG_MS fails the test by its name
 * (a statement waiting for a second connection while a transaction holds the only one never
 * answers). The application has maxQueuedJobs and a rate limit, and a schedule fires every
 * second on it: its tick stores the job, and the e-mail its result is owed, inside the
 * schedule's transaction.
 */
const WATCHDOG_MS = 30_000;
const SECRET = 'single-connection-callback-secret';
const JSON_ACCEPT = { Accept: 'application/json' };
const QUICK = 'writeLines("done", "out.txt")\n';

/** `work`, or a failure naming `name` when it has not answered within WATCHDOG_MS. */
async function watched<T>(name: string, work: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${name} hung: no answer within ${WATCHDOG_MS} ms`)),
      WATCHDOG_MS,
    );
  });
  try {
    return await Promise.race([work(), hung]);
  } finally {
    clearTimeout(timer);
  }
}

function expectStatus(name: string, answer: Answer, status: number): Answer {
  expect({
    name,
    status: answer.status,
    text: answer.status === status ? '' : answer.text,
  }).toEqual({ name, status, text: '' });
  return answer;
}

/** The job token, in the plain JSON that Accept: application/json gives. */
const tokenOf = (answer: Answer): Record<string, string> =>
  JSON.parse(answer.text) as Record<string, string>;

describe('one connection: every writing feature at once', () => {
  let service: TestService;
  let receiver: Receiver;
  let smtp: SmtpRecorder;
  let dropRoot: string;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    smtp = await startSmtpRecorder();
    dropRoot = mkdtempSync(join(tmpdir(), 'svc-single-connection-drop-'));
    service = await startTestService({
      ...ADMIN_ENV,
      SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
      EMAIL_FROM: 'reports@svc.example.com',
      ...(SERVER_DATABASE_URL ? { DATABASE_POOL_SIZE: '1' } : {}),
      APPLICATION_SETTINGS: JSON.stringify({
        demo: {
          maxQueuedJobs: 100,
          maxSubmissionsPerMinute: 1000,
          maxSubmissionsPerMinutePerPrincipal: 1000,
          callbackHosts: ['127.0.0.1'],
          callbackSecret: SECRET,
          dropDirectory: dropRoot,
        },
      }),
    });
    await loadTestCatalog(service);
  }, 120_000);

  afterAll(async () => {
    await service.stop();
    await receiver.stop();
    await smtp.stop();
    rmSync(dropRoot, { recursive: true, force: true });
  });

  it('answers every request while schedules, limits, keys, settings, audit, callbacks, result e-mail, R packages, the drop directory and the console write', async () => {
    const url = service.url;
    const admin = { Authorization: ADMIN_AUTHORIZATION };
    const app = { 'X-SVC-Application-Name': 'demo' };
    const zip = await makeZip([{ name: 'job.R', content: QUICK }]);
    const restJobIds: string[] = [];
    expectStatus(
      'catalog script',
      await watched('PUT catalog script', () =>
        request(`${url}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
          method: 'PUT',
          headers: { ...app, ...admin },
          body: QUICK,
        }),
      ),
      201,
    );

    const schedule = async (): Promise<void> => {
      const created = expectStatus(
        'schedule',
        await watched('POST schedule', () =>
          request(`${url}${REST}/admin/schedules`, {
            method: 'POST',
            headers: { ...app, ...admin, ...JSON_ACCEPT, 'Content-Type': 'application/json' },
            body: JSON.stringify({
              name: 'every-second',
              cron: '* * * * * *',
              timeZone: 'UTC',
              job: { rScript: 'tick.R' },
              catchUp: 'runOnce',
              callbackUrl: `http://127.0.0.1:${receiver.port}/tick`,
              email: { to: ['team@example.com'], subject: 'Every second' },
            }),
          }),
        ),
        201,
      );
      const { selfUri } = JSON.parse(created.text) as { selfUri: string };
      // Two ticks have stored their jobs (the schedule's transaction, the application's limits).
      for (let ticks = 0; ticks < 2;) {
        const view = await watched('GET schedule', () =>
          request(selfUri, { headers: { ...app, ...admin, ...JSON_ACCEPT } }),
        );
        const lastRun = (JSON.parse(view.text) as { lastRun: { jobId: string | null } | null })
          .lastRun;
        expect(lastRun?.jobId).not.toBe(null);
        ticks += lastRun === null ? 0 : 1;
        await sleep(1000);
      }
      expectStatus(
        'pause schedule',
        await watched('DELETE schedule', () =>
          request(selfUri, { method: 'DELETE', headers: { ...app, ...admin } }),
        ),
        204,
      );
    };

    const restJob = async (i: number): Promise<void> => {
      const answer = await watched(`REST job ${i}`, () =>
        postZip(url, zip, {
          ...app,
          ...JSON_ACCEPT,
          'X-SVC-Callback-Url': `http://127.0.0.1:${receiver.port}/rest-${i}`,
        }),
      );
      expectStatus(`REST job ${i}`, answer, 202);
      restJobIds.push(tokenOf(answer).jobId);
      await watched(`result of REST job ${i}`, () =>
        waitForResult(tokenOf(answer).resultUri, JSON_ACCEPT),
      );
    };

    const functionCall = async (i: number): Promise<void> => {
      const answer = await watched(`JSON job ${i}`, () =>
        request(`${url}${REST}/jobs`, {
          method: 'POST',
          headers: { ...app, ...JSON_ACCEPT, 'Content-Type': 'application/json' },
          body: JSON.stringify({ RFunction: 'combn', n: 4, k: 2 }),
        }),
      );
      expectStatus(`JSON job ${i}`, answer, 202);
      await watched(`result of JSON job ${i}`, () =>
        waitForResult(tokenOf(answer).resultUri, JSON_ACCEPT),
      );
    };

    const form = async (): Promise<void> => {
      const answer = await watched('form job', () =>
        postForm(url, [
          textField('X-SVC-Application-Name', 'demo'),
          fileField('job.zip', zip, 'application/zip'),
        ]),
      );
      expectStatus('form job', answer, 202);
    };

    const soap = async (): Promise<void> => {
      const answer = await watched('SOAP job', () =>
        postSoap(
          url,
          jobEnvelope('demo', [{ name: 'job.zip', contentType: 'application/zip', data: zip }]),
        ),
      );
      expectStatus('SOAP job', answer, 200);
    };

    const settings = async (): Promise<void> => {
      expectStatus(
        'application settings',
        await watched('PUT application settings with limits', () =>
          request(`${url}${REST}/admin/applications/limited`, {
            method: 'PUT',
            // A new application's settings: made on purpose, with If-None-Match: *.
            headers: { ...admin, 'Content-Type': 'application/json', 'If-None-Match': '*' },
            body: JSON.stringify({ settings: { maxQueuedJobs: 1, maxSubmissionsPerMinute: 100 } }),
          }),
        ),
        200,
      );
      const limited = { 'X-SVC-Application-Name': 'limited' };
      const answers = await Promise.all(
        [0, 1, 2].map((i) =>
          watched(`job of the limited application ${i}`, () => postZip(url, zip, limited)),
        ),
      );
      // None hangs; each is admitted or refused with 429. How many are admitted depends on
      // whether a worker claims the first before the others arrive (maxQueuedJobs counts queued
      // jobs): the exact limit under a burst is queue-admission.e2e-spec.ts's, on ROLE=api.
      const statuses = answers.map((answer) => answer.status);
      expect(statuses.filter((status) => status !== 202 && status !== 429)).toEqual([]);
      expect(statuses).toContain(202);
    };

    const keys = async (): Promise<void> => {
      const created = expectStatus(
        'API key',
        await watched('POST API key', () =>
          request(`${url}${REST}/admin/api-keys`, {
            method: 'POST',
            headers: { ...admin, 'Content-Type': 'application/json', ...JSON_ACCEPT },
            body: JSON.stringify({ principal: 'reporter', roles: ['r'] }),
          }),
        ),
        201,
      );
      const { id } = JSON.parse(created.text) as { id: string };
      expectStatus(
        'revoke API key',
        await watched('DELETE API key', () =>
          request(`${url}${REST}/admin/api-keys/${id}`, { method: 'DELETE', headers: admin }),
        ),
        204,
      );
    };

    const dropped = async (): Promise<void> => {
      const temporary = join(dropRoot, 'inbox', '.dropped.zip.part');
      await writeFile(temporary, zip);
      await rename(temporary, join(dropRoot, 'inbox', 'dropped.zip'));
      await watched('drop directory result', async () => {
        while (!readdirSync(join(dropRoot, 'outbox')).includes('dropped.zip.result.zip')) {
          await sleep(200);
        }
      });
    };

    const packages = async (): Promise<void> => {
      const packageUrl = `${url}${REST}/admin/packages`;
      expectStatus(
        'R package',
        await watched('PUT R package', () =>
          request(`${packageUrl}/svcone`, {
            method: 'PUT',
            headers: { ...app, ...admin, 'Content-Type': 'application/gzip' },
            body: buildPackage('svcone', '1.0', { tar: true }),
          }),
        ),
        201,
      );
      // The node's install (native R) or its report that webR has none: a state it settles in.
      await watched('R package settled', async () => {
        for (;;) {
          const answer = await request(packageUrl, {
            headers: { ...app, ...admin, ...JSON_ACCEPT },
          });
          // Plain JSON: every package and every node report is in an array.
          const listed = JSON.parse(answer.text) as {
            packages: Array<{ nodes: Array<{ state: string }> }>;
          };
          const states = listed.packages.flatMap((pkg) => pkg.nodes.map((node) => node.state));
          if (states.some((state) => state === 'installed' || state === 'unsupported')) {
            return;
          }
          expect(states.filter((state) => state === 'failed')).toEqual([]);
          await sleep(300);
        }
      });
    };

    // The operator console: a failed job retried (one statement) and run again, a bulk cancel
    // (one cancel at a time), the overview and the list.
    const operatorConsole = async (): Promise<void> => {
      const failing = await makeZip([{ name: 'job.R', content: 'stop("on purpose")' }]);
      const answer = expectStatus(
        'failing job',
        await watched('failing job', () => postZip(url, failing, { ...app, ...JSON_ACCEPT })),
        202,
      );
      const { jobId, resultUri } = tokenOf(answer);
      await watched('result of the failing job', () => waitForResult(resultUri, JSON_ACCEPT));
      const plain = { ...admin, Accept: 'application/json' };
      expectStatus(
        'retry',
        await watched('POST retry', () =>
          request(`${url}${REST}/admin/jobs/demo/${jobId}/retry`, {
            method: 'POST',
            headers: plain,
          }),
        ),
        202,
      );
      await watched('result of the retried job', () => waitForResult(resultUri, JSON_ACCEPT));
      expectStatus(
        'bulk cancel',
        await watched('POST bulk cancel', () =>
          request(`${url}${REST}/admin/jobs/cancel`, {
            method: 'POST',
            headers: { ...plain, 'Content-Type': 'application/json' },
            body: JSON.stringify({ application: 'nobody_uses_this', limit: 10 }),
          }),
        ),
        200,
      );
      for (const path of ['/admin/overview', '/admin/jobs?state=FAILED']) {
        expectStatus(
          path,
          await watched(`GET ${path}`, () => request(`${url}${REST}${path}`, { headers: plain })),
          200,
        );
      }
    };

    const audit = async (): Promise<void> => {
      for (let i = 0; i < 5; i++) {
        expectStatus(
          'audit',
          await watched(`GET audit ${i}`, () =>
            request(`${url}${REST}/admin/audit?limit=10`, {
              headers: { ...admin, ...JSON_ACCEPT },
            }),
          ),
          200,
        );
        expectStatus(
          'ready',
          await watched(`GET ready ${i}`, () => request(`${url}${REST}/system/health/ready`)),
          200,
        );
        await sleep(300);
      }
    };

    await Promise.all([
      schedule(),
      ...[0, 1, 2, 3].map(restJob),
      ...[0, 1].map(functionCall),
      form(),
      soap(),
      settings(),
      keys(),
      dropped(),
      packages(),
      audit(),
      operatorConsole(),
    ]);
    // The schedule's runs owed their results by e-mail (mail_reply rows in the run's transaction).
    await watched('result e-mail sent', async () => {
      while (!smtp.received.some((mail) => mail.mail.subject === 'Every second')) {
        await sleep(200);
      }
    });
    // The callbacks of the REST jobs were delivered (callback jobs, on the same connection).
    await watched('callbacks delivered', async () => {
      const delivered = (jobId: string): boolean =>
        receiver.deliveries.some((delivery) => delivery.body.toString().includes(jobId));
      while (!restJobIds.every(delivered)) {
        await sleep(200);
      }
    });
  }, 240_000);
});
