/**
 * Retention: old results and jobs removed with their pieces.
 *
 * @ci-pass embedded
 */
import { DataSource } from 'typeorm';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';

/**
 * Result retention per application: RESULT_RETENTION_HOURS is the default, an application's
 * resultRetentionHours replaces it (0 keeps its results until deleted). The supervisor pass
 * (every LEASE_SECONDS / 2) deletes what has expired, with the job's log.
 */
describe('result retention per application', () => {
  let service: TestService;
  let dataSource: DataSource;

  beforeAll(async () => {
    service = await startTestService({
      RESULT_RETENTION_HOURS: '1',
      APPLICATION_SETTINGS: JSON.stringify({
        kept: { resultRetentionHours: 0 },
        weekly: { resultRetentionHours: 168 },
      }),
      LEASE_SECONDS: '2',
      HEARTBEAT_SECONDS: '1',
    });
    dataSource = service.app.get(DataSource);
  });
  afterAll(async () => {
    await service.stop();
  });

  async function runJob(application: string): Promise<{ jobId: string; resultUri: string }> {
    const zip = await makeZip([{ name: 'job.R', content: 'cat("hello\\n")\n' }]);
    const answer = await postZip(service.url, zip, { 'X-SVC-Application-Name': application });
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    await waitForResult(token.resultUri);
    return { jobId: token.jobId, resultUri: token.resultUri };
  }

  /** Moves a job's result back in time, as if it had been stored `hours` ago. */
  async function age(jobId: string, hours: number): Promise<void> {
    await dataSource.query(
      `UPDATE result SET result_time = now() - make_interval(mins => $2) WHERE job_id = $1`,
      [jobId, Math.round(hours * 60)],
    );
  }

  async function logLineCount(jobId: string): Promise<number> {
    const rows = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM job_log_line WHERE job_id = $1',
      [jobId],
    );
    return rows[0].n;
  }

  async function statusOf(resultUri: string): Promise<number> {
    return (await request(resultUri)).status;
  }

  it("deletes each result after its own application's period, with its log", async () => {
    const byDefault = await runJob('demo');
    const kept = await runJob('kept');
    const weekly = await runJob('weekly');
    expect(await logLineCount(byDefault.jobId)).toBeGreaterThan(0);
    for (const job of [byDefault, kept, weekly]) {
      await age(job.jobId, 2);
    }
    // The default (1 hour) has passed for demo: its result goes on the next supervisor pass.
    await waitFor(async () => (await statusOf(byDefault.resultUri)) === 404, 30000, 'expiry');
    // The same pass kept the others: 0 (kept until deleted) and 168 hours.
    expect(await statusOf(kept.resultUri)).toBe(200);
    expect(await statusOf(weekly.resultUri)).toBe(200);
    expect(await logLineCount(byDefault.jobId)).toBe(0);
    const listed = await request(`${service.url}${REST}/results/demo`, {
      headers: { Accept: 'application/vnd.svc+json' },
    });
    expect(listed.text).not.toContain(byDefault.jobId);

    // A year later the weekly result has gone too; the kept one stays.
    await age(weekly.jobId, 24 * 365);
    await age(kept.jobId, 24 * 365);
    await waitFor(async () => (await statusOf(weekly.resultUri)) === 404, 30000, 'expiry');
    expect(await statusOf(kept.resultUri)).toBe(200);
  });
});
