/**
 * Hostile tests of what a job's log and the service's streams cost: empty lines counted against
 * JOB_LOG_MAX_BYTES (each line its line break and its row), readers that stop reading a live log
 * or a download (bounded memory, cut after STREAM_SLOW_READER_SECONDS), and open streams ended
 * when their caller loses the right that opened them (docs/security.md).
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { DataSource } from 'typeorm';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';

const CAP = 131_072;
/** What docs/api.md says a stored line costs at least: its line break and its row. */
const LOG_LINE_OVERHEAD_BYTES = 64;

describe('a log of empty lines (JOB_LOG_MAX_BYTES=131072)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ JOB_LOG_MAX_BYTES: String(CAP) });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('counts each line with its line break and its row: 300,000 empty lines stay within the cap', async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: 'cat(strrep("\\n", 3e5))\n' }]),
    );
    const token = parseXml(submitted.text).jobToken;
    await waitForResult(token.resultUri, {}, 120000);
    const [stored] = await service.app
      .get(DataSource)
      .query<{ rows: number; bytes: number; cut: number }[]>(
        `SELECT count(*)::int AS rows, COALESCE(sum(octet_length(line)), 0)::int AS bytes,
              count(*) FILTER (WHERE stream = 'svc' AND line LIKE '[output cut%')::int AS cut
         FROM job_log_line WHERE job_id = $1`,
        [token.jobId],
      );
    // Every row costs at least LOG_LINE_OVERHEAD_BYTES, the one cut note aside.
    expect(stored.cut).toBe(1);
    expect(stored.rows).toBeLessThanOrEqual(Math.floor(CAP / LOG_LINE_OVERHEAD_BYTES) + 1);
    expect(stored.rows).toBeGreaterThan(100);
    expect((stored.rows - 1) * LOG_LINE_OVERHEAD_BYTES).toBeLessThanOrEqual(CAP);
  });
});
