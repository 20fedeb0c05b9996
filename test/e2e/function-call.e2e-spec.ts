/**
 * Function-call jobs: an XML or JSON argument for a catalog function, queued.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { makeZip } from '../support/zip-fixtures';
import { loadTestCatalog, post } from '../support/function-calls';
import { startTestService, TestService } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';

const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
// webR runs scripts and calls in turn on its one instance: only native R has separate slots.
const itNative = process.env.R_ENGINE === 'webr' ? it.skip : it;

interface ResultView {
  success: boolean;
  type: string;
  dataUri: string;
  jobId: string;
}

describe('function-call jobs over REST (SPEC §5.2)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ FUNCTION_TIMEOUT_SECONDS: '3' });
    await loadTestCatalog(service);
  });
  afterAll(async () => {
    await service.stop();
  });

  /** Submits a function-call job, waits for its result and fetches the data. */
  async function runJob(
    contentType: string,
    body: string,
    application = 'demo',
  ): Promise<{ jobId: string; submissionTime: string; result: ResultView; data: Answer }> {
    const submitted = await post(service, 'jobs', contentType, body, {
      'X-SVC-Application-Name': application,
      ...JSON_ACCEPT,
    });
    expect(submitted.status).toBe(202);
    const token = (JSON.parse(submitted.text) as { jobToken: Record<string, string> }).jobToken;
    const ready = await waitForResult(token.resultUri, JSON_ACCEPT);
    const result = (JSON.parse(ready.text) as { result: ResultView }).result;
    expect(result.jobId).toBe(token.jobId);
    const data = await request(result.dataUri);
    expect(data.status).toBe(200);
    expect(result.dataUri.endsWith(`${token.jobId}.${result.type}`)).toBe(true);
    return { jobId: token.jobId, submissionTime: token.submissionTime, result, data };
  }
  type Answer = Awaited<ReturnType<typeof request>>;

  itNative(
    'has slots of its own: a function-call job runs while long scripts take every script slot',
    async () => {
      const sleeper = await makeZip([{ name: 'sleep.R', content: 'Sys.sleep(20)\n' }]);
      // SCRIPT_SLOTS is 2 here: two sleeping scripts take both.
      const scripts = await Promise.all(
        [1, 2].map(async () => {
          const answer = await postZip(service.url, sleeper, JSON_ACCEPT);
          expect(answer.status).toBe(202);
          return (JSON.parse(answer.text) as { jobToken: { jobId: string } }).jobToken.jobId;
        }),
      );
      const stateOf = async (jobId: string): Promise<string> =>
        (
          JSON.parse(
            (await request(`${service.url}${REST}/jobs/demo/${jobId}`, { headers: JSON_ACCEPT }))
              .text,
          ) as { jobStatus: { state: string } }
        ).jobStatus.state;
      for (const jobId of scripts) {
        while ((await stateOf(jobId)) !== 'RUNNING') {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      const { result } = await runJob('application/json', '{"RFunction":"combn","n":4,"k":2}');
      expect(result).toMatchObject({ success: true, type: 'json' });
      expect(await Promise.all(scripts.map(stateOf))).toEqual(['RUNNING', 'RUNNING']);
      for (const jobId of scripts) {
        await request(`${service.url}${REST}/jobs/demo/${jobId}`, { method: 'DELETE' });
      }
    },
  );

  it('runs a JSON job: the string svcJsonService returns is the result (type json)', async () => {
    const { result, data } = await runJob('application/json', '{"RFunction":"combn","n":5,"k":2}');
    expect(result).toMatchObject({ success: true, type: 'json' });
    expect(data.headers.get('content-type')).toMatch(/^application\/json/);
    const answer = JSON.parse(data.text) as { combinations: number[][] };
    expect(answer.combinations).toHaveLength(10);
    expect(answer.combinations[0]).toEqual([1, 2]);
    expect(answer.combinations[9]).toEqual([4, 5]);
  });

  it('runs an XML job (with a charset parameter): svcXmlService answers, type xml', async () => {
    const { result, data } = await runJob(
      'application/xml; charset=utf-8',
      '<call RFunction="hello" name="Zoë"/>',
    );
    expect(result).toMatchObject({ success: true, type: 'xml' });
    expect(data.headers.get('content-type')).toMatch(/^application\/xml/);
    expect(parseXml(data.text).helloResult.greeting).toBe('Hello, Zoë!');
  });

  it('an R error in an XML job: success=false with a valid errorResult naming the job', async () => {
    const { jobId, submissionTime, result, data } = await runJob(
      'application/xml',
      '<call RFunction="fail"/>',
    );
    expect(result).toMatchObject({ success: false, type: 'xml' });
    const validation = await validateAgainstSchema(data.text, 'rest-data.xsd');
    expect(validation.errors).toEqual([]);
    const error = parseXml(data.text).errorResult;
    expect(error.jobId).toBe(jobId);
    expect(error.applicationName).toBe('demo');
    expect(error.submissionTime).toBe(submissionTime);
    expect(error.errorMessage).toBe('this function always fails');
  });

  const failures: Array<[string, string, string, RegExp]> = [
    ['an R error', 'calls', 'error', /^the analysis failed: bad input$/],
    ['a result that is not a string', 'calls', 'number', /returned an object of class numeric/],
    ['a result of two strings', 'calls', 'two', /character vector of length 2/],
    ['a timeout', 'calls', 'sleep', /time limit of 3 s/],
    ['R quitting inside the function', 'calls', 'quit', /ended|exit/],
  ];
  it.each(failures)(
    'a JSON job with %s: success=false and the flat JSON error naming the job',
    async (_title, application, payload, message) => {
      const { jobId, submissionTime, result, data } = await runJob(
        'application/json',
        payload,
        application,
      );
      expect(result).toMatchObject({ success: false, type: 'json' });
      const error = JSON.parse(data.text) as Record<string, string>;
      expect(Object.keys(error).sort()).toEqual(
        ['applicationName', 'errorMessage', 'jobId', 'submissionTime'].sort(),
      );
      expect(error).toMatchObject({ jobId, applicationName: application, submissionTime });
      expect(error.errorMessage).toMatch(message);
    },
  );

  it('a missing function fails the job: "application X defines no svcXmlService function"', async () => {
    const { result, data } = await runJob('application/xml', '<call/>', 'calls');
    expect(result).toMatchObject({ success: false, type: 'xml' });
    expect(parseXml(data.text).errorResult.errorMessage).toBe(
      'application calls defines no svcXmlService function',
    );
  });

  it('an application without R_FUNCTIONS fails the job the same way', async () => {
    const { data } = await runJob('application/json', '{}', 'nofunctions');
    expect((JSON.parse(data.text) as Record<string, string>).errorMessage).toBe(
      'application nofunctions defines no svcJsonService function',
    );
  });

  it('the engine survives every failure: a call after them succeeds', async () => {
    const { result, data } = await runJob('application/json', 'after', 'calls');
    expect(result.success).toBe(true);
    expect(data.text).toBe('echo:after');
  });

  it('shows the job state DONE', async () => {
    const submitted = await post(service, 'jobs', 'application/json', 'state', {
      'X-SVC-Application-Name': 'calls',
      ...JSON_ACCEPT,
    });
    const token = (JSON.parse(submitted.text) as { jobToken: Record<string, string> }).jobToken;
    await waitForResult(token.resultUri);
    const status = await request(`${service.url}${REST}/jobs/calls/${token.jobId}`, {
      headers: JSON_ACCEPT,
    });
    expect((JSON.parse(status.text) as { jobStatus: { state: string } }).jobStatus.state).toBe(
      'DONE',
    );
  });
});
