import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findRscript } from '../../src/r-engine/launch/r-location';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { proxyDatabase } from '../support/cuttable-proxy';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { spawnService } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

async function jobState(
  url: string,
  app: string,
  jobId: string,
): Promise<Record<string, string> | undefined> {
  const answer = await request(`${url}/svc/api/rest/jobs/${app}/${jobId}`);
  return answer.status === 200 ? parseXml(answer.text).jobStatus : undefined;
}

/** Submits a job that runs for 4 s and waits until a worker runs it; returns its token. */
async function startSlowJob(url: string): Promise<Record<string, string>> {
  const zip = await makeZip([
    { name: 'slow.R', content: 'Sys.sleep(4)\nwriteLines("done", "done.txt")\n' },
  ]);
  const token = parseXml((await postZip(url, zip)).text).jobToken;
  await waitFor(
    async () => (await jobState(url, 'demo', token.jobId))?.state === 'RUNNING',
    30000,
    'RUNNING',
  );
  return token;
}

describe('a worker killed during a job (SPEC §5.4)', () => {
  it('re-runs the job after its lease expires and stores exactly one result', async () => {
    const database = await createTestDatabase();
    const env = testEnvironment(database, {
      LEASE_SECONDS: '3',
      HEARTBEAT_SECONDS: '1',
      POLL_INTERVAL_MS: '200',
    });
    const first = await spawnService(env);
    let second: Awaited<ReturnType<typeof spawnService>> | null = null;
    try {
      const token = await startSlowJob(first.url);
      first.child.kill('SIGKILL');
      await first.exited();

      second = await spawnService(env);
      const result = parseXml(
        (await waitForResult(`${second.url}/svc/api/rest/results/demo/${token.jobId}`)).text,
      ).result;
      expect(result.success).toBe('true');
      const status = await jobState(second.url, 'demo', token.jobId);
      expect(status).toMatchObject({ state: 'DONE', attempts: '2' });
      const listed = await request(`${second.url}/svc/api/rest/results/demo`, {
        headers: { Accept: 'application/vnd.svc+json' },
      });
      expect(JSON.parse(listed.text)).toEqual({
        results: { result: expect.objectContaining({ jobId: token.jobId }) },
      });
    } finally {
      first.child.kill('SIGKILL');
      second?.child.kill('SIGTERM');
      await second?.exited();
      await database.drop();
    }
  });
});

describe('an R script that never ends (SPEC §5.1)', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ JOB_TIMEOUT_SECONDS: '2', SCRIPT_SLOTS: '1' });
  });
  afterAll(async () => service.stop());

  it('is killed at the job timeout with an error result, and the slot runs the next job', async () => {
    const endless = parseXml(
      (await postZip(service.url, await makeZip([{ name: 'loop.R', content: 'repeat {}\n' }])))
        .text,
    ).jobToken;
    const next = parseXml(
      (
        await postZip(
          service.url,
          await makeZip([{ name: 'ok.R', content: 'writeLines("ok", "ok.txt")\n' }]),
        )
      ).text,
    ).jobToken;
    const result = parseXml((await waitForResult(endless.resultUri)).text).result;
    expect(result).toMatchObject({ success: 'false', type: 'txt' });
    const text = (await request(result.dataUri)).text;
    expect(text).toContain(endless.jobId);
    expect(text).toMatch(/time limit of 2 s/);
    expect(parseXml((await waitForResult(next.resultUri)).text).result.success).toBe('true');
  });
});

const installedRscript = findRscript({ rHome: null, rscriptPath: null, rMemoryLimitMb: 0 });
const describeWithNativeR = installedRscript ? describe : describe.skip;

// R vanishing after start-up plays an infrastructure failure: the job cannot be delivered to R.
describeWithNativeR('R unavailable when a job runs (SPEC §5.4 retries and dead letters)', () => {
  let service: TestService;
  let rDir: string;
  let rscript: string;
  beforeAll(async () => {
    rDir = mkdtempSync(join(tmpdir(), 'svc-r-link-'));
    rscript = join(rDir, 'Rscript');
    symlinkSync(installedRscript ?? '', rscript);
    service = await startTestService({
      R_ENGINE: 'native',
      // A fresh Rscript per job: removing it below makes R unavailable (a running fork server
      // would go on serving jobs).
      R_SCRIPT_MODE: 'spawn',
      RSCRIPT_PATH: rscript,
      MAX_ATTEMPTS: '3',
      RETRY_BACKOFF_MS: '100',
    });
  });
  afterAll(async () => {
    await service.stop();
    rmSync(rDir, { recursive: true, force: true });
  });

  it('retries with back-off, then stores a dead-letter result; no R error is retried', async () => {
    unlinkSync(rscript);
    const zip = await makeZip([{ name: 'ok.R', content: 'writeLines("ok", "ok.txt")\n' }]);
    const token = parseXml((await postZip(service.url, zip)).text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result).toMatchObject({ success: 'false', type: 'txt' });
    const text = (await request(result.dataUri)).text;
    expect(text).toContain(token.jobId);
    expect(text).toMatch(/could not be delivered to R after 3 attempt\(s\)/);
    expect(await jobState(service.url, 'demo', token.jobId)).toMatchObject({ attempts: '3' });

    symlinkSync(installedRscript ?? '', rscript);
    const failing = await makeZip([{ name: 'fail.R', content: 'stop("not retried")\n' }]);
    const rError = parseXml((await postZip(service.url, failing)).text).jobToken;
    expect(parseXml((await waitForResult(rError.resultUri)).text).result.success).toBe('false');
    expect(await jobState(service.url, 'demo', rError.jobId)).toMatchObject({ attempts: '1' });
  });
});

describeWithNativeR('an R job orphaned by a killed service (SPEC §10 limits)', () => {
  it('is ended by the kernel CPU limit even though the service’s timers died with it', async () => {
    const database = await createTestDatabase();
    const service = await spawnService(
      // Without the sandbox: the test follows R's pid on the host. In the sandbox, R dies with
      // the service at once (bubblewrap's --die-with-parent), before any limit.
      testEnvironment(database, {
        R_ENGINE: 'native',
        JOB_TIMEOUT_SECONDS: '1',
        R_SANDBOX: 'none',
      }),
    );
    try {
      const zip = await makeZip([
        {
          name: 'spin.R',
          content: 'writeLines(as.character(Sys.getpid()), "pid.txt")\nrepeat {}\n',
        },
      ]);
      const token = parseXml((await postZip(service.url, zip)).text).jobToken;
      const pidFile = join(tmpdir(), 'svc-jobs', `${token.jobId}-1`, 'work', 'pid.txt');
      const pid = await waitFor(
        () => Promise.resolve(existsSync(pidFile) && Number(readFileSync(pidFile, 'utf8'))),
        30000,
        'the R process to start',
      );
      service.child.kill('SIGKILL');
      await service.exited();
      const alive = () =>
        existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
      expect(alive()).toBe(true);
      // The CPU limit is the time limit on every core plus 5 s: at most 1 s × cores + 5 s of CPU.
      await waitFor(() => Promise.resolve(!alive()), 60000, 'the orphaned R process to be ended');
    } finally {
      service.child.kill('SIGKILL');
      await database.drop();
    }
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// The embedded database runs inside the service's own process, so it cannot become unreachable.
describeWithServer('the database unreachable during a submission (SPEC §12)', () => {
  it('answers 503 with an error body and no token, then recovers by itself', async () => {
    const database = await createTestDatabase();
    const { proxy, url: viaProxy } = await proxyDatabase(database.url ?? '');
    const service = await startTestService({ DATABASE_URL: viaProxy });
    try {
      const zip = await makeZip([{ name: 'ok.R', content: 'writeLines("ok", "ok.txt")\n' }]);
      expect((await postZip(service.url, zip)).status).toBe(202);

      await proxy.cut();
      const refused = await postZip(service.url, zip);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBeTruthy();
      const error = parseXml(refused.text).error;
      expect(error.status).toBe('503');
      expect(refused.text).not.toContain('jobToken');
      expect((await request(`${service.url}/svc/api/rest/results/demo`)).status).toBe(503);

      await proxy.open();
      const accepted = await waitFor(
        async () => {
          const answer = await postZip(service.url, zip);
          return answer.status === 202 ? answer : undefined;
        },
        30000,
        'submissions to be accepted again',
      );
      const token = parseXml(accepted.text).jobToken;
      expect(parseXml((await waitForResult(token.resultUri)).text).result.success).toBe('true');
      const jobs = await service.app.get(DataSource).query(`SELECT count(*)::int AS n FROM job`);
      expect(jobs).toEqual([{ n: 2 }]);
    } finally {
      await service.stop();
      await proxy.cut();
    }
  });
});

// The lease's guard against a worker that lost the database while its job ran (SPEC §5.4).
describeWithServer('a worker cut off from the database during a job', () => {
  it('loses the job to another worker; its late result is rejected and logged, one result stays', async () => {
    const database = await createTestDatabase();
    const { proxy, url: viaProxy } = await proxyDatabase(database.url ?? '');
    const env = testEnvironment(database, {
      LEASE_SECONDS: '2',
      HEARTBEAT_SECONDS: '1',
      POLL_INTERVAL_MS: '200',
    });
    const api = await spawnService({ ...env, ROLE: 'api' });
    const cutOff = await spawnService({ ...env, ROLE: 'worker', DATABASE_URL: viaProxy });
    let other: Awaited<ReturnType<typeof spawnService>> | null = null;
    try {
      // Cut only once R runs: the worker opens the job's log in the database just before.
      const zip = await makeZip([
        {
          name: 'slow.R',
          content: 'cat("R started\\n")\nSys.sleep(4)\nwriteLines("done", "done.txt")\n',
        },
      ]);
      const token = parseXml((await postZip(api.url, zip)).text).jobToken;
      await waitFor(
        async () =>
          /R started/.test(
            (await request(`${api.url}/svc/api/rest/jobs/demo/${token.jobId}/log`)).text,
          ),
        30000,
        'R to start',
      );
      await proxy.cut();
      other = await spawnService({ ...env, ROLE: 'worker' });
      // The lease expired without heartbeats; the other worker took the job.
      await waitFor(
        async () => {
          const status = await jobState(api.url, 'demo', token.jobId);
          return status?.state === 'RUNNING' && status.attempts === '2';
        },
        30000,
        'the second attempt',
      );
      // R ended on the cut-off worker, which keeps offering its result.
      await waitFor(
        () => Promise.resolve(/could not store the result/.test(cutOff.output())),
        30000,
        'the failed store',
      );
      await proxy.open();
      await waitFor(
        () => Promise.resolve(/late result was rejected/.test(cutOff.output())),
        30000,
        'the rejected late result',
      );
      const result = parseXml(
        (await waitForResult(`${api.url}/svc/api/rest/results/demo/${token.jobId}`)).text,
      ).result;
      expect(result.success).toBe('true');
      expect(await jobState(api.url, 'demo', token.jobId)).toMatchObject({
        state: 'DONE',
        attempts: '2',
      });
      expect(other.output()).toMatch(/attempt 2 started/);
      expect(other.output()).toMatch(/done \(success=true/);
      expect(cutOff.output()).not.toMatch(/done \(success=/);
      const counted = new Client({ connectionString: database.url ?? '' });
      await counted.connect();
      try {
        const { rows } = await counted.query<{ results: number; usage: number }>(
          `SELECT (SELECT count(*)::int FROM result WHERE job_id = $1) AS results,
                  (SELECT count(*)::int FROM job_usage WHERE job_id = $1) AS usage`,
          [token.jobId],
        );
        expect(rows).toEqual([{ results: 1, usage: 1 }]);
      } finally {
        await counted.end();
      }
    } finally {
      const nodes = other ? [api, cutOff, other] : [api, cutOff];
      for (const node of nodes) {
        node.child.kill('SIGTERM');
      }
      await Promise.all(nodes.map((node) => node.exited()));
      await proxy.cut();
      await database.drop();
    }
  });
});
