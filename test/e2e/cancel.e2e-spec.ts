/**
 * Cancelling queued and running jobs.
 *
 * @ci-pass embedded
 */
import { randomUUID } from 'node:crypto';
import { makeZip } from '../support/zip-fixtures';
import { Answer, parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { loadTestCatalog, post } from '../support/function-calls';
import { faultOf, jobEnvelope, postSoap } from '../support/soap-client';
import { WorkerService } from '../../src/worker/worker.service';
import { hashSecret } from '../../src/common/secret-hash';
import { ServiceProcess, spawnService } from '../support/service-process';
import { sharedServices } from '../support/shared-services';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

// One slot: a cancelled running job must free it for the next. The describes of one R_SCRIPT_MODE
// share a service (on webR, where the mode means nothing, all of them one).
const services = sharedServices();
const oneSlot = (mode: string) => ({ R_SCRIPT_MODE: mode, SCRIPT_SLOTS: '1' });

const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
const SLEEPER = 'writeLines("started", "started.txt")\nSys.sleep(120)\n';
const QUICK = 'writeLines("done", "done.txt")\n';
const CANCEL_TEXT =
  /^Job [0-9a-f-]{36} of application demo was cancelled by anonymous at \d{4}-\d\d-\d\dT[\d:.]+Z\.\n$/;

interface JobStatus {
  state: string;
  cancellation?: { by: string; time: string };
}

async function submit(base: string, script: string): Promise<Record<string, string>> {
  const answer = await postZip(base, await makeZip([{ name: 'job.R', content: script }]));
  expect(answer.status).toBe(202);
  return parseXml(answer.text).jobToken;
}

function cancel(base: string, jobId: string, app = 'demo'): Promise<Answer> {
  return request(`${base}${REST}/jobs/${app}/${jobId}`, { method: 'DELETE', headers: JSON_ACCEPT });
}

async function statusOf(base: string, jobId: string): Promise<JobStatus> {
  const answer = await request(`${base}${REST}/jobs/demo/${jobId}`, { headers: JSON_ACCEPT });
  expect(answer.status).toBe(200);
  return (JSON.parse(answer.text) as { jobStatus: JobStatus }).jobStatus;
}

async function waitUntilRunning(base: string, jobId: string): Promise<void> {
  await waitFor(
    async () => (await statusOf(base, jobId)).state === 'RUNNING',
    60000,
    `job ${jobId} running`,
  );
}

/** The cancelled job's result: success=false, type txt, the cancellation text. */
async function expectCancelledResult(resultUri: string): Promise<void> {
  const result = parseXml((await waitForResult(resultUri, {}, 10000)).text).result;
  expect(result).toMatchObject({ success: 'false', type: 'txt' });
  const data = await request(result.dataUri);
  expect(data.text).toMatch(CANCEL_TEXT);
}

describe.each(['fork', 'spawn'])('cancel a job (R_SCRIPT_MODE=%s)', (mode) => {
  let service: TestService;

  beforeAll(async () => {
    service = await services.start(oneSlot(mode));
  });

  it('a running script is stopped: 202 with its jobStatus, the cancel result, the slot free', async () => {
    const token = await submit(service.url, SLEEPER);
    await waitUntilRunning(service.url, token.jobId);
    const answer = await cancel(service.url, token.jobId);
    expect(answer.status).toBe(202);
    const status = (JSON.parse(answer.text) as { jobStatus: JobStatus }).jobStatus;
    expect(status.state).toBe('DONE');
    expect(status.cancellation?.by).toBe('anonymous');
    await expectCancelledResult(token.resultUri);
    // The only slot is free again: the next job runs to its result (it could not while R slept).
    const next = await submit(service.url, QUICK);
    const result = parseXml((await waitForResult(next.resultUri, {}, 30000)).text).result;
    expect(result.success).toBe('true');
  });

  it('a queued job never runs: 204, and a second DELETE is 409', async () => {
    const running = await submit(service.url, SLEEPER);
    await waitUntilRunning(service.url, running.jobId);
    const queued = await submit(service.url, QUICK);
    expect((await statusOf(service.url, queued.jobId)).state).toBe('QUEUED');
    const answer = await cancel(service.url, queued.jobId);
    expect(answer.status).toBe(204);
    expect(answer.text).toBe('');
    await expectCancelledResult(queued.resultUri);
    const status = await statusOf(service.url, queued.jobId);
    expect(status.state).toBe('DONE');
    expect(status.cancellation?.by).toBe('anonymous');
    const again = await cancel(service.url, queued.jobId);
    expect(again.status).toBe(409);
    expect(JSON.parse(again.text)).toMatchObject({ error: { status: 409 } });
    expect((await cancel(service.url, running.jobId)).status).toBe(202);
  });
});

describe('cancel: function calls, SOAP, unknown jobs', () => {
  let service: TestService;

  beforeAll(async () => {
    // fork is the default on Linux: the service of the first describe.
    service = await services.start(oneSlot('fork'));
    await loadTestCatalog(service);
  });

  it('a running function-call job is stopped (202) and its result says so', async () => {
    const submitted = await post(service, 'jobs', 'application/json', 'sleep', {
      'X-SVC-Application-Name': 'calls',
    });
    expect(submitted.status).toBe(202);
    const token = parseXml(submitted.text).jobToken;
    await waitFor(
      async () =>
        (
          JSON.parse(
            (
              await request(`${service.url}${REST}/jobs/calls/${token.jobId}`, {
                headers: JSON_ACCEPT,
              })
            ).text,
          ) as { jobStatus: JobStatus }
        ).jobStatus.state === 'RUNNING',
      60000,
      'the call running',
    );
    expect((await cancel(service.url, token.jobId, 'calls')).status).toBe(202);
    const result = parseXml((await waitForResult(token.resultUri, {}, 10000)).text).result;
    expect(result).toMatchObject({ success: 'false', type: 'txt' });
    expect((await request(result.dataUri)).text).toMatch(/was cancelled by anonymous at /);
  });

  it('a SOAP Process call waiting for a cancelled job gets a soap:Server fault saying so', async () => {
    const envelope = jobEnvelope('demo', [
      {
        name: 'job.zip',
        contentType: 'application/zip',
        data: await makeZip([{ name: 'job.R', content: SLEEPER }]),
      },
    ]);
    const worker = service.app.get(WorkerService);
    // A job cancelled before may still hold the slot a moment after its result (webR restarts).
    const runningBefore = new Set(worker.runningJobIds);
    const answering = postSoap(service.url, envelope);
    const jobId = await waitFor(
      () => Promise.resolve(worker.runningJobIds.find((id) => !runningBefore.has(id))),
      60000,
      'the SOAP job running',
    );
    expect((await cancel(service.url, jobId)).status).toBe(202);
    const answer = await answering;
    expect(answer.status).toBe(500);
    const fault = faultOf(answer.text);
    expect(fault.faultcode).toBe('soap:Server');
    expect(fault.faultstring).toMatch(
      new RegExp(`^Job ${jobId} of application demo was cancelled by anonymous at `),
    );
  });

  it('404 for an unknown job, for a job of another application, and 400 for a bad id', async () => {
    expect((await cancel(service.url, randomUUID())).status).toBe(404);
    const token = await submit(service.url, QUICK);
    await waitForResult(token.resultUri, {}, 30000);
    expect((await cancel(service.url, token.jobId, 'calls')).status).toBe(404);
    // Finished: 409, whoever cancels.
    expect((await cancel(service.url, token.jobId)).status).toBe(409);
    expect((await cancel(service.url, 'not-a-uuid')).status).toBe(400);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Another node runs the job: a shared database server (the embedded one belongs to one process).
describeWithServer('cancel a job running on another node', () => {
  let database: TestDatabase;
  const nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    // A heartbeat every 20 s: only the NOTIFY can stop the job quickly.
    const env = testEnvironment(database, {
      SCRIPT_SLOTS: '1',
      HEARTBEAT_SECONDS: '20',
      LEASE_SECONDS: '60',
    });
    nodes.push(await spawnService({ ...env, ROLE: 'api' }));
    nodes.push(await spawnService({ ...env, ROLE: 'worker', MIGRATIONS_RUN: 'false' }));
  });
  afterAll(async () => {
    for (const node of nodes) {
      node.child.kill('SIGTERM');
    }
    await Promise.all(nodes.map((node) => node.exited()));
    await database.drop();
  });

  it('the worker node stops R on the notification and its one slot runs the next job', async () => {
    const [api] = nodes;
    const token = await submit(api.url, SLEEPER);
    await waitUntilRunning(api.url, token.jobId);
    expect((await cancel(api.url, token.jobId)).status).toBe(202);
    await expectCancelledResult(token.resultUri);
    const next = await submit(api.url, QUICK);
    // Well within the 20 s heartbeat: the slot was freed by the notification.
    const result = parseXml((await waitForResult(next.resultUri, {}, 15000)).text).result;
    expect(result.success).toBe('true');
  });
});

describe('cancel: who may (AUTH_MODE=basic)', () => {
  let service: TestService;
  const password = 'pw-for-cancel-tests';
  const basic = (name: string) => ({
    Authorization: `Basic ${Buffer.from(`${name}:${password}`).toString('base64')}`,
  });

  beforeAll(async () => {
    const passwordHash = await hashSecret(password, { N: 1024, r: 8, p: 1 });
    service = await services.start({
      AUTH_MODE: 'basic',
      SCRIPT_SLOTS: '1',
      USERS: JSON.stringify({
        alice: { passwordHash },
        reader: { passwordHash },
        mallory: { passwordHash },
      }),
      APPLICATION_SECURITY: JSON.stringify({
        demo: { userPrincipals: ['alice', 'reader'], scriptSubmissionAllowed: true },
        other: { userPrincipals: ['mallory', 'reader'] },
      }),
    });
  });

  function cancelAs(jobId: string, app: string, headers: Record<string, string>) {
    return request(`${service.url}${REST}/jobs/${app}/${jobId}`, {
      method: 'DELETE',
      headers: { ...JSON_ACCEPT, ...headers },
    });
  }

  it('a stranger sees 404, an anonymous caller 401, a reader without submit rights 403; alice cancels', async () => {
    const answer = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: SLEEPER }]),
      basic('alice'),
    );
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    // Another application's user: the job does not exist for them.
    const stranger = await cancelAs(token.jobId, 'demo', basic('mallory'));
    expect(stranger.status).toBe(404);
    expect(stranger.text).toContain(`Application demo has no job ${token.jobId}.`);
    expect((await cancelAs(token.jobId, 'demo', {})).status).toBe(401);
    // A user of an application that allows no submissions may not cancel there.
    expect((await cancelAs(token.jobId, 'other', basic('reader'))).status).toBe(403);
    const status = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, {
      headers: { ...JSON_ACCEPT, ...basic('alice') },
    });
    expect((JSON.parse(status.text) as { jobStatus: JobStatus }).jobStatus.cancellation).toBe(
      undefined,
    );
    const cancelled = await cancelAs(token.jobId, 'demo', basic('alice'));
    expect([202, 204]).toContain(cancelled.status);
    const ready = await waitForResult(token.resultUri, basic('alice'), 10000);
    const data = await request(parseXml(ready.text).result.dataUri, { headers: basic('alice') });
    expect(data.text).toMatch(/was cancelled by user:alice at /);
  });
});
