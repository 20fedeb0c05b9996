/**
 * Usage statistics per application: jobs, R time and CPU, per month.
 *
 * @ci-pass embedded
 */
import { ALICE, basicUsersEnvironment, BOB, ROOT } from '../support/admin-auth';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { ServiceProcess, spawnNodes, stopServices } from '../support/service-process';
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

const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
/** Both native modes and the sandbox report R's CPU time; webR does not. */
const CPU_MEASURED = process.env.R_ENGINE !== 'webr';

interface Usage {
  application: string;
  month: string;
  submitted: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  runTimeTotalMs: number;
  runTimeP50Ms?: number;
  runTimeP95Ms?: number;
  waitTimeP50Ms?: number;
  waitTimeP95Ms?: number;
  rCpuTotalMs: number;
  rCpuJobs: number;
  bytesIn: number;
  bytesOut: number;
}

const thisMonth = (): string => new Date().toISOString().slice(0, 7);

/** The statistics as JSON, one usage entry per application and month (Jettison: one is an object). */
async function statistics(base: string, query: string, credentials = ROOT): Promise<Usage[]> {
  const answer = await request(`${base}${REST}/admin/statistics${query}`, {
    headers: { ...credentials, ...JSON_ACCEPT },
  });
  expect([answer.status, answer.text]).toEqual([200, expect.any(String)]);
  const body = JSON.parse(answer.text) as { usageStatistics: { usage?: Usage | Usage[] } };
  const usage = body.usageStatistics.usage;
  return usage === undefined ? [] : Array.isArray(usage) ? usage : [usage];
}

describe('usage statistics (GET /admin/statistics)', () => {
  let service: TestService;
  // Varied numbers: a run of one value would exceed the ZIP compression ratio limit (413).
  const dataCsv = `x\n${Array.from({ length: 2000 }, (_, i) => (i * 7919) % 10007).join('\n')}\n`;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        alpha: {
          adminPrincipals: ['alice'],
          userPrincipals: ['bob'],
          scriptSubmissionAllowed: true,
        },
        beta: { scriptSubmissionAllowed: true },
      })),
      SCRIPT_SLOTS: '2',
    });
  });
  afterAll(async () => {
    await service.stop();
  });

  async function submit(
    app: string,
    script: string,
    data?: string,
  ): Promise<Record<string, string>> {
    const zip = await makeZip([
      { name: 'job.R', content: script },
      ...(data === undefined ? [] : [{ name: 'data.csv', content: data }]),
    ]);
    const answer = await postZip(service.url, zip, { ...ROOT, 'X-SVC-Application-Name': app });
    expect(answer.status).toBe(202);
    return parseXml(answer.text).jobToken;
  }

  async function resultSize(token: Record<string, string>): Promise<number> {
    const result = parseXml((await waitForResult(token.resultUri, ROOT)).text).result;
    const data = await request(result.dataUri, { method: 'HEAD', headers: ROOT });
    return Number(data.headers.get('content-length'));
  }

  it('counts a known mix of jobs per application and month, and keeps the counts after results are deleted', async () => {
    const month = thisMonth();
    const long = await submit('alpha', 'cat("started\\n")\nSys.sleep(120)\n');
    const status = `${service.url}${REST}/jobs/alpha/${long.jobId}`;
    await waitFor(
      async () => (await request(status, { headers: ROOT })).text.includes('state="RUNNING"'),
      90000,
      'the long job to run',
    );
    // A job that has not finished is submitted, with no outcome yet.
    const running = await statistics(service.url, '?application=alpha');
    expect(running).toEqual([expect.objectContaining({ month, submitted: 1, succeeded: 0 })]);

    // Cancelled while it runs (webR runs one job at a time: the others wait for this).
    const cancelled = await request(status, { method: 'DELETE', headers: ROOT });
    expect(cancelled.status).toBe(202);
    const cancelSize = await resultSize(long);
    const tokens = [
      await submit(
        'alpha',
        'x <- read.csv("data.csv")\nwriteLines(as.character(nrow(x)), "n.txt")\n',
        dataCsv,
      ),
      await submit('alpha', 'writeLines("ok", "ok.txt")\n'),
      await submit('alpha', 'stop("no data")\n'),
      await submit('beta', 'writeLines("beta", "b.txt")\n'),
    ];
    const sizes = await Promise.all(tokens.map(resultSize));

    const alpha = await statistics(service.url, `?application=alpha&from=${month}&to=${month}`);
    expect(alpha).toHaveLength(1);
    const usage = alpha[0];
    expect(usage).toMatchObject({
      application: 'alpha',
      month,
      submitted: 4,
      succeeded: 2,
      failed: 1,
      cancelled: 1,
      bytesOut: sizes[0] + sizes[1] + sizes[2] + cancelSize,
      rCpuJobs: CPU_MEASURED ? 3 : 0,
    });
    // The input files: the scripts and the CSV.
    expect(usage.bytesIn).toBeGreaterThan(dataCsv.length);
    expect(usage.bytesIn).toBeLessThan(dataCsv.length + 1000);
    expect(usage.runTimeP50Ms).toEqual(expect.any(Number));
    expect(usage.runTimeP95Ms).toBeGreaterThanOrEqual(usage.runTimeP50Ms as number);
    expect(usage.runTimeTotalMs).toBeGreaterThanOrEqual(usage.runTimeP95Ms as number);
    // Submission to start: the jobs waited some time, p95 at least p50.
    expect(usage.waitTimeP50Ms).toBeGreaterThanOrEqual(0);
    expect(usage.waitTimeP95Ms).toBeGreaterThanOrEqual(usage.waitTimeP50Ms as number);
    if (CPU_MEASURED) {
      expect(usage.rCpuTotalMs).toBeGreaterThan(0);
    }

    // Every application for a global admin; the figures survive deleting every result.
    const all = await statistics(service.url, '');
    expect(all.map((u) => u.application)).toEqual(['alpha', 'beta']);
    expect(all[1]).toMatchObject({ submitted: 1, succeeded: 1, bytesOut: sizes[3] });
    for (const token of [...tokens, long]) {
      expect((await request(token.resultUri, { method: 'DELETE', headers: ROOT })).status).toBe(
        204,
      );
    }
    expect(await statistics(service.url, '')).toEqual(all);
  });

  it('answers XML valid against rest-data.xsd and CSV for spreadsheets', async () => {
    const xml = await request(`${service.url}${REST}/admin/statistics`, { headers: ROOT });
    expect(xml.status).toBe(200);
    expect(xml.headers.get('content-type')).toBe('application/vnd.svc+xml; charset=utf-8');
    expect(await validateAgainstSchema(xml.text, 'rest-data.xsd')).toEqual({
      valid: true,
      errors: [],
    });
    expect(xml.text).toContain('<usage application="alpha"');

    for (const [query, headers] of [
      ['?format=csv', {}],
      ['', { Accept: 'text/csv' }],
    ] as Array<[string, Record<string, string>]>) {
      const csv = await request(`${service.url}${REST}/admin/statistics${query}`, {
        headers: { ...ROOT, ...headers },
      });
      expect(csv.status).toBe(200);
      expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      expect(csv.headers.get('content-disposition')).toMatch(
        /^attachment; filename="usage-\d{4}-\d{2}-\d{4}-\d{2}\.csv"$/,
      );
      const lines = csv.text.trimEnd().split('\r\n');
      expect(lines[0]).toBe(
        'application,month,submitted,succeeded,failed,cancelled,runTimeTotalMs,runTimeP50Ms,runTimeP95Ms,waitTimeP50Ms,waitTimeP95Ms,rCpuTotalMs,rCpuJobs,bytesIn,bytesOut',
      );
      expect(lines[1]).toMatch(
        new RegExp(`^alpha,${thisMonth()},4,2,1,1,\\d+,\\d+,\\d+,\\d+,\\d+,\\d+,\\d,\\d+,\\d+$`),
      );
      expect(lines[2]).toMatch(new RegExp(`^beta,${thisMonth()},1,1,0,0,`));
    }
    // An empty period is an empty list.
    expect(await statistics(service.url, '?from=2001-01&to=2001-12')).toEqual([]);
  });

  it('lets an application admin see only their application, and nobody else', async () => {
    expect(await statistics(service.url, '?application=alpha', ALICE)).toHaveLength(1);
    for (const [query, who, status] of [
      ['?application=beta', ALICE, 403],
      ['', ALICE, 403],
      ['?application=alpha', BOB, 403],
      ['?application=alpha', {}, 401],
      ['', {}, 401],
    ] as Array<[string, Record<string, string>, number]>) {
      const answer = await request(`${service.url}${REST}/admin/statistics${query}`, {
        headers: { ...who, ...JSON_ACCEPT },
      });
      expect([query, answer.status]).toEqual([query, status]);
      if (status === 403) {
        expect(JSON.parse(answer.text)).toMatchObject({ error: { status: 403 } });
      }
    }
  });

  it('answers bad parameters with 400, an unknown type with 406 and other methods with 405', async () => {
    for (const [query, message] of [
      ['?from=2026-13', /from must be a month, YYYY-MM/],
      ['?to=26-01', /to must be a month/],
      ['?from=2026-05&to=2026-04', /from \(2026-05\) is after to \(2026-04\)/],
      ['?from=2001-01&to=2026-01', /at most 120 months/],
      ['?format=pdf', /format must be xml, json or csv/],
      ['?application=no%20such!', /application parameter "no such!" is invalid/],
    ] as Array<[string, RegExp]>) {
      const answer = await request(`${service.url}${REST}/admin/statistics${query}`, {
        headers: { ...ROOT, ...JSON_ACCEPT },
      });
      expect([query, answer.status]).toEqual([query, 400]);
      expect(JSON.parse(answer.text).error.message).toMatch(message);
    }
    const png = await request(`${service.url}${REST}/admin/statistics`, {
      headers: { ...ROOT, Accept: 'image/png' },
    });
    expect(png.status).toBe(406);
    const post = await request(`${service.url}${REST}/admin/statistics`, {
      method: 'POST',
      headers: ROOT,
    });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Several nodes need a shared database server; the embedded database belongs to one process.
describeWithServer('usage statistics across two nodes', () => {
  let database: TestDatabase;
  let nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    const env = testEnvironment(database, { ADMIN_USER: 'root', ADMIN_PASSWORD: 'root-secret-1' });
    nodes = await spawnNodes(env, 2);
  });
  afterAll(async () => {
    await stopServices(nodes);
    await database.drop();
  });

  it('counts the jobs every node ran, and both nodes answer the same', async () => {
    const zip = await makeZip([{ name: 'job.R', content: 'writeLines("ok", "ok.txt")\n' }]);
    const tokens = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const answer = await postZip(nodes[i % 2].url, zip, { 'X-SVC-Application-Name': 'demo' });
        expect(answer.status).toBe(202);
        return parseXml(answer.text).jobToken;
      }),
    );
    for (const token of tokens) {
      await waitForResult(token.resultUri);
    }
    const [first, second] = await Promise.all(nodes.map((node) => statistics(node.url, '')));
    expect(first).toEqual([
      expect.objectContaining({ application: 'demo', submitted: 6, succeeded: 6 }),
    ]);
    expect(second).toEqual(first);
  });
});
