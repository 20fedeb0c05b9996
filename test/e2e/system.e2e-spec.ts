/**
 * The system endpoints: health, info, metrics, on each role.
 *
 * @ci-pass embedded
 */
import { randomUUID } from 'node:crypto';
import { JobKind } from '../../src/queue/queue.types';
import { QueueRepository } from '../../src/queue/queue.repository';
import { proxyDatabase } from '../support/cuttable-proxy';
import { freePort } from '../support/service-process';
import { histogramCount, parseMetrics, sample } from '../support/prometheus';
import { Answer, parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestService,
  waitFor,
} from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';
import { findBwrap } from '../../src/r-engine/launch/r-sandbox';
import { makeZip } from '../support/zip-fixtures';

const SYSTEM = `${REST}/system`;

/** Runs a one-file script job for `app` and waits for its result; returns `success`. */
async function runJob(base: string, app: string, script: string): Promise<string> {
  const zip = await makeZip([{ name: 'job.R', content: script }]);
  const submitted = await postZip(base, zip, { 'X-SVC-Application-Name': app });
  expect(submitted.status).toBe(202);
  const answer = await waitForResult(parseXml(submitted.text).jobToken.resultUri);
  return parseXml(answer.text).result.success;
}

function expectText(answer: Answer, status: number, body: string): void {
  expect({ status: answer.status, body: answer.text }).toEqual({ status, body });
  expect(answer.headers.get('content-type')).toMatch(/^text\/plain/);
}

describe('system endpoints (SPEC §9)', () => {
  let service: TestService;

  beforeAll(async () => {
    // metricsapp is known by its settings (others by their catalog files); other names are not.
    service = await startTestService({
      APPLICATION_SETTINGS: JSON.stringify({ metricsapp: {} }),
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('health: check answers OK (database and R), live and ready answer up', async () => {
    expectText(await request(`${service.url}${SYSTEM}/health/check`), 200, 'OK');
    const live = await request(`${service.url}${SYSTEM}/health/live`);
    expect([live.status, JSON.parse(live.text)]).toEqual([200, { status: 'up' }]);
    const ready = await request(`${service.url}${SYSTEM}/health/ready`);
    expect([ready.status, JSON.parse(ready.text)]).toEqual([200, { status: 'up' }]);
    const post = await request(`${service.url}${SYSTEM}/health/check`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('keeps an idle connection open past the 60 s idle timeout of common load balancers', async () => {
    const answer = await request(`${service.url}${SYSTEM}/health/live`);
    expect(answer.headers.get('keep-alive')).toBe('timeout=65');
  });

  it('info: nodeInformation with every field, schema-valid XML and typed JSON', async () => {
    const xml = await request(`${service.url}${SYSTEM}/info`);
    expect(xml.status).toBe(200);
    expect(xml.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+xml/);
    expect(await validateAgainstSchema(xml.text, 'rest-data.xsd')).toEqual({
      valid: true,
      errors: [],
    });
    const json = await request(`${service.url}${SYSTEM}/info`, {
      headers: { Accept: 'application/vnd.svc+json' },
    });
    const info = (JSON.parse(json.text) as { nodeInformation: Record<string, unknown> })
      .nodeInformation;
    expect(Object.keys(info).sort()).toEqual(
      [
        'name',
        'healthy',
        'uptime',
        'uptimeText',
        'serverInfo',
        'version',
        'rEngine',
        'rVersion',
        'rSandbox',
        'maxMemory',
        'freeMemory',
        'osLoadAverage',
      ].sort(),
    );
    expect(info).toMatchObject({
      healthy: true,
      rEngine: service.config.rEngine === 'auto' ? expect.any(String) : service.config.rEngine,
      rVersion: expect.stringMatching(/^R version \d+\.\d+/),
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
    });
    // webR isolates by WebAssembly; native R on a machine with bubblewrap (CI) by bwrap.
    expect(info.rSandbox).toBe(
      info.rEngine === 'webr' ? 'webassembly' : findBwrap() ? 'bwrap' : 'none',
    );
    const metrics = await request(`${service.url}/metrics`);
    expect(metrics.text).toContain(`svc_r_sandbox{sandbox="${String(info.rSandbox)}"} 1`);
    for (const key of ['uptime', 'maxMemory', 'freeMemory', 'osLoadAverage']) {
      expect([key, typeof info[key]]).toEqual([key, 'number']);
    }
    expect(Number(info.freeMemory)).toBeLessThanOrEqual(Number(info.maxMemory));
  });

  it('metrics: Prometheus text whose job counters and histograms move after jobs', async () => {
    const scrape = async () => {
      const answer = await request(`${service.url}/metrics`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toMatch(/^text\/plain;.*\bversion=0\.0\.4\b/);
      return { text: answer.text, families: parseMetrics(answer.text) };
    };
    const labels = { application: 'metricsapp', source: 'rest' };
    const before = await scrape();
    expect(before.families.get('svc_jobs_submitted_total')?.type).toBe('COUNTER');
    expect(before.families.get('svc_job_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(before.families.get('svc_http_request_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(before.families.get('svc_queue_depth')?.type).toBe('GAUGE');
    expect(before.families.get('svc_r_sessions')?.type).toBe('GAUGE');
    expect(sample(before.families, 'svc_queue_depth')?.value).toBe('0');
    expect(sample(before.families, 'svc_jobs_submitted_total', labels)).toBeUndefined();

    expect(await runJob(service.url, 'metricsapp', 'writeLines("ok", "ok.txt")\n')).toBe('true');
    expect(await runJob(service.url, 'metricsapp', 'stop("planned failure")\n')).toBe('false');

    // The result is visible a moment before the worker counts it: wait for the counter.
    const after = await waitFor(
      async () => {
        const scraped = await scrape();
        const finished = sample(scraped.families, 'svc_jobs_finished_total', labels)?.value;
        return finished === '2' && scraped;
      },
      10000,
      'the finished counter',
    );
    expect(sample(after.families, 'svc_jobs_submitted_total', labels)?.value).toBe('2');
    expect(sample(after.families, 'svc_jobs_failed_total', labels)?.value).toBe('1');
    expect(histogramCount(after.text, 'svc_job_duration_seconds', labels)).toBe(2);
    // Each job's wait from submission to start, on the worker that started it.
    expect(histogramCount(after.text, 'svc_job_wait_seconds', { application: 'metricsapp' })).toBe(
      2,
    );
    const submissions = histogramCount(after.text, 'svc_http_request_duration_seconds', {
      method: 'POST',
      route: '/svc/api/rest/jobs',
      status: '202',
    });
    expect(submissions).toBeGreaterThanOrEqual(2);

    // The R session pool gauge shows the warm function-call sessions (webR: its one instance),
    // all idle once the jobs are done.
    const [size, busy, idle, waiting] = ['size', 'busy', 'idle', 'waiting'].map((state) =>
      Number(sample(after.families, 'svc_r_sessions', { state })?.value),
    );
    expect(size).toBeGreaterThanOrEqual(1);
    expect({ busy, idle, waiting }).toEqual({ busy: 0, idle: size, waiting: 0 });
  });

  it('metrics: application names the service does not know are counted as other', async () => {
    const counted = async (application: string): Promise<string | undefined> => {
      const families = parseMetrics((await request(`${service.url}/metrics`)).text);
      return sample(families, 'svc_jobs_finished_total', { application, source: 'rest' })?.value;
    };
    const otherBefore = Number((await counted('other')) ?? 0);
    const knownBefore = Number((await counted('metricsapp')) ?? 0);
    const invented = ['invented_a1', 'invented_b2', 'invented_c3'];
    for (const application of [...invented, 'metricsapp']) {
      expect(await runJob(service.url, application, 'writeLines("ok", "ok.txt")\n')).toBe('true');
    }
    await waitFor(
      async () => Number(await counted('metricsapp')) === knownBefore + 1,
      10000,
      'the metricsapp counter',
    );
    expect(Number(await counted('other'))).toBe(otherBefore + 3);
    const text = (await request(`${service.url}/metrics`)).text;
    for (const application of invented) {
      expect(text).not.toContain(application);
    }
  });

  it('metrics: a 405 is counted under the resource it names, an unknown path as unmatched', async () => {
    const count = async (labels: Record<string, string>): Promise<number> =>
      histogramCount(
        (await request(`${service.url}/metrics`)).text,
        'svc_http_request_duration_seconds',
        labels,
      ) ?? 0;
    const refused = { method: 'PUT', route: `${REST}/jobs`, status: '405' };
    const unknown = { method: 'GET', route: 'unmatched', status: '404' };
    const catchAlls = [`${REST}/*path`, '/*path'].map((route) => ({
      method: 'GET',
      route,
      status: '404',
    }));
    const before = { refused: await count(refused), unknown: await count(unknown) };

    expect((await request(`${service.url}${REST}/jobs`, { method: 'PUT' })).status).toBe(405);
    expect((await request(`${service.url}${REST}/no-such-resource`)).status).toBe(404);
    expect((await request(`${service.url}/no-such-page`)).status).toBe(404);

    // The answer is counted when it has been sent: wait until the last one shows.
    await waitFor(
      async () => (await count(unknown)) === before.unknown + 2,
      10000,
      'the unmatched counter',
    );
    expect(await count(refused)).toBe(before.refused + 1);
    for (const catchAll of catchAlls) {
      expect(await count(catchAll)).toBe(0);
    }
  });
});

describe('system endpoints on a node of role api (R for /process only)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ ROLE: 'api' });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('checks the database and the R that serves /process, and names its version', async () => {
    expectText(await request(`${service.url}${SYSTEM}/health/check`), 200, 'OK');
    const info = parseXml((await request(`${service.url}${SYSTEM}/info`)).text).nodeInformation;
    expect(info.healthy).toBe('true');
    expect(info.rVersion).toMatch(/^R version \d/);
    expect(['native', 'webr']).toContain(info.rEngine);
  });

  it('metrics: svc_queue_backlog counts queued plus running jobs of every application', async () => {
    const backlog = async () => {
      const families = parseMetrics((await request(`${service.url}/metrics`)).text);
      expect(families.get('svc_queue_backlog')?.type).toBe('GAUGE');
      return {
        backlog: sample(families, 'svc_queue_backlog')?.value,
        depth: sample(families, 'svc_queue_depth')?.value,
      };
    };
    expect(await backlog()).toEqual({ backlog: '0', depth: '0' });
    // No worker here: the jobs stay queued, except those a (pretended) worker elsewhere claims.
    const queue = service.app.get(QueueRepository);
    for (const [application, count] of [
      ['backlog_a', 3],
      ['backlog_b', 2],
      ['backlog_c', 1],
    ] as const) {
      for (let i = 0; i < count; i++) {
        await queue.enqueue({
          id: randomUUID(),
          applicationName: application,
          kind: JobKind.SCRIPT,
          meta: {},
          source: 'rest',
          submittedAt: new Date(),
          files: [],
        });
      }
    }
    expect(await queue.claim('worker-elsewhere', 2, 60, null)).toHaveLength(2);
    expect(await backlog()).toEqual({ backlog: '6', depth: '4' });
  });
});

describe('metrics of a node of role worker (no API server)', () => {
  let service: TestService;
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    service = await startTestService({
      ROLE: 'worker',
      WORKER_METRICS_PORT: String(port),
      APPLICATION_SETTINGS: JSON.stringify({ workerapp: {} }),
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('serves /metrics on WORKER_METRICS_PORT, with the jobs it ran', async () => {
    const metricsUrl = `http://127.0.0.1:${port}/metrics`;
    expect(sample(parseMetrics((await request(metricsUrl)).text), 'svc_queue_depth')?.value).toBe(
      '0',
    );
    await service.app.get(QueueRepository).enqueue({
      id: randomUUID(),
      applicationName: 'workerapp',
      kind: JobKind.SCRIPT,
      meta: {},
      source: 'rest',
      submittedAt: new Date(),
      files: [{ name: 'job.R', content: Buffer.from('writeLines("ok", "ok.txt")\n') }],
    });
    await waitFor(
      async () => {
        const families = parseMetrics((await request(metricsUrl)).text);
        const labels = { application: 'workerapp', source: 'rest' };
        return sample(families, 'svc_jobs_finished_total', labels)?.value === '1';
      },
      60000,
      'the worker to count the job',
    );
    expect((await request(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    expect((await request(metricsUrl, { method: 'POST' })).status).toBe(405);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// The embedded database runs inside the service's own process, so it cannot be cut off.
describeWithServer('health while the database is unreachable', () => {
  it('answers 500 ERROR (and ready 503), then OK again when the database is back', async () => {
    const database = await createTestDatabase();
    const { proxy, url } = await proxyDatabase(database.url ?? '');
    const service = await startTestService({ DATABASE_URL: url, HEALTH_CHECK_TIMEOUT_MS: '3000' });
    try {
      expectText(await request(`${service.url}${SYSTEM}/health/check`), 200, 'OK');
      await proxy.cut();
      expectText(await request(`${service.url}${SYSTEM}/health/check`), 500, 'ERROR');
      const ready = await request(`${service.url}${SYSTEM}/health/ready`);
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.text)).toEqual({
        status: 'down',
        reason: 'the database does not answer',
      });
      const info = parseXml((await request(`${service.url}${SYSTEM}/info`)).text).nodeInformation;
      expect(info.healthy).toBe('false');
      expect((await request(`${service.url}${SYSTEM}/health/live`)).status).toBe(200);
      await proxy.open();
      await waitFor(
        async () => (await request(`${service.url}${SYSTEM}/health/check`)).status === 200,
        30000,
        'the health check to recover',
      );
    } finally {
      await service.stop();
      await proxy.cut();
      await database.drop();
    }
  });
});
