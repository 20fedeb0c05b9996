import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
import { startService, RunningService } from '../../src/bootstrap';
import { loadConfig } from '../../src/config/app-config';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { QueueRepository } from '../../src/queue/queue.repository';
import { fileField, postForm, textField } from '../support/form-client';
import { Answer, parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
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
import { validateAgainstSchema } from '../support/xml-schema';
import { Delivery, Receiver } from '../support/callback-receiver';
import { HostLookup } from '../../src/callbacks/host-lookup';
import { makeZip } from '../support/zip-fixtures';
import { sharedServices } from '../support/shared-services';

const SECRET = 'callback-secret-for-the-tests';
const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
const QUICK = 'writeLines("done", "done.txt")\n';

/** Callbacks to the receiver (127.0.0.1, named exactly) for demo; `open` admits any public host. */
const CALLBACK_ENV = {
  APPLICATION_SETTINGS: JSON.stringify({
    demo: { callbackHosts: ['127.0.0.1'], callbackSecret: SECRET },
    open: { callbackHosts: ['*'], callbackSecret: SECRET },
    unsigned: { callbackHosts: ['127.0.0.1'] },
  }),
  // Small delays: 200 ms, then 400 ms, at most 1 s between attempts.
  CALLBACK_FIRST_RETRY_MS: '200',
  CALLBACK_MAX_RETRY_DELAY_SECONDS: '1',
};

interface CallbackStatus {
  state: string;
  attempts: number;
  lastHttpStatus?: number;
  lastError?: string;
  deliveryTime?: string;
}

async function submit(base: string, callbackUrl: string, app = 'demo'): Promise<Answer> {
  return postZip(base, await makeZip([{ name: 'job.R', content: QUICK }]), {
    'X-SVC-Application-Name': app,
    'X-SVC-Callback-Url': callbackUrl,
    ...JSON_ACCEPT,
  });
}

async function submitted(base: string, callbackUrl: string): Promise<Record<string, string>> {
  const answer = await submit(base, callbackUrl);
  expect(answer.status).toBe(202);
  return (JSON.parse(answer.text) as { jobToken: Record<string, string> }).jobToken;
}

async function callbackOf(
  base: string,
  jobId: string,
  app = 'demo',
): Promise<CallbackStatus | undefined> {
  const answer = await request(`${base}${REST}/jobs/${app}/${jobId}`, { headers: JSON_ACCEPT });
  expect(answer.status).toBe(200);
  return (JSON.parse(answer.text) as { jobStatus: { callback?: CallbackStatus } }).jobStatus
    .callback;
}

async function waitForCallbackState(
  base: string,
  jobId: string,
  state: string,
): Promise<CallbackStatus> {
  return waitFor(
    async () => {
      const callback = await callbackOf(base, jobId);
      return callback?.state === state ? callback : undefined;
    },
    60000,
    `the callback of job ${jobId} ${state}`,
  );
}

function signatureVerifies(delivery: Delivery): boolean {
  const expected = Buffer.from(
    `sha256=${createHmac('sha256', SECRET).update(delivery.body).digest('hex')}`,
  );
  const given = Buffer.from(String(delivery.headers['x-svc-signature']));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe('job callbacks', () => {
  let service: TestService;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    service = await startTestService(CALLBACK_ENV);
  });
  afterAll(async () => {
    await service.stop();
    await receiver.stop();
  });

  it('POSTs the result representation, signed, and jobStatus shows it delivered (JSON and XML)', async () => {
    const token = await submitted(service.url, receiver.url());
    const status = await waitForCallbackState(service.url, token.jobId, 'delivered');
    expect(status).toMatchObject({ attempts: 1, lastHttpStatus: 200 });
    expect(status.lastError).toBeUndefined();

    const [delivery] = receiver.deliveriesFor(token.jobId);
    expect(receiver.deliveriesFor(token.jobId)).toHaveLength(1);
    expect(signatureVerifies(delivery)).toBe(true);
    expect(delivery.headers['x-svc-application-name']).toBe('demo');
    expect(delivery.headers['content-type']).toMatch(/^application\/json/);
    // The same body GET results/{app}/{jobId} answers in the mapped JSON receivers have read
    // from the start (vnd+json), whatever plain application/json has become.
    const result = await waitForResult(token.resultUri, { Accept: 'application/vnd.svc+json' });
    expect(delivery.body.toString('utf8')).toBe(result.text);
    expect(JSON.parse(result.text)).toMatchObject({
      result: { jobId: token.jobId, success: true, type: 'zip' },
    });

    const xml = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, {
      headers: { Accept: 'application/vnd.svc+xml' },
    });
    expect(await validateAgainstSchema(xml.text, 'rest-data.xsd')).toEqual({
      valid: true,
      errors: [],
    });
    expect(parseXml(xml.text).jobStatus.callback).toMatchObject({
      state: 'delivered',
      attempts: '1',
      lastHttpStatus: '200',
    });
  });

  it('retries a receiver that answers 500 twice and delivers on the third attempt', async () => {
    receiver.statuses = [500, 500];
    const token = await submitted(service.url, receiver.url('/flaky'));
    const status = await waitForCallbackState(service.url, token.jobId, 'delivered');
    expect(status).toMatchObject({ attempts: 3, lastHttpStatus: 200 });
    const deliveries = receiver.deliveriesFor(token.jobId);
    expect(deliveries).toHaveLength(3);
    // Every attempt carries the same signed body.
    expect(deliveries.every(signatureVerifies)).toBe(true);
    expect(new Set(deliveries.map((d) => d.body.toString())).size).toBe(1);
  });

  it('shows a failed attempt while it retries: the HTTP status and the error', async () => {
    receiver.statuses = [503, 503, 503, 503];
    const token = await submitted(service.url, receiver.url('/busy'));
    const pending = await waitFor(
      async () => {
        const callback = await callbackOf(service.url, token.jobId);
        return callback && callback.attempts >= 1 ? callback : undefined;
      },
      60000,
      'a failed attempt',
    );
    expect(pending).toMatchObject({ state: 'pending', lastHttpStatus: 503, lastError: 'HTTP 503' });
    await waitForCallbackState(service.url, token.jobId, 'delivered');
  });

  it('a job that is cancelled sends its callback too', async () => {
    const answer = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: 'Sys.sleep(120)\n' }]),
      { 'X-SVC-Callback-Url': receiver.url('/cancelled'), ...JSON_ACCEPT },
    );
    const token = (JSON.parse(answer.text) as { jobToken: Record<string, string> }).jobToken;
    expect(await callbackOf(service.url, token.jobId)).toMatchObject({
      state: 'pending',
      attempts: 0,
    });
    const cancel = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, {
      method: 'DELETE',
    });
    expect([202, 204]).toContain(cancel.status);
    await waitForCallbackState(service.url, token.jobId, 'delivered');
    const [delivery] = receiver.deliveriesFor(token.jobId);
    expect(JSON.parse(delivery.body.toString())).toMatchObject({
      result: { jobId: token.jobId, success: false, type: 'txt' },
    });
  });

  it('takes the callback URL from a form field of the upload form', async () => {
    const answer = await postForm(
      service.url,
      [
        textField('X-SVC-Application-Name', 'demo'),
        textField('X-SVC-Callback-Url', receiver.url('/form')),
        fileField('job.R', QUICK),
      ],
      { Accept: 'application/json' },
    );
    expect(answer.status).toBe(202);
    // A form post asking for application/json gets the seed's jobToken element.
    const { jobToken: token } = JSON.parse(answer.text) as { jobToken: Record<string, string> };
    await waitForCallbackState(service.url, token.jobId, 'delivered');
    expect(signatureVerifies(receiver.deliveriesFor(token.jobId)[0])).toBe(true);
  });

  it.each([
    [
      'a host not on the allow-list',
      'demo',
      'http://callbacks.example.org/hook',
      /not on the callback hosts/,
    ],
    [
      'localhost when only 127.0.0.1 is listed',
      'demo',
      'http://localhost:9/hook',
      /not on the callback hosts/,
    ],
    ['a URL that is not http(s)', 'demo', 'ftp://127.0.0.1/hook', /http or https/],
    ['a relative URL', 'demo', '/hook', /not an absolute URL/],
    ['credentials in the URL', 'demo', 'http://user:pw@127.0.0.1/hook', /credentials/],
    [
      '127.0.0.1 admitted only by a pattern',
      'open',
      'http://127.0.0.1:9/hook',
      /loopback, private/,
    ],
    [
      'localhost admitted only by a pattern',
      'open',
      'http://localhost:9/hook',
      /loopback, private/,
    ],
    ['::1 admitted only by a pattern', 'open', 'http://[::1]:9/hook', /loopback, private/],
    [
      'a private address admitted only by a pattern',
      'open',
      'http://10.1.2.3/hook',
      /loopback, private/,
    ],
    [
      'an application without a callback secret',
      'unsigned',
      'http://127.0.0.1:9/hook',
      /no callback secret/,
    ],
  ])('refuses %s with 400', async (_what, app, url, message) => {
    const answer = await submit(service.url, url, app);
    expect(answer.status).toBe(400);
    const error = (JSON.parse(answer.text) as { error: { status: number; message: string } }).error;
    expect(error.status).toBe(400);
    expect(error.message).toMatch(message);
  });

  it('refuses a bad callback URL in a form with 400 too', async () => {
    const answer = await postForm(
      service.url,
      [
        textField('X-SVC-Application-Name', 'demo'),
        textField('X-SVC-Callback-Url', 'http://localhost/hook'),
        fileField('job.R', QUICK),
      ],
      { Accept: 'application/json' },
    );
    expect(answer.status).toBe(400);
    expect(answer.text).toMatch(/not on the callback hosts/);
  });

  it('the callback row is deleted with the result', async () => {
    const token = await submitted(service.url, receiver.url('/deleted'));
    await waitForCallbackState(service.url, token.jobId, 'delivered');
    const rows = async (): Promise<number> =>
      (
        await service.app
          .get(DataSource)
          .query<Array<{ n: number }>>(
            'SELECT count(*)::int AS n FROM job_callback WHERE job_id = $1',
            [token.jobId],
          )
      )[0].n;
    expect(await rows()).toBe(1);
    expect((await request(token.resultUri, { method: 'DELETE' })).status).toBe(204);
    expect(await rows()).toBe(0);
  });

  it('a job without a callback has no callback element', async () => {
    const answer = await postZip(service.url, await makeZip([{ name: 'job.R', content: QUICK }]), {
      ...JSON_ACCEPT,
    });
    const token = (JSON.parse(answer.text) as { jobToken: Record<string, string> }).jobToken;
    await waitForResult(token.resultUri);
    expect(await callbackOf(service.url, token.jobId)).toBeUndefined();
  });
});

/** IPv6 forms that carry the IPv4 loopback address, each of which once passed the `*` pattern. */
const LOOPBACK_IN_IPV6 = [
  ['IPv4-mapped', '::ffff:127.0.0.1'],
  ['IPv4-compatible', '::127.0.0.1'],
  ['IPv4-translated', '::ffff:0:127.0.0.1'],
  ['NAT64', '64:ff9b::127.0.0.1'],
  ['6to4', '2002:7f00:1::1'],
  ['Teredo', '2001:0:4136:e378:8000:63bf:80ff:fffe'],
];

// A name server is on the attacker's side: the test answers for names under .rebind.test and
// .pinned.test as one would, differently on each question, through the service's HostLookup.
describe('job callbacks against hostile addresses and names', () => {
  let service: TestService;
  let receiver: Receiver;
  /** The answers for a name, in turn; the last one repeats. */
  const answers = new Map<string, string[]>();
  const asked: string[] = [];

  beforeAll(async () => {
    receiver = await new Receiver().start();
    service = await startTestService({
      ...CALLBACK_ENV,
      APPLICATION_SETTINGS: JSON.stringify({
        open: { callbackHosts: ['*'], callbackSecret: SECRET },
        rebind: { callbackHosts: ['*.rebind.test'], callbackSecret: SECRET },
        pinned: { callbackHosts: ['hooks.pinned.test'], callbackSecret: SECRET },
      }),
      CALLBACK_TIMEOUT_SECONDS: '2',
    });
    const hosts = service.app.get(HostLookup);
    const system = hosts.addresses.bind(hosts);
    jest.spyOn(hosts, 'addresses').mockImplementation((host) => {
      const list = answers.get(host);
      if (!list) {
        return system(host);
      }
      asked.push(host);
      const address = list.length > 1 ? (list.shift() as string) : list[0];
      return Promise.resolve([{ address, family: address.includes(':') ? 6 : 4 }]);
    });
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await service.stop();
    await receiver.stop();
  });

  async function submittedBy(app: string, callbackUrl: string): Promise<string> {
    const answer = await submit(service.url, callbackUrl, app);
    expect(answer.status).toBe(202);
    return (JSON.parse(answer.text) as { jobToken: { jobId: string } }).jobToken.jobId;
  }

  async function attemptsMade(app: string, jobId: string, count: number): Promise<CallbackStatus> {
    return waitFor(
      async () => {
        const callback = await callbackOf(service.url, jobId, app);
        return callback && callback.attempts >= count ? callback : undefined;
      },
      60000,
      `${count} attempt(s) of the callback of job ${jobId}`,
    );
  }

  it.each(LOOPBACK_IN_IPV6)(
    'refuses at submission a %s address of 127.0.0.1 (%s) admitted by a pattern, with 400',
    async (_form, address) => {
      const answer = await submit(service.url, `http://[${address}]:${receiver.port}/hook`, 'open');
      expect(answer.status).toBe(400);
      const error = (JSON.parse(answer.text) as { error: { status: number; message: string } })
        .error;
      expect(error.status).toBe(400);
      expect(error.message).toMatch(/loopback, private or link-local/);
      expect(error.message).toContain('carries the IPv4 address 127.0.0.1');
      expect(receiver.deliveries).toHaveLength(0);
    },
  );

  it.each(LOOPBACK_IN_IPV6)(
    'refuses a name that resolves to a %s address of 127.0.0.1 (%s) at submission',
    async (_form, address) => {
      const host = `submit-${address.replace(/[:.]/g, '-')}.rebind.test`;
      answers.set(host, [address]);
      const answer = await submit(service.url, `http://${host}:${receiver.port}/hook`, 'rebind');
      expect(answer.status).toBe(400);
      expect(answer.text).toContain('carries the IPv4 address 127.0.0.1');
    },
  );

  it.each(LOOPBACK_IN_IPV6)(
    'does not send to a name public at submission that resolves to a %s address of 127.0.0.1 (%s) at delivery',
    async (_form, address) => {
      const host = `deliver-${address.replace(/[:.]/g, '-')}.rebind.test`;
      answers.set(host, ['203.0.113.7', address]);
      const jobId = await submittedBy('rebind', `http://${host}:${receiver.port}/hook`);
      const status = await attemptsMade('rebind', jobId, 1);
      expect(status.state).toBe('pending');
      expect(status.lastHttpStatus).toBeUndefined();
      expect(status.lastError).toMatch(/^not sent: .*carries the IPv4 address 127\.0\.0\.1/);
      expect(receiver.deliveriesFor(jobId)).toHaveLength(0);
    },
  );

  it('connects to the address it checked: a name public when checked and 127.0.0.1 just after never reaches 127.0.0.1', async () => {
    const host = 'flip.rebind.test';
    // Submission and the first attempt's check see a public address (one that routes nowhere);
    // every later question is answered with the receiver's address.
    answers.set(host, ['203.0.113.7', '203.0.113.7', '127.0.0.1']);
    const jobId = await submittedBy('rebind', `http://${host}:${receiver.port}/hook`);
    const status = await attemptsMade('rebind', jobId, 2);
    // The first attempt went to 203.0.113.7 and failed there; the second was refused at its check.
    expect(status.lastError).toMatch(/^not sent: .*127\.0\.0\.1 is a loopback/);
    // Had the connection asked again, the third answer would have sent it to the receiver.
    expect(receiver.deliveriesFor(jobId)).toHaveLength(0);
    expect(asked).toContain(host);
  });

  it('a name named exactly is delivered to the address its check resolved, under its own name', async () => {
    const host = 'hooks.pinned.test';
    answers.set(host, ['127.0.0.1']);
    const jobId = await submittedBy('pinned', `http://${host}:${receiver.port}/pinned`);
    const status = await waitFor(
      async () => {
        const callback = await callbackOf(service.url, jobId, 'pinned');
        return callback?.state === 'delivered' ? callback : undefined;
      },
      60000,
      'the pinned callback delivered',
    );
    expect(status).toMatchObject({ attempts: 1, lastHttpStatus: 200 });
    const [delivery] = receiver.deliveriesFor(jobId);
    // The system's resolver knows no such name: only the checked answer could have connected it.
    expect(delivery.headers.host).toBe(`${host}:${receiver.port}`);
  });
});

describe('job callbacks survive a restart', () => {
  let database: TestDatabase;
  let running: RunningService | null = null;
  const receiver = new Receiver();

  async function start(): Promise<string> {
    const config = loadConfig(testEnvironment(database, CALLBACK_ENV));
    running = await startService(config, new PinoLoggerService(config.logLevel));
    return running.url ?? '';
  }

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await running?.close();
    await receiver.stop();
    await database.drop();
  });

  it('a callback pending while the receiver was down is delivered after the service restarts', async () => {
    // Take a free port for the receiver, then leave it down.
    await receiver.start();
    await receiver.stop();
    let base = await start();
    const token = await submitted(base, receiver.url('/later'));
    const failing = await waitFor(
      async () => {
        const callback = await callbackOf(base, token.jobId);
        return callback && callback.attempts >= 1 ? callback : undefined;
      },
      60000,
      'an attempt refused by the stopped receiver',
    );
    expect(failing.state).toBe('pending');
    expect(failing.lastHttpStatus).toBeUndefined();
    expect(failing.lastError).toBeTruthy();
    await running?.close();
    running = null;

    await receiver.start(receiver.port);
    base = await start();
    const status = await waitForCallbackState(base, token.jobId, 'delivered');
    expect(status.attempts).toBeGreaterThanOrEqual(2);
    const deliveries = receiver.deliveriesFor(token.jobId);
    expect(deliveries).toHaveLength(1);
    expect(signatureVerifies(deliveries[0])).toBe(true);
  });
});

describe('job callbacks that keep failing', () => {
  let service: TestService;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    // Attempts at about 0, 0.2 and 0.6 s; the next (1.4 s) would be past the 1 s period.
    service = await startTestService({ ...CALLBACK_ENV, CALLBACK_RETRY_SECONDS: '1' });
  });
  afterAll(async () => {
    await service.stop();
    await receiver.stop();
  });

  it('are marked failed when the retry period is over, with the last answer', async () => {
    receiver.statuses = Array<number>(100).fill(500);
    const token = await submitted(service.url, receiver.url('/broken'));
    const status = await waitForCallbackState(service.url, token.jobId, 'failed');
    expect(status).toMatchObject({ lastHttpStatus: 500, lastError: 'HTTP 500' });
    expect(status.deliveryTime).toBeUndefined();
    expect(status.attempts).toBeGreaterThanOrEqual(2);
    expect(receiver.deliveriesFor(token.jobId)).toHaveLength(status.attempts);
    // Its callback job, the queue's, went with it: nothing is left to retry.
    expect(await callbackJobsOf(service, token.jobId)).toEqual([]);
  });
});

/** The callback jobs (kind `callback` in the queue) of job `jobId`. */
async function callbackJobsOf(
  service: TestService,
  jobId: string,
): Promise<Array<{ id: string; state: string; due_later: boolean; last_error: string | null }>> {
  return service.app.get(DataSource).query(
    `SELECT id, state, run_after > now() AS due_later, last_error FROM job
        WHERE callback_of = $1 AND kind = 'callback'`,
    [jobId],
  );
}

/** A receiver that answers 200 only when told to: a callback held in flight meanwhile. */
class HoldingReceiver {
  readonly received: string[] = [];
  private readonly held: ServerResponse[] = [];
  private readonly server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      this.received.push(String(req.headers['x-svc-job-id']));
      this.held.push(res);
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/held`;
  }

  release(): void {
    for (const res of this.held.splice(0)) {
      res.statusCode = 200;
      res.end();
    }
  }

  async stop(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * One R slot; a failed attempt is tried again 10 to 20 s later; an attempt may take a minute; no
 * polling (every 10 minutes), so a callback or a job that starts was woken by its notification.
 */
const QUEUED_CALLBACK_ENV = {
  ...CALLBACK_ENV,
  SCRIPT_SLOTS: '1',
  CALLBACK_FIRST_RETRY_MS: '20000',
  CALLBACK_MAX_RETRY_DELAY_SECONDS: '60',
  CALLBACK_TIMEOUT_SECONDS: '60',
  POLL_INTERVAL_MS: '600000',
};
// The describe of callback jobs on the queue and the one without polling share a service; the
// services of the describes before them have stopped by then.
const services = sharedServices();

describe('callback jobs on the queue', () => {
  let service: TestService;
  let receiver: Receiver;
  let holding: HoldingReceiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    holding = await new HoldingReceiver().start();
    service = await services.start(QUEUED_CALLBACK_ENV);
  });
  afterAll(async () => {
    await holding.stop();
    await receiver.stop();
  });

  it('a failed attempt puts the callback job back in the queue, due later; it never shows as a job', async () => {
    receiver.statuses = [500];
    const token = await submitted(service.url, receiver.url('/retried'));
    const failing = await waitFor(
      async () => {
        const callback = await callbackOf(service.url, token.jobId);
        return callback && callback.attempts >= 1 ? callback : undefined;
      },
      60000,
      'the first attempt',
    );
    expect(failing).toMatchObject({ state: 'pending', attempts: 1, lastHttpStatus: 500 });
    const [callbackJob] = await callbackJobsOf(service, token.jobId);
    expect(callbackJob).toMatchObject({ state: 'QUEUED', due_later: true, last_error: 'HTTP 500' });

    // Not a job to users: no status, log or cancel of its id...
    const jobUri = `${service.url}${REST}/jobs/demo/${callbackJob.id}`;
    expect((await request(jobUri, { headers: JSON_ACCEPT })).status).toBe(404);
    expect((await request(`${jobUri}/log`, { headers: JSON_ACCEPT })).status).toBe(404);
    expect((await request(jobUri, { method: 'DELETE', headers: JSON_ACCEPT })).status).toBe(404);
    // ...and not in the counts: backlog (KEDA's and the metric's), queue depth, per application
    // (statistics, metrics), the application's queued jobs (maxQueuedJobs).
    const queue = service.app.get(QueueRepository);
    expect(await queue.queueBacklog()).toBe(0);
    expect(await queue.queueDepth()).toBe(0);
    expect(await queue.jobsPerApplication()).toEqual([]);
    expect(await queue.queuedJobsOf('demo', 100)).toBe(0);
    expect(await callbackJobsOf(service, token.jobId)).toHaveLength(1);
    // Deleting the result deletes the job, its callback and its callback job.
    expect((await request(token.resultUri, { method: 'DELETE' })).status).toBe(204);
    expect(await callbackJobsOf(service, token.jobId)).toEqual([]);
    const rows = await service.app
      .get(DataSource)
      .query('SELECT job_id FROM job_callback WHERE job_id = $1', [token.jobId]);
    expect(rows).toEqual([]);
  });

  it('a callback in flight takes no R slot: with one slot, a job runs while its receiver has not answered', async () => {
    const held = await submitted(service.url, holding.url());
    await waitFor(
      () => Promise.resolve(holding.received.includes(held.jobId) || undefined),
      60000,
      'the held callback',
    );
    const answer = await postZip(service.url, await makeZip([{ name: 'job.R', content: QUICK }]), {
      ...JSON_ACCEPT,
    });
    const token = (JSON.parse(answer.text) as { jobToken: Record<string, string> }).jobToken;
    expect((await waitForResult(token.resultUri, {}, 60000)).status).toBe(200);
    // The callback was in flight all along, leased like a running job.
    expect((await callbackJobsOf(service, held.jobId)).map((job) => job.state)).toEqual([
      'RUNNING',
    ]);
    expect((await callbackOf(service.url, held.jobId))?.state).toBe('pending');
    holding.release();
    await waitForCallbackState(service.url, held.jobId, 'delivered');
    expect(await callbackJobsOf(service, held.jobId)).toEqual([]);
  });
});

// No polling at all: only the notification that a callback was queued can start its delivery.
describe('job callbacks without polling', () => {
  let service: TestService;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await new Receiver().start();
    // The service of the callback jobs above: it polls every 10 minutes.
    service = await services.start(QUEUED_CALLBACK_ENV);
  });
  afterAll(async () => {
    await receiver.stop();
  });

  it('delivers as soon as the result is stored, woken by the callback notification', async () => {
    const token = await submitted(service.url, receiver.url());
    // Far below the 10-minute poll: a delivery that waited for it would time the test out.
    const status = await waitForCallbackState(service.url, token.jobId, 'delivered');
    expect(status).toMatchObject({ attempts: 1, lastHttpStatus: 200 });
    expect(receiver.deliveriesFor(token.jobId)).toHaveLength(1);
  }, 60_000);
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Several worker nodes share a database server (the embedded one belongs to one process).
describeWithServer('job callbacks with two worker nodes', () => {
  let database: TestDatabase;
  const nodes: ServiceProcess[] = [];
  const receiver = new Receiver();

  beforeAll(async () => {
    await receiver.start();
    database = await createTestDatabase();
    const env = testEnvironment(database, { ...CALLBACK_ENV, POLL_INTERVAL_MS: '50' });
    nodes.push(await spawnService({ ...env, ROLE: 'api' }));
    nodes.push(await spawnService({ ...env, ROLE: 'worker', MIGRATIONS_RUN: 'false' }));
    nodes.push(await spawnService({ ...env, ROLE: 'worker', MIGRATIONS_RUN: 'false' }));
  });
  afterAll(async () => {
    for (const node of nodes) {
      node.child.kill('SIGTERM');
    }
    await Promise.all(nodes.map((node) => node.exited()));
    await receiver.stop();
    await database.drop();
  });

  it('deliver each callback once', async () => {
    const [api] = nodes;
    const tokens = await Promise.all(
      Array.from({ length: 8 }, () => submitted(api.url, receiver.url('/shared'))),
    );
    for (const token of tokens) {
      await waitForCallbackState(api.url, token.jobId, 'delivered');
    }
    for (const token of tokens) {
      expect(receiver.deliveriesFor(token.jobId)).toHaveLength(1);
      expect((await callbackOf(api.url, token.jobId))?.attempts).toBe(1);
    }
  });
});
