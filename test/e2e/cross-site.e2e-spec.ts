/**
 * Requests from another site that ride a browser's own credentials (HTTP Basic cached after one
 * prompt, the sign-in cookie): every method that changes something, on every front end (REST
 * jobs and forms, /process, exported functions, the admin and console APIs, SOAP, results,
 * sign-out), is refused with 403 before anything is done, whatever way the browser says where
 * it comes from; the same requests from a programmatic client or from the service's own pages
 * still work, and so does a cross-site link (GET). Last, real Chromium pages on another site
 * auto-submit a job form and a retry with the browser's cached Basic credentials.
 *
 * @ci-pass node24
 */
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { DataSource } from 'typeorm';
import type { ConsoleJob } from '../../src/console-api/console-view';
import { basicUsersEnvironment, ROOT } from '../support/admin-auth';
import { launchChromium } from '../support/browser';
import { fileField, formData, textField } from '../support/form-client';
import { Answer, postZip, request, REST } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const FAILING = 'stop("no data today")\n';
const QUICK = 'writeLines("done", "done.txt")\n';
/** Holds the node's one script slot: the jobs after it stay queued, so nothing moves meanwhile. */
const SLEEPER = 'Sys.sleep(300)\n';
const REFUSED = /must come from the page of this service/;
const JOB_WAIT_MS = 90000;

/** What a browser says of a request that another site's page made, in each way one can. */
const CROSS_SITE: Array<[string, Record<string, string>]> = [
  ['a current browser', { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://evil.example' }],
  ['a sibling site', { 'Sec-Fetch-Site': 'same-site', Origin: 'https://a.svc.example' }],
  ['Origin alone', { Origin: 'https://evil.example' }],
  ['a sandboxed frame (Origin: null)', { 'Sec-Fetch-Site': 'cross-site', Origin: 'null' }],
  ['Origin: null alone', { Origin: 'null' }],
  ['an old browser (Referer alone)', { Referer: 'https://evil.example/page.html' }],
];

interface Door {
  name: string;
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: () => string | FormData;
  /** The answers of a programmatic client, then of the service's own page, in that order. */
  allowed: [number, number];
}

describe('requests from another site with a browser’s own credentials', () => {
  let service: TestService;
  let base: string;
  let failed: string;
  /** Failed too: for the browser's attempt. */
  let failedToo: string;
  let done: string;
  let queued: string;
  let keyId: string;
  let scheduleId: string;

  async function job(id: string): Promise<ConsoleJob> {
    const answer = await request(`${base}${REST}/admin/jobs/demo/${id}`, {
      headers: { ...ROOT, Accept: 'application/json' },
    });
    expect(answer.status).toBe(200);
    return JSON.parse(answer.text) as ConsoleJob;
  }

  async function submit(script: string): Promise<string> {
    const answer = await postZip(base, await makeZip([{ name: 'job.R', content: script }]), {
      ...ROOT,
      Accept: 'application/json',
    });
    expect(answer.status).toBe(202);
    return (JSON.parse(answer.text) as { jobId: string }).jobId;
  }

  async function admin(method: string, path: string, body?: unknown): Promise<Answer> {
    return request(`${base}${REST}/admin${path}`, {
      method,
      headers: {
        ...ROOT,
        Accept: 'application/json',
        'X-SVC-Application-Name': 'demo',
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  /**
   * What the refused requests could have changed: the rows of every table (but the nodes'
   * heartbeats and the audit trail), and what is changed in place (jobs' states, the schedule,
   * the keys, the catalog, the application's settings).
   */
  async function rowCounts(): Promise<Record<string, number>> {
    const dataSource = service.app.get(DataSource);
    const tables = await dataSource.query<Array<{ name: string }>>(
      `SELECT table_name AS name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
          AND table_name NOT IN ('worker_node', 'audit_event', 'migrations')
        ORDER BY table_name`,
    );
    const counts: Record<string, number> = {};
    for (const { name } of tables) {
      const [row] = await dataSource.query<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM "${name}"`,
      );
      counts[name] = row.n;
    }
    return counts;
  }

  async function state(): Promise<unknown> {
    const counts = await rowCounts();
    const jobs = await Promise.all(
      [failed, done, queued].map(async (id) => {
        const { state, outcome, attempts } = await job(id);
        return { id, state, outcome, attempts };
      }),
    );
    const reads = await Promise.all(
      ['/api-keys', `/schedules/${scheduleId}`, '/applications/demo', '/catalog/R_SCRIPTS'].map(
        async (path) => (await admin('GET', path)).text,
      ),
    );
    return { counts, jobs, reads };
  }

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({ demo: { scriptSubmissionAllowed: true } })),
      SCRIPT_SLOTS: '1',
      AUTH_MAX_FAILURES: '1000',
    });
    base = service.url;
    failed = await submit(FAILING);
    failedToo = await submit(FAILING);
    done = await submit(QUICK);
    await waitFor(
      async () =>
        (await job(failed)).outcome === 'failed' &&
        (await job(failedToo)).outcome === 'failed' &&
        (await job(done)).outcome === 'succeeded',
      JOB_WAIT_MS,
      'a failed and a succeeded job',
    );
    const sleeper = await submit(SLEEPER);
    await waitFor(
      async () => (await job(sleeper)).state === 'RUNNING',
      JOB_WAIT_MS,
      'the sleeper to run',
    );
    queued = await submit(QUICK);
    const script = await request(`${base}${REST}/admin/catalog/R_SCRIPTS/tick.R`, {
      method: 'PUT',
      headers: { ...ROOT, 'X-SVC-Application-Name': 'demo' },
      body: QUICK,
    });
    expect(script.status).toBe(201);
    const key = await admin('POST', '/api-keys', { principal: 'reporting' });
    expect(key.status).toBe(201);
    keyId = (JSON.parse(key.text) as { id: string }).id;
    const schedule = await admin('POST', '/schedules', {
      name: 'yearly',
      cron: '0 0 3 1 1 *',
      timeZone: 'UTC',
      job: { rScript: 'tick.R' },
    });
    expect(schedule.status).toBe(201);
    scheduleId = (JSON.parse(schedule.text) as { id: string }).id;
  }, 180000);

  afterAll(async () => {
    await service?.stop();
  });

  const doors = (): Door[] => [
    {
      name: 'a job form (multipart, a script file)',
      method: 'POST',
      path: `${REST}/jobs`,
      body: () =>
        formData([
          textField('X-SVC-Application-Name', 'demo'),
          fileField('job.R', QUICK, 'text/plain'),
        ]),
      allowed: [202, 202],
    },
    {
      name: 'a REST job (a body of a simple type)',
      method: 'POST',
      path: `${REST}/jobs`,
      headers: { 'Content-Type': 'text/plain', 'X-SVC-Application-Name': 'demo' },
      body: () => 'x',
      // text/plain: a type another site's page may send; the intake takes none such (415).
      allowed: [415, 415],
    },
    {
      name: 'a job cancelled',
      method: 'DELETE',
      path: `${REST}/jobs/demo/${queued}`,
      allowed: [204, 409],
    },
    {
      name: 'a result deleted',
      method: 'DELETE',
      path: `${REST}/results/demo/${done}`,
      allowed: [204, 404],
    },
    {
      name: 'a function call (/process)',
      method: 'POST',
      path: `${REST}/process`,
      headers: { 'Content-Type': 'text/plain', 'X-SVC-Application-Name': 'demo' },
      body: () => 'x',
      allowed: [415, 415],
    },
    {
      name: 'an exported function',
      method: 'POST',
      path: `${REST}/functions/demo/nothing`,
      headers: { 'Content-Type': 'application/json' },
      body: () => '{}',
      allowed: [404, 404],
    },
    {
      name: 'a failed job retried (console)',
      method: 'POST',
      path: `${REST}/admin/jobs/demo/${failed}/retry`,
      allowed: [202, 409],
    },
    {
      name: 'jobs cancelled in bulk (console)',
      method: 'POST',
      path: `${REST}/admin/jobs/cancel`,
      headers: { 'Content-Type': 'application/json' },
      body: () => JSON.stringify({ application: 'nothing' }),
      allowed: [200, 200],
    },
    {
      name: 'failed jobs retried in bulk (console)',
      method: 'POST',
      path: `${REST}/admin/jobs/retry`,
      headers: { 'Content-Type': 'application/json' },
      body: () => JSON.stringify({ application: 'nothing' }),
      allowed: [200, 200],
    },
    {
      name: 'a catalog file written',
      method: 'PUT',
      path: `${REST}/admin/catalog/R_SCRIPTS/more.R`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      body: () => QUICK,
      allowed: [201, 204],
    },
    {
      name: 'a catalog file deleted',
      method: 'DELETE',
      path: `${REST}/admin/catalog/R_SCRIPTS/more.R`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [204, 404],
    },
    {
      name: "an application's settings",
      method: 'PUT',
      path: `${REST}/admin/applications/demo`,
      headers: { 'Content-Type': 'application/json' },
      body: () => JSON.stringify({ security: {}, settings: {} }),
      // Reaches the handler, which wants If-Match.
      allowed: [428, 428],
    },
    {
      name: 'an API key made',
      method: 'POST',
      path: `${REST}/admin/api-keys`,
      headers: { 'Content-Type': 'application/json' },
      body: () => JSON.stringify({ principal: 'intruder' }),
      allowed: [201, 201],
    },
    {
      name: 'an API key revoked',
      method: 'DELETE',
      path: `${REST}/admin/api-keys/${keyId}`,
      allowed: [204, 404],
    },
    {
      name: 'a schedule made',
      method: 'POST',
      path: `${REST}/admin/schedules`,
      headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' },
      body: () =>
        JSON.stringify({
          name: 'other',
          cron: '0 0 3 1 1 *',
          timeZone: 'UTC',
          job: { rScript: 'tick.R' },
        }),
      allowed: [201, 201],
    },
    {
      name: 'a schedule paused',
      method: 'POST',
      path: `${REST}/admin/schedules/${scheduleId}/pause`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [200, 200],
    },
    {
      name: 'a schedule resumed',
      method: 'POST',
      path: `${REST}/admin/schedules/${scheduleId}/resume`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [200, 200],
    },
    {
      name: 'a schedule replaced',
      method: 'PUT',
      path: `${REST}/admin/schedules/${scheduleId}`,
      headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' },
      body: () =>
        JSON.stringify({
          name: 'yearly',
          cron: '0 0 4 1 1 *',
          timeZone: 'UTC',
          job: { rScript: 'tick.R' },
        }),
      allowed: [200, 200],
    },
    {
      name: 'a schedule deleted',
      method: 'DELETE',
      path: `${REST}/admin/schedules/${scheduleId}`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [204, 404],
    },
    {
      name: 'an R package uploaded',
      method: 'PUT',
      path: `${REST}/admin/packages/evil`,
      headers: { 'Content-Type': 'application/gzip', 'X-SVC-Application-Name': 'demo' },
      body: () => 'not a package',
      allowed: [400, 400],
    },
    {
      name: 'an R package removed',
      method: 'DELETE',
      path: `${REST}/admin/packages/evil`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [404, 404],
    },
    {
      name: 'a flow submitted',
      method: 'POST',
      path: `${REST}/flows`,
      headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' },
      // Reaches the flow's own checks (a cycle), which refuse it before anything is stored.
      body: () =>
        JSON.stringify({
          steps: [
            { name: 'a', needs: ['b'], rScript: 'tick.R' },
            { name: 'b', needs: ['a'], rScript: 'tick.R' },
          ],
        }),
      allowed: [400, 400],
    },
    {
      name: 'a flow cancelled',
      method: 'DELETE',
      path: `${REST}/flows/demo/00000000-0000-4000-8000-000000000000`,
      allowed: [404, 404],
    },
    {
      name: "an application's R environment set",
      method: 'PUT',
      path: `${REST}/admin/environment`,
      headers: { 'Content-Type': 'text/plain', 'X-SVC-Application-Name': 'demo' },
      body: () => '{}',
      // text/plain: a type another site's page may send; the route takes only JSON (415).
      allowed: [415, 415],
    },
    {
      name: "an application's R environment rolled back",
      method: 'POST',
      path: `${REST}/admin/environment/history/0/rollback`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [404, 404],
    },
    {
      name: "an application's R environment removed",
      method: 'DELETE',
      path: `${REST}/admin/environment`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      allowed: [404, 404],
    },
    {
      name: 'a SOAP request',
      method: 'POST',
      path: '/svc/api/soap/mtom-jobs',
      headers: { 'Content-Type': 'text/xml; charset=utf-8' },
      body: () => '<nothing/>',
      // A fault (WS-I: HTTP 500) from the endpoint itself.
      allowed: [500, 500],
    },
    {
      name: 'sign-out',
      method: 'POST',
      path: '/svc/sign-out',
      allowed: [303, 303],
    },
    {
      name: 'an unknown resource',
      method: 'POST',
      path: `${REST}/nothing`,
      allowed: [404, 404],
    },
  ];

  function send(door: Door, headers: Record<string, string>): Promise<Answer> {
    return request(`${base}${door.path}`, {
      method: door.method,
      headers: { Accept: 'application/json', ...door.headers, ...headers },
      body: door.body?.(),
    });
  }

  it('refuses every door with 403 before anything is done, then lets code and own pages through', async () => {
    const before = await state();
    // Every door under every way of saying "another site", and under the sign-in cookie alone:
    // its status and whether it is the refusal, all compared at once.
    const seen: string[] = [];
    const wanted: string[] = [];
    const cookie = { Cookie: 'svc_session=session-0123456789abcdefghij' };
    for (const door of doors()) {
      for (const [how, where] of [
        ...CROSS_SITE.map(([how, headers]): [string, Record<string, string>] => [
          how,
          { ...ROOT, ...headers },
        ]),
        ['the sign-in cookie alone', { ...cookie, 'Sec-Fetch-Site': 'cross-site' }] as const,
      ]) {
        const answer = await send(door, where);
        seen.push(`${door.name}, ${how}: ${answer.status} ${REFUSED.test(answer.text)}`);
        // SOAP answers its errors as faults (HTTP 500, WS-I), the REST front ends with 403.
        wanted.push(`${door.name}, ${how}: ${door.path.includes('/soap/') ? 500 : 403} true`);
      }
    }
    expect(seen).toEqual(wanted);
    expect(await state()).toEqual(before);

    // A programmatic client (Authorization from code, no Sec-Fetch-Site, no Origin), then the
    // service's own page (same origin, its Basic credentials cached): each reaches the door.
    const own = { 'Sec-Fetch-Site': 'same-origin', Origin: base, Referer: `${base}/svc/console/` };
    for (const door of doors()) {
      for (const [index, headers] of [{ ...ROOT }, { ...ROOT, ...own }].entries()) {
        const answer = await send(door, headers);
        expect({ door: door.name, index, status: answer.status }).toEqual({
          door: door.name,
          index,
          status: door.allowed[index],
        });
        expect(answer.text).not.toMatch(REFUSED);
      }
    }
    expect((await job(failed)).outcome).toBe('queued');
    expect((await job(queued)).outcome).toBe('cancelled');
  }, 120000);

  it('lets a cross-site link (GET) through, and no GET is turned into a DELETE', async () => {
    const link = await request(`${base}${REST}/admin/jobs/demo/${failedToo}`, {
      headers: { ...ROOT, 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'navigate' },
    });
    expect(link.status).toBe(200);
    const tunnelled = await request(`${base}${REST}/results/demo/${failedToo}?_method=DELETE`, {
      headers: {
        ...ROOT,
        'Sec-Fetch-Site': 'cross-site',
        'X-HTTP-Method-Override': 'DELETE',
        'X-HTTP-Method': 'DELETE',
        'X-Method-Override': 'DELETE',
      },
    });
    expect(tunnelled.status).toBe(200);
    expect((await job(failedToo)).outcome).toBe('failed');
  });

  describe('in Chromium', () => {
    let browser: Browser;
    let evil: Server;
    let evilUrl: string;

    beforeAll(async () => {
      browser = await launchChromium();
      evil = createServer((req, res) => {
        res.setHeader('Content-Type', 'text/html; charset=utf-8');
        res.end(
          (req.url === '/retry' ? RETRY_PAGE : JOB_PAGE)
            .replaceAll('SERVICE', base)
            .replaceAll('JOB', failedToo),
        );
      });
      // Every address, so that http://localhost: reaches it over IPv4 or IPv6.
      await new Promise<void>((resolve) => evil.listen(0, resolve));
      // localhost is another site than 127.0.0.1 (where the service listens).
      evilUrl = `http://localhost:${(evil.address() as AddressInfo).port}/`;
    });

    afterAll(async () => {
      await browser?.close();
      await new Promise((resolve) => evil?.close(resolve));
    });

    it("another site's page cannot submit a job or retry one with the admin's cached Basic credentials", async () => {
      // The prompt of the console's first request, answered once.
      const context = await browser.newContext({
        httpCredentials: { username: 'root', password: 'root-secret-1' },
      });
      const page = await context.newPage();
      const me = await page.goto(`${base}${REST}/admin/me`);
      expect(me?.status()).toBe(200);
      const before = await rowCounts();
      const retriedBefore = await job(failedToo);
      // A form with no fields retries the failed job; another submits a job with a script file.
      await page.goto(`${evilUrl}retry`);
      await page.waitForURL(`${base}${REST}/admin/jobs/demo/${failedToo}/retry`);
      const retry = await page.locator('body').textContent();
      await page.goto(evilUrl);
      await page.waitForURL(`${base}${REST}/jobs`);
      expect({
        retry,
        submit: await page.locator('body').textContent(),
        rows: await rowCounts(),
        retried: await job(failedToo),
      }).toEqual({
        retry: expect.stringMatching(REFUSED) as string,
        submit: expect.stringMatching(REFUSED) as string,
        rows: before,
        retried: retriedBefore,
      });
      await context.close();
    });
  });
});

/** Another site's page: a job form with a script file, submitted as soon as the page loads. */
const JOB_PAGE = `<!doctype html>
<form id="f" method="post" enctype="multipart/form-data" action="SERVICE${REST}/jobs">
<input name="X-SVC-Application-Name" value="demo"><input type="file" name="X-SVC-JobFile[]" id="file">
</form>
<script>
const transfer = new DataTransfer();
transfer.items.add(new File(['writeLines("pwned", "x.txt")'], 'job.R', { type: 'text/plain' }));
document.getElementById('file').files = transfer.files;
document.getElementById('f').submit();
</script>`;

/** Another site's page: the console's retry of a failed job, posted as soon as the page loads. */
const RETRY_PAGE = `<!doctype html>
<form id="f" method="post" action="SERVICE${REST}/admin/jobs/demo/JOB/retry"></form>
<script>document.getElementById('f').submit();</script>`;

describe('a key sent from code by a page on another origin', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        demo: { scriptSubmissionAllowed: true, userPrincipals: ['key:app'] },
      })),
      AUTH_MODE: 'apiKey',
    });
  });

  afterAll(async () => {
    await service?.stop();
  });

  it('is judged by the key, not refused as a browser credential', async () => {
    const made = await request(`${service.url}${REST}/admin/api-keys`, {
      method: 'POST',
      headers: { ...ROOT, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ principal: 'app' }),
    });
    expect(made.status).toBe(201);
    const { key } = JSON.parse(made.text) as { key: string };
    const crossSite = { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://app.example' };
    const credentials: Array<Record<string, string>> = [
      { Authorization: `Bearer ${key}` },
      { 'X-SVC-API-Key': key },
    ];
    for (const credential of credentials) {
      const answer = await postZip(
        service.url,
        await makeZip([{ name: 'job.R', content: QUICK }]),
        { ...crossSite, ...credential, Accept: 'application/json' },
      );
      expect(answer.status).toBe(202);
    }
  });
});
