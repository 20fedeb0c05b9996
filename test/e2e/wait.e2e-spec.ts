/**
 * Waiting for a result (?wait) and the notifications that end a wait.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { makeZip } from '../support/zip-fixtures';
import { Answer, parseXml, postZip, REST, request } from '../support/rest-client';
import { ServiceProcess, spawnService } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
/** Runs until the test cancels it: holds the node's one slot. */
const BLOCKER = 'writeLines("started", "started.txt")\nSys.sleep(120)\n';
const QUICK = 'writeLines("done", "done.txt")\n';

interface Token {
  jobId: string;
  resultUri: string;
}

async function submit(base: string, script: string): Promise<Token> {
  const answer = await postZip(base, await makeZip([{ name: 'job.R', content: script }]));
  expect(answer.status).toBe(202);
  const token = parseXml(answer.text).jobToken;
  return { jobId: token.jobId, resultUri: token.resultUri };
}

async function stateOf(base: string, jobId: string): Promise<string> {
  const answer = await request(`${base}${REST}/jobs/demo/${jobId}`, { headers: JSON_ACCEPT });
  return (JSON.parse(answer.text) as { jobStatus: { state: string } }).jobStatus.state;
}

function cancel(base: string, jobId: string): Promise<Answer> {
  return request(`${base}${REST}/jobs/demo/${jobId}`, { method: 'DELETE' });
}

/** A request whose answer can be checked for having come yet. */
function pending(answer: Promise<Answer>): { answer: Promise<Answer>; done: () => boolean } {
  let done = false;
  void answer.then(
    () => (done = true),
    () => (done = true),
  );
  return { answer, done: () => done };
}

/**
 * The blocker holds the only slot; `next` waits behind it. Both wait requests below are sent
 * while nothing can change, and must still be open when the test releases the slot.
 */
function describeWaiting(title: string, nodes: () => { api: string; worker: string }): void {
  describe(title, () => {
    it('GET results?wait answers with the result as soon as it is stored', async () => {
      const { api, worker } = nodes();
      const blocker = await submit(api, BLOCKER);
      await waitFor(async () => (await stateOf(api, blocker.jobId)) === 'RUNNING', 60000);
      const next = await submit(api, QUICK);
      const resultWait = pending(request(`${next.resultUri}?wait=60`, { headers: JSON_ACCEPT }));
      const statusWait = pending(
        request(`${api}${REST}/jobs/demo/${next.jobId}?wait=60`, { headers: JSON_ACCEPT }),
      );
      // Several round trips later nothing has answered: the job is still queued.
      for (let i = 0; i < 5; i += 1) {
        expect(await stateOf(api, next.jobId)).toBe('QUEUED');
      }
      expect(resultWait.done()).toBe(false);
      expect(statusWait.done()).toBe(false);

      expect((await cancel(worker, blocker.jobId)).status).toBe(202);
      // The status wait answers at the first change (the start, or already the end).
      const status = await statusWait.answer;
      expect(status.status).toBe(200);
      const state = (JSON.parse(status.text) as { jobStatus: { state: string } }).jobStatus.state;
      expect(['RUNNING', 'DONE']).toContain(state);
      // A 60 s wait that answers 200 was woken: at the deadline it would have been a 404.
      const result = await resultWait.answer;
      expect(result.status).toBe(200);
      expect(JSON.parse(result.text)).toMatchObject({
        result: { jobId: next.jobId, success: true, type: 'zip' },
      });
    });
  });
}

describe('wait instead of polling: one node', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ SCRIPT_SLOTS: '1', RESULT_WAIT_MAX_SECONDS: '60' });
  });
  afterAll(async () => {
    await service.stop();
  });

  describeWaiting('woken by the notification', () => ({ api: service.url, worker: service.url }));

  it('answers 404 after N seconds when no result comes, as without wait', async () => {
    const blocker = await submit(service.url, BLOCKER);
    const answer = await request(`${blocker.resultUri}?wait=1`, { headers: JSON_ACCEPT });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text)).toHaveProperty('error');
    const unknown = await request(
      `${service.url}${REST}/results/demo/00000000-0000-4000-8000-000000000000?wait=1`,
    );
    expect(unknown.status).toBe(404);
    expect((await cancel(service.url, blocker.jobId)).status).toBeLessThan(300);
  });

  it('answers at once when the result or the final state is there already', async () => {
    const done = await submit(service.url, QUICK);
    await waitFor(async () => (await stateOf(service.url, done.jobId)) === 'DONE', 60000);
    const result = await request(`${done.resultUri}?wait=60`, { headers: JSON_ACCEPT });
    expect(result.status).toBe(200);
    const status = await request(`${service.url}${REST}/jobs/demo/${done.jobId}?wait=60`, {
      headers: JSON_ACCEPT,
    });
    expect(status.status).toBe(200);
    expect(status.text).toContain('"DONE"');
  });

  it('GET jobs?wait answers with the unchanged status after N seconds', async () => {
    const blocker = await submit(service.url, BLOCKER);
    await waitFor(async () => (await stateOf(service.url, blocker.jobId)) === 'RUNNING', 60000);
    const answer = await request(`${service.url}${REST}/jobs/demo/${blocker.jobId}?wait=1`, {
      headers: JSON_ACCEPT,
    });
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('"RUNNING"');
    const unknown = await request(
      `${service.url}${REST}/jobs/demo/00000000-0000-4000-8000-000000000000?wait=1`,
    );
    expect(unknown.status).toBe(404);
    expect((await cancel(service.url, blocker.jobId)).status).toBe(202);
  });

  it('GET jobs?wait&while answers at once when the job already left the state the client saw', async () => {
    const blocker = await submit(service.url, BLOCKER);
    await waitFor(async () => (await stateOf(service.url, blocker.jobId)) === 'RUNNING', 60000);
    // The client last saw QUEUED; the job started between its two requests.
    // Without `while` this request would wait for the job's end, up to 60 s.
    const answer = await request(
      `${service.url}${REST}/jobs/demo/${blocker.jobId}?wait=60&while=QUEUED`,
      { headers: JSON_ACCEPT },
    );
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('"RUNNING"');
    // While the state is the one named, the request waits (here until its 1 s deadline).
    const held = await request(
      `${service.url}${REST}/jobs/demo/${blocker.jobId}?wait=1&while=RUNNING`,
      { headers: JSON_ACCEPT },
    );
    expect(held.status).toBe(200);
    expect(held.text).toContain('"RUNNING"');
    const waiting = pending(
      request(`${service.url}${REST}/jobs/demo/${blocker.jobId}?wait=60&while=RUNNING`, {
        headers: JSON_ACCEPT,
      }),
    );
    for (let i = 0; i < 3; i += 1) {
      expect(await stateOf(service.url, blocker.jobId)).toBe('RUNNING');
    }
    expect(waiting.done()).toBe(false);
    expect((await cancel(service.url, blocker.jobId)).status).toBe(202);
    const ended = await waiting.answer;
    expect(ended.status).toBe(200);
    expect(ended.text).toContain('"DONE"');
    // Below the 60 s wait: a request that waited past the change would time the test out.
  }, 55_000);

  it.each([
    ['wait=5&while=STARTED', 'while must be one of QUEUED, RUNNING, DONE.'],
    ['wait=5&while=queued', 'while must be one of QUEUED, RUNNING, DONE.'],
    ['while=QUEUED', 'while is only used with wait.'],
  ])('refuses %p on a job status with 400 and an error body', async (query, message) => {
    const job = '00000000-0000-4000-8000-000000000000';
    const answer = await request(`${service.url}${REST}/jobs/demo/${job}?${query}`, {
      headers: JSON_ACCEPT,
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text)).toMatchObject({ error: { message } });
  });

  it.each(['0', '-1', '61', '1.5', 'abc', '', '99999999'])(
    'refuses wait=%p with 400 and an error body',
    async (value) => {
      const job = '00000000-0000-4000-8000-000000000000';
      for (const path of [`results/demo/${job}`, `jobs/demo/${job}`]) {
        const answer = await request(`${service.url}${REST}/${path}?wait=${value}`, {
          headers: JSON_ACCEPT,
        });
        expect(answer.status).toBe(400);
        expect(JSON.parse(answer.text)).toMatchObject({
          error: { message: 'wait must be a whole number of seconds from 1 to 60.' },
        });
      }
    },
  );
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// The job runs on a worker node; the API node learns of it by NOTIFY only.
describeWithServer('wait instead of polling: an API node and a worker node', () => {
  let database: TestDatabase;
  const nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    const env = testEnvironment(database, { SCRIPT_SLOTS: '1' });
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

  // The worker node has no HTTP API of its own: the cancel goes through the API node too.
  describeWaiting('woken by the notification from the other node', () => ({
    api: nodes[0].url,
    worker: nodes[0].url,
  }));
});
