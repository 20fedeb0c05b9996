/**
 * Progress reported from R while a job runs.
 *
 * @ci-pass embedded
 */
import { CatalogService } from '../../src/catalog/catalog.service';
import { makeZip } from '../support/zip-fixtures';
import { post } from '../support/function-calls';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { follow, SseEvent } from '../support/sse-client';
import { TestService, waitFor } from '../support/test-service';
import { sharedServices } from '../support/shared-services';
import { validateAgainstSchema } from '../support/xml-schema';

const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };

// One service per R_SCRIPT_MODE (on webR, where the mode means nothing, one for the file).
const services = sharedServices();

interface JobStatus {
  state: string;
  progress?: { fraction: number; message: string };
}

describe.each(['fork', 'spawn'])('svc_progress in a script job (R_SCRIPT_MODE=%s)', (mode) => {
  let service: TestService;

  beforeAll(async () => {
    service = await services.start({ R_SCRIPT_MODE: mode });
  });

  async function submit(script: string, app = 'demo'): Promise<Record<string, string>> {
    const zip = await makeZip([{ name: 'job.R', content: script }]);
    const answer = await postZip(service.url, zip, { 'X-SVC-Application-Name': app });
    expect(answer.status).toBe(202);
    return parseXml(answer.text).jobToken;
  }

  async function statusOf(jobId: string): Promise<JobStatus> {
    const answer = await request(`${service.url}${REST}/jobs/demo/${jobId}`, {
      headers: JSON_ACCEPT,
    });
    return (JSON.parse(answer.text) as { jobStatus: JobStatus }).jobStatus;
  }

  it('jobStatus carries the last report, in JSON and in schema-valid XML', async () => {
    const token = await submit(
      'svc_progress(0.1)\nsvc_progress(0.4, "fitting the model")\nwriteLines("x", "x.txt")\n',
    );
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result.success).toBe('true');
    expect(await statusOf(token.jobId)).toMatchObject({
      state: 'DONE',
      progress: { fraction: 0.4, message: 'fitting the model' },
    });
    const xml = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`);
    expect((await validateAgainstSchema(xml.text, 'rest-data.xsd')).errors).toEqual([]);
    expect(xml.text).toContain('<progress fraction="0.4" message="fitting the model"/>');
    // The reports are progress lines of the log, not R output.
    const log = await request(`${service.url}${REST}/jobs/demo/${token.jobId}/log`);
    expect(log.text).toContain('progress {"fraction":0.4,"message":"fitting the model"}');
    expect(log.text).not.toContain('svc-progress');
  });

  it('a job that reports nothing has no progress', async () => {
    const token = await submit('writeLines("x", "x.txt")\n');
    await waitForResult(token.resultUri);
    expect(await statusOf(token.jobId)).not.toHaveProperty('progress');
  });

  it('a bad fraction is an R error of the job, which names svc_progress', async () => {
    const token = await submit('svc_progress(2, "too far")\n');
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result.success).toBe('false');
    const text = (await request(result.dataUri)).text;
    expect(text).toContain('svc_progress: fraction must be one number from 0 to 1');
  });

  it('is seen while the job runs: in jobStatus and as a progress event', async () => {
    const token = await submit('svc_progress(0.25, "a quarter")\nSys.sleep(120)\n');
    const status = await waitFor(
      async () => {
        const now = await statusOf(token.jobId);
        return now.progress !== undefined && now;
      },
      60000,
      'the progress',
    );
    expect(status).toMatchObject({
      state: 'RUNNING',
      progress: { fraction: 0.25, message: 'a quarter' },
    });
    const live = await follow(`${service.url}${REST}/jobs/demo/${token.jobId}/log`);
    let event: SseEvent | null;
    do {
      event = await live.next();
    } while (event && event.event !== 'progress');
    expect(JSON.parse(event!.data)).toMatchObject({ fraction: 0.25, message: 'a quarter' });
    expect(
      (await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, { method: 'DELETE' }))
        .status,
    ).toBe(202);
    expect((await statusOf(token.jobId)).progress).toEqual({
      fraction: 0.25,
      message: 'a quarter',
    });
  });
});

describe('svc_progress in a function-call job', () => {
  let service: TestService;

  beforeAll(async () => {
    // fork is the default on Linux: the service of the first describe.
    service = await services.start({ R_SCRIPT_MODE: 'fork' });
    await service.app
      .get(CatalogService)
      .putFile(
        'progressapp',
        'R_FUNCTIONS',
        'f.R',
        Buffer.from(
          'svcJsonService <- function(json) {\n  svc_progress(0.5, "half way")\n  json\n}\n',
        ),
      );
  });

  it('jobStatus carries what the function reported', async () => {
    const answer = await post(service, 'jobs', 'application/json', '{"x":1}', {
      'X-SVC-Application-Name': 'progressapp',
    });
    expect(answer.status).toBe(202);
    const token = parseXml(answer.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result.success).toBe('true');
    const status = await request(`${service.url}${REST}/jobs/progressapp/${token.jobId}`, {
      headers: JSON_ACCEPT,
    });
    expect(JSON.parse(status.text)).toMatchObject({
      jobStatus: { state: 'DONE', progress: { fraction: 0.5, message: 'half way' } },
    });
  });

  it('/process calls may report progress too (nothing is kept)', async () => {
    const answer = await post(service, 'process', 'application/json', '{"y":2}', {
      'X-SVC-Application-Name': 'progressapp',
    });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('{"y":2}');
  });
});
