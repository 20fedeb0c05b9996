import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { Answer, postZip, REST, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/**
 * `Accept: application/json` gives plain JSON on every REST answer (docs/api.md#representations):
 * no element name around the body, typed values, and every list an array whatever its length;
 * `application/vnd.svc+json` keeps the mapped shape RSB's clients read.
 */
const PLAIN = { Accept: 'application/json' };
const MAPPED = { Accept: 'application/vnd.svc+json' };
const ADMIN = { Authorization: ADMIN_AUTHORIZATION };
const APP = 'plainjson';

function json(answer: Answer, status = 200): Record<string, unknown> {
  expect([answer.status, answer.headers.get('content-type')]).toEqual([
    status,
    'application/json; charset=utf-8',
  ]);
  return JSON.parse(answer.text) as Record<string, unknown>;
}

describe('plain JSON for Accept: application/json', () => {
  let service: TestService;
  let zip: Buffer;

  /** A job of APP that has finished; its plain token. */
  async function finishedJob(): Promise<Record<string, string>> {
    const token = json(
      await postZip(service.url, zip, { ...PLAIN, 'X-SVC-Application-Name': APP }),
      202,
    ) as Record<string, string>;
    await waitForResult(token.resultUri, PLAIN);
    return token;
  }

  beforeAll(async () => {
    service = await startTestService(ADMIN_ENV);
    zip = await makeZip([{ name: 'job.R', content: 'writeLines("done", "out.txt")\n' }]);
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('answers a job token, status and result as one object of typed values', async () => {
    const token = await finishedJob();
    expect(Object.keys(token)).toEqual([
      'jobId',
      'applicationName',
      'submissionTime',
      'applicationResultsUri',
      'resultUri',
    ]);
    expect(token.applicationName).toBe(APP);

    const status = json(
      await request(`${service.url}${REST}/jobs/${APP}/${token.jobId}`, { headers: PLAIN }),
    );
    expect(status).toMatchObject({ jobId: token.jobId, state: 'DONE', attempts: 1 });
    expect(typeof status.finishTime).toBe('string');

    const result = json(await request(token.resultUri, { headers: PLAIN }));
    expect(result).toMatchObject({ jobId: token.jobId, success: true, type: 'zip' });

    // The mapped shape is unchanged for RSB's clients.
    const mapped = await request(token.resultUri, { headers: MAPPED });
    expect(mapped.headers.get('content-type')).toBe('application/vnd.svc+json; charset=utf-8');
    expect(JSON.parse(mapped.text)).toEqual({ result });
  });

  it("answers an application's results as an array, of none, one and several", async () => {
    const list = async (headers: Record<string, string>): Promise<Answer> =>
      request(`${service.url}${REST}/results/emptyplain`, { headers });
    expect(json(await list(PLAIN))).toEqual({ results: [] });
    expect(JSON.parse((await list(MAPPED)).text)).toEqual({ results: '' });

    const only = `${service.url}${REST}/results/${APP}?limit=1`;
    const one = json(await request(only, { headers: PLAIN })) as { results: unknown[] };
    expect(one.results).toHaveLength(1);
    const mappedOne = JSON.parse((await request(only, { headers: MAPPED })).text) as {
      results: { result: unknown };
    };
    // Mapped JSON makes a single item an object; plain JSON keeps it in an array.
    expect(mappedOne.results.result).toEqual(one.results[0]);

    await finishedJob();
    const all = json(await request(`${service.url}${REST}/results/${APP}`, { headers: PLAIN })) as {
      results: Array<{ jobId: string; success: boolean }>;
    };
    expect(all.results.length).toBeGreaterThanOrEqual(2);
    expect(all.results.every((r) => r.success === true)).toBe(true);
  });

  it('answers the catalog, packages, statistics and node information with their lists as arrays', async () => {
    const catalog = json(
      await request(`${service.url}${REST}/admin/catalog`, {
        headers: { ...ADMIN, ...PLAIN, 'X-SVC-Application-Name': APP },
      }),
    ) as { directories: Array<{ type: string; files: unknown[] }> };
    expect(catalog.directories.map((d) => d.type)).toEqual([
      'R_SCRIPTS',
      'SWEAVE_FILES',
      'JOB_CONFIGURATIONS',
      'R_FUNCTIONS',
      'EMAIL_REPLIES',
    ]);
    expect(catalog.directories.every((d) => Array.isArray(d.files))).toBe(true);

    const packages = json(
      await request(`${service.url}${REST}/admin/packages`, {
        headers: { ...ADMIN, ...PLAIN, 'X-SVC-Application-Name': APP },
      }),
    );
    expect(packages).toEqual({ packages: [] });

    const statistics = json(
      await request(`${service.url}${REST}/admin/statistics?application=${APP}`, {
        headers: { ...ADMIN, ...PLAIN },
      }),
    ) as { from: string; to: string; months: Array<{ application: string; submitted: number }> };
    expect(statistics.months).toEqual([
      expect.objectContaining({ application: APP, submitted: expect.any(Number) as number }),
    ]);
    // ?format=json is the plain JSON too (tools that cannot set Accept).
    const byQuery = await request(
      `${service.url}${REST}/admin/statistics?application=${APP}&format=json`,
      { headers: ADMIN },
    );
    expect(json(byQuery)).toEqual(statistics);

    const info = json(await request(`${service.url}${REST}/system/info`, { headers: PLAIN }));
    expect(info).toMatchObject({ healthy: true, uptime: expect.any(Number) as number });
  });

  it('answers errors as {status, error, message}', async () => {
    const missing = await request(
      `${service.url}${REST}/jobs/${APP}/00000000-0000-4000-8000-000000000000`,
      { headers: PLAIN },
    );
    expect(json(missing, 404)).toEqual({
      status: 404,
      error: 'Not Found',
      message: expect.any(String) as string,
    });
    const noApp = await postZip(service.url, zip, { ...PLAIN, 'X-SVC-Application-Name': '' });
    expect(json(noApp, 400)).toMatchObject({ status: 400, error: 'Bad Request' });
    const mapped = await postZip(service.url, zip, { ...MAPPED, 'X-SVC-Application-Name': '' });
    expect(JSON.parse(mapped.text)).toMatchObject({ error: { status: 400 } });
  });
});
