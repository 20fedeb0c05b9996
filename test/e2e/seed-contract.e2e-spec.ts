/**
 * Every answer the seed defines, read as the seed's own clients read it: the REST operations 1-5
 * with `Accept` absent, `*\/*`, `application/vnd.svc+xml` or `application/vnd.svc+json` (the
 * `jobToken`, `result` and `results` elements, the 404 of a result not ready, the 204 of a delete,
 * the data at `dataUri`), the job status and the `error` body in the same micro-formats, and the
 * seed's browser client: a `multipart/form-data` post with `Accept: application/xml` or
 * `application/json`, answered with the `jobToken` element in that micro-format (mapped JSON for
 * `application/json`, docs/api.md#submitting-a-job-from-a-form-multipartform-data). REST clients
 * that ask for `application/json` keep the plain JSON.
 */
import { fileField, postForm, textField } from '../support/form-client';
import { Answer, parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';
import { makeZip } from '../support/zip-fixtures';

const APP = 'seedclient';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_MS_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const TOKEN_FIELDS = [
  'jobId',
  'applicationName',
  'submissionTime',
  'applicationResultsUri',
  'resultUri',
];
const RESULT_FIELDS = [
  'jobId',
  'applicationName',
  'resultTime',
  'success',
  'type',
  'selfUri',
  'dataUri',
];
const VND_XML = { Accept: 'application/vnd.svc+xml' };
const VND_JSON = { Accept: 'application/vnd.svc+json' };
const QUICK = [{ name: 'job.R', content: 'writeLines("hi", "out.txt")\n' }];

type Fields = Record<string, unknown>;

/** An XML answer of the seed: its media type, valid against rest-data.xsd, its root element. */
async function xmlElement(answer: Answer, mediaType: string, root: string): Promise<Fields> {
  expect(answer.headers.get('content-type')).toBe(`${mediaType}; charset=utf-8`);
  expect((await validateAgainstSchema(answer.text, 'rest-data.xsd')).errors).toEqual([]);
  const document = parseXml(answer.text);
  expect(Object.keys(document).filter((key) => key !== '?xml')).toEqual([root]);
  return document[root];
}

/** A mapped JSON answer (Jettison): the element's name around its attributes. */
function mappedElement(answer: Answer, mediaType: string, root: string): Fields {
  expect(answer.headers.get('content-type')).toBe(`${mediaType}; charset=utf-8`);
  const document = JSON.parse(answer.text) as Record<string, Fields>;
  expect(Object.keys(document)).toEqual([root]);
  return document[root];
}

function expectToken(token: Fields, base: string, app = APP): void {
  expect(Object.keys(token).filter((key) => key !== 'xmlns')).toEqual(TOKEN_FIELDS);
  expect(token.jobId).toMatch(UUID);
  expect(token.applicationName).toBe(app);
  expect(token.submissionTime).toMatch(ISO_MS_UTC);
  expect(token.applicationResultsUri).toBe(`${base}${REST}/results/${app}`);
  expect(token.resultUri).toBe(`${base}${REST}/results/${app}/${String(token.jobId)}`);
}

function expectResult(result: Fields, token: Fields, success: unknown): void {
  expect(Object.keys(result).filter((key) => key !== 'xmlns')).toEqual(RESULT_FIELDS);
  expect(result).toMatchObject({
    jobId: token.jobId,
    applicationName: token.applicationName,
    success,
    type: 'zip',
  });
  expect(result.resultTime).toMatch(ISO_MS_UTC);
  expect(result.selfUri).toBe(token.resultUri);
  expect(result.dataUri).toBe(
    `${String(token.applicationResultsUri).replace('/results/', '/result/')}/${String(token.jobId)}.zip`,
  );
}

describe('the answers the seed defines, as its clients read them', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.stop();
  });

  describe('REST (operations 1-5)', () => {
    it.each([
      ['no Accept', {}],
      ['Accept */*', { Accept: '*/*' }],
      ['Accept application/vnd.svc+xml', VND_XML],
    ])(
      'with %s: vnd+xml jobToken, 404 without a result, result, data, results, 204',
      async (_what, accept: Record<string, string>) => {
        // Slow enough that the first read comes before the result.
        const slow = await makeZip([
          { name: 'job.R', content: 'Sys.sleep(2); writeLines("hi", "out.txt")\n' },
        ]);
        const posted = await postZip(service.url, slow, {
          'X-SVC-Application-Name': APP,
          ...accept,
        });
        expect(posted.status).toBe(202);
        const token = await xmlElement(posted, 'application/vnd.svc+xml', 'jobToken');
        expectToken(token, service.url);
        expect(posted.headers.get('location')).toBe(token.resultUri);

        const notReady = await request(String(token.resultUri), { headers: accept });
        expect(notReady.status).toBe(404);
        expect(Object.keys(parseXml(notReady.text))).not.toContain('result');

        const ready = await waitForResult(String(token.resultUri), accept);
        const result = await xmlElement(ready, 'application/vnd.svc+xml', 'result');
        expectResult(result, token, 'true');

        const data = await request(String(result.dataUri), { headers: accept });
        expect(data.status).toBe(200);
        expect(data.headers.get('content-type')).toBe('application/zip');
        expect(data.body.subarray(0, 2).toString()).toBe('PK');

        const listing = await request(String(token.applicationResultsUri), { headers: accept });
        expect(listing.status).toBe(200);
        const results = await xmlElement(listing, 'application/vnd.svc+xml', 'results');
        const listed = ([] as Fields[]).concat((results.result as Fields | Fields[]) ?? []);
        expect(listed.map((item) => item.jobId)).toContain(token.jobId);

        const deleted = await request(String(result.selfUri), {
          method: 'DELETE',
          headers: accept,
        });
        expect(deleted.status).toBe(204);
        expect(deleted.text).toBe('');
        expect((await request(String(result.selfUri), { headers: accept })).status).toBe(404);
      },
    );

    it('with Accept application/vnd.svc+json: the same elements in mapped JSON', async () => {
      // An application of its own: its listing holds this one result only.
      const posted = await postZip(service.url, await makeZip(QUICK), {
        'X-SVC-Application-Name': 'seedjson',
        ...VND_JSON,
      });
      expect(posted.status).toBe(202);
      const token = mappedElement(posted, 'application/vnd.svc+json', 'jobToken');
      expectToken(token, service.url, 'seedjson');
      expect(Object.values(token).every((value) => typeof value === 'string')).toBe(true);

      const ready = await waitForResult(String(token.resultUri), VND_JSON);
      const result = mappedElement(ready, 'application/vnd.svc+json', 'result');
      expectResult(result, token, true);

      // One result is an object, not an array (Jettison); none is "".
      const listing = await request(String(token.applicationResultsUri), { headers: VND_JSON });
      const results = mappedElement(listing, 'application/vnd.svc+json', 'results');
      expect(results).toEqual({ result });

      expect(
        (await request(String(result.selfUri), { method: 'DELETE', headers: VND_JSON })).status,
      ).toBe(204);
      const gone = await request(String(result.selfUri), { headers: VND_JSON });
      expect(gone.status).toBe(404);
      expect(Object.keys(JSON.parse(gone.text) as object)).toEqual(['error']);
      expect(
        mappedElement(
          await request(String(token.applicationResultsUri), { headers: VND_JSON }),
          'application/vnd.svc+json',
          'results',
        ),
      ).toBe('');
    });

    it('answers the job status and errors in the micro-format Accept chose', async () => {
      const posted = await postZip(service.url, await makeZip(QUICK), {
        'X-SVC-Application-Name': APP,
        ...VND_JSON,
      });
      const token = mappedElement(posted, 'application/vnd.svc+json', 'jobToken');
      const statusUri = `${service.url}${REST}/jobs/${APP}/${String(token.jobId)}`;
      const mapped = mappedElement(
        await request(statusUri, { headers: VND_JSON }),
        'application/vnd.svc+json',
        'jobStatus',
      );
      expect(mapped).toMatchObject({ jobId: token.jobId, applicationName: APP });
      const xml = await xmlElement(
        await request(statusUri),
        'application/vnd.svc+xml',
        'jobStatus',
      );
      expect(xml).toMatchObject({ jobId: token.jobId, resultUri: token.resultUri });
      await waitForResult(String(token.resultUri));

      const noName = (headers: Record<string, string>): Promise<Answer> =>
        request(`${service.url}${REST}/jobs`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/zip', ...headers },
          body: Buffer.from('PK'),
        });
      const xmlError = await xmlElement(await noName({}), 'application/vnd.svc+xml', 'error');
      expect(xmlError).toMatchObject({ status: '400', error: 'Bad Request' });
      const jsonError = mappedElement(await noName(VND_JSON), 'application/vnd.svc+json', 'error');
      expect(jsonError).toMatchObject({ status: 400, error: 'Bad Request' });
      expect(jsonError.message).toMatch(/X-SVC-Application-Name/);
    });

    it('keeps the plain JSON for a REST client that asks for application/json', async () => {
      const posted = await postZip(service.url, await makeZip(QUICK), {
        'X-SVC-Application-Name': APP,
        Accept: 'application/json',
      });
      expect(posted.status).toBe(202);
      expect(posted.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const token = JSON.parse(posted.text) as Fields;
      expectToken(token, service.url);
      const ready = await waitForResult(String(token.resultUri), { Accept: 'application/json' });
      expect(Object.keys(JSON.parse(ready.text) as object)).toEqual(RESULT_FIELDS);
    });
  });

  describe('the browser client (multipart/form-data, Accept application/xml or application/json)', () => {
    /** What a seed browser's form sends: the X-SVC-* headers as fields, the files as X-SVC-JobFile[]. */
    const seedForm = [
      textField('X-SVC-Application-Name', APP),
      textField('X-SVC-Meta-colour', 'blue'),
      fileField('job.R', 'writeLines("hi", "out.txt")\n', 'text/plain'),
    ];

    it('answers Accept application/xml with the jobToken element in XML', async () => {
      const posted = await postForm(service.url, seedForm, { Accept: 'application/xml' });
      expect(posted.status).toBe(202);
      const token = await xmlElement(posted, 'application/xml', 'jobToken');
      expectToken(token, service.url);
      expect(posted.headers.get('location')).toBe(token.resultUri);
      await waitForResult(String(token.resultUri));
    });

    it('answers Accept application/json with the jobToken element in its JSON form, not the plain shape', async () => {
      const posted = await postForm(service.url, seedForm, { Accept: 'application/json' });
      expect(posted.status).toBe(202);
      const token = mappedElement(posted, 'application/json', 'jobToken');
      expectToken(token, service.url);
      expect(posted.headers.get('location')).toBe(token.resultUri);
      await waitForResult(String(token.resultUri));
    });

    it('answers a refused form in the same micro-formats', async () => {
      const noApp = seedForm.slice(1);
      const json = mappedElement(
        await postForm(service.url, noApp, { Accept: 'application/json' }),
        'application/json',
        'error',
      );
      expect(json).toMatchObject({ status: 400, error: 'Bad Request' });
      const xml = await xmlElement(
        await postForm(service.url, noApp, { Accept: 'application/xml' }),
        'application/xml',
        'error',
      );
      expect(xml).toMatchObject({ status: '400', error: 'Bad Request' });
    });
  });
});
