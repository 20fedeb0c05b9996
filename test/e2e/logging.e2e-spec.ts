import { connect } from 'node:net';
import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
import { ServiceProcess, spawnService } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
  waitFor,
} from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

interface LogLine {
  level: number;
  msg: string;
  context?: string;
  requestId?: string;
  jobId?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Structured logs (issue 6): the service's own JSON lines, captured from its output. */
describe('log lines carry the request id and the job id', () => {
  let database: TestDatabase;
  let service: ServiceProcess;

  const lines = (): LogLine[] =>
    service
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as LogLine);

  beforeAll(async () => {
    database = await createTestDatabase();
    service = await spawnService(
      testEnvironment(database, { ...ADMIN_ENV, LOG_LEVEL: 'debug', LOG_FORMAT: 'json' }),
    );
  });
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited();
    await database?.drop();
  });

  it("keeps the caller's X-Request-Id, answers it, and puts it on the request's lines", async () => {
    const answer = await request(`${service.url}${REST}/admin/catalog/R_SCRIPTS/logged.R`, {
      method: 'PUT',
      headers: {
        Authorization: ADMIN_AUTHORIZATION,
        'X-SVC-Application-Name': 'logapp',
        'X-Request-Id': 'e2e-request-42',
      },
      body: '1\n',
    });
    expect(answer.status).toBe(201);
    expect(answer.headers.get('x-request-id')).toBe('e2e-request-42');
    const line = await waitFor(
      async () => Promise.resolve(lines().find((l) => l.msg.includes('logapp/R_SCRIPTS/logged.R'))),
      5000,
      'the catalog log line',
    );
    expect(line).toMatchObject({ requestId: 'e2e-request-42', context: 'Catalog' });
  });

  it('makes a request id when there is none, or when the given one is not plain', async () => {
    const none = await request(`${service.url}${REST}/system/health/live`);
    expect(none.headers.get('x-request-id')).toMatch(UUID);
    const forged = await request(`${service.url}${REST}/system/health/live`, {
      headers: { 'X-Request-Id': 'evil" ,"level":60' },
    });
    expect(forged.headers.get('x-request-id')).toMatch(UUID);
  });

  it("puts the job id on every line of the job, and no request's id", async () => {
    const zip = await makeZip([
      { name: 'job.R', content: 'cat("hello from R\\n"); writeLines("x", "x.txt")\n' },
    ]);
    const submitted = await postZip(service.url, zip, {
      'X-SVC-Application-Name': 'logapp',
      'X-Request-Id': 'e2e-submission',
    });
    expect(submitted.status).toBe(202);
    const token = parseXml(submitted.text).jobToken;
    await waitForResult(token.resultUri);
    const jobLines = await waitFor(
      async () => {
        const found = lines().filter((l) => l.jobId === token.jobId);
        return Promise.resolve(found.some((l) => l.msg.startsWith('done')) && found);
      },
      5000,
      'the job lines',
    );
    expect(jobLines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^attempt 1 started/),
        expect.stringMatching(/^done/),
      ]),
    );
    // R's output, which arrives through the engine's callbacks, is among them.
    expect(jobLines.map((l) => l.msg)).toContain('R stdout: hello from R');
    // Every line about the job (its own context, R's output) has the id as a field.
    // (The access log's lines of the client's polls are the requests', not the job's.)
    const aboutJob = lines().filter(
      (l) =>
        l.context !== 'Access' &&
        (l.context === `job ${token.jobId}` || l.msg.includes(token.jobId)),
    );
    expect(aboutJob.length).toBeGreaterThanOrEqual(2);
    for (const line of aboutJob) {
      expect(line).toMatchObject({ jobId: token.jobId });
      expect(line.requestId).toBeUndefined();
    }
  });
});

interface AccessLine extends LogLine {
  method: string;
  path: string;
  status: number;
  bytes: number;
  durationMs: number;
  application?: string;
  aborted?: boolean;
  sentStatus?: number;
}

/** The access log (ACCESS_LOG): one structured line per HTTP request, credentials masked. */
describe('the access log', () => {
  let database: TestDatabase;
  /** The second node's: the same server database, or a data directory of its own when embedded. */
  let quietDatabase: TestDatabase | null = null;
  const services: ServiceProcess[] = [];

  const accessLines = (service: ServiceProcess): AccessLine[] =>
    service
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as AccessLine)
      .filter((line) => line.context === 'Access');

  beforeAll(async () => {
    database = await createTestDatabase();
    const env = testEnvironment(database, { ...ADMIN_ENV, LOG_LEVEL: 'info', LOG_FORMAT: 'json' });
    services.push(await spawnService(env));
    // The embedded database has one owner process: the second node gets a directory of its own.
    if (SERVER_DATABASE_URL) {
      services.push(await spawnService({ ...env, ACCESS_LOG: 'false', MIGRATIONS_RUN: 'false' }));
    } else {
      quietDatabase = await createTestDatabase();
      const quietEnv = testEnvironment(quietDatabase, { ...ADMIN_ENV, LOG_FORMAT: 'json' });
      services.push(await spawnService({ ...quietEnv, LOG_LEVEL: 'info', ACCESS_LOG: 'false' }));
    }
  });
  afterAll(async () => {
    for (const service of services) {
      service.child.kill('SIGTERM');
      await service.exited();
    }
    await database?.drop();
    await quietDatabase?.drop();
  });

  it('writes one line per request with its method, path, status, bytes, time and application', async () => {
    const [service] = services;
    const answer = await request(
      `${service.url}${REST}/results/accessapp?limit=5&api_key=k-secret-1&password=p-secret-2`,
      {
        headers: {
          Authorization: ADMIN_AUTHORIZATION,
          'X-Request-Id': 'access-log-1',
        },
      },
    );
    expect(answer.status).toBe(200);
    const line = await waitFor(
      async () => Promise.resolve(accessLines(service).find((l) => l.requestId === 'access-log-1')),
      5000,
      'the access line',
    );
    expect(line).toMatchObject({
      level: 30,
      method: 'GET',
      path: '/svc/api/rest/results/accessapp?limit=5&api_key=[redacted]&password=[redacted]',
      status: 200,
      application: 'accessapp',
    });
    expect(line.bytes).toBeGreaterThan(answer.body.length);
    expect(typeof line.durationMs).toBe('number');
    expect(accessLines(service).filter((l) => l.requestId === 'access-log-1')).toHaveLength(1);
    const output = service.output();
    for (const secret of ['k-secret-1', 'p-secret-2', ADMIN_AUTHORIZATION]) {
      expect(output).not.toContain(secret);
    }
  });

  it('logs a request whose client hung up before the answer as 499 and aborted, never as 200', async () => {
    const [service] = services;
    const { hostname, port } = new URL(service.url);
    // A job upload announced as 1 MB, of which 10 bytes come before the client goes away.
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(
          `POST ${REST}/jobs HTTP/1.1\r\nHost: ${hostname}\r\n` +
            `Authorization: ${ADMIN_AUTHORIZATION}\r\nX-Request-Id: access-log-aborted\r\n` +
            'X-SVC-Application-Name: demo\r\nContent-Type: application/zip\r\n' +
            'Content-Length: 1000000\r\n\r\n0123456789',
          () => setTimeout(() => socket.destroy(), 200),
        );
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const line = await waitFor(
      async () =>
        Promise.resolve(accessLines(service).find((l) => l.requestId === 'access-log-aborted')),
      5000,
      'the access line of the aborted request',
    );
    expect(line).toMatchObject({
      method: 'POST',
      path: `${REST}/jobs`,
      status: 499,
      aborted: true,
      msg: `POST ${REST}/jobs 499 (client closed the connection)`,
    });
    expect(line.sentStatus).toBeUndefined();
  });

  it('logs errors too, and nothing with ACCESS_LOG=false', async () => {
    const [on, off] = services;
    for (const service of services) {
      const answer = await request(`${service.url}${REST}/jobs/demo/not-a-uuid`, {
        headers: { 'X-Request-Id': 'access-log-2' },
      });
      expect(answer.status).toBe(400);
    }
    await waitFor(
      async () =>
        Promise.resolve(
          accessLines(on).find((l) => l.requestId === 'access-log-2' && l.status === 400),
        ),
      5000,
      'the access line of the 400',
    );
    expect(accessLines(off)).toEqual([]);
  });
});
