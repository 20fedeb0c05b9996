/**
 * Every bad input of the REST API (SPEC §3, §4, §5.1, §12): the right status, the `error` body in
 * the negotiated format (valid against rest-data.xsd when XML), no stack trace, and nothing stored.
 * Requests go through node:http rather than fetch, which merges repeated headers and would not let
 * a test send a header twice, nor read a 413 the server answers before the body is sent.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  request as httpRequest,
  STATUS_CODES,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from 'node:http';
import { DataSource } from 'typeorm';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';
import { makeZip, makeZipBomb, makeZipWithRawName } from '../support/zip-fixtures';

type Format = 'xml' | 'json';

const FORMATS: Format[] = ['xml', 'json'];
const VND_JSON = 'application/vnd.svc+json';
const MEDIA_TYPE: Record<Format, RegExp> = {
  xml: /^application\/vnd\.svc\+xml\b/,
  json: /^application\/vnd\.svc\+json\b/,
};
/** A stack frame line (`    at fn (file.js:1:2)`, raw or JSON-escaped), a source position, a module path. */
const STACK_TRACE = /(^|\\n)\s*at \S|\.[cm]?[jt]s:\d+:\d+|node_modules/m;

const APP_HEADER = 'X-SVC-Application-Name';
const CONTENT_TYPE = 'Content-Type';
/** Rejected submissions are sent as this application, whose result list must stay empty. */
const APP = 'demo';
const BASE_HEADERS: OutgoingHttpHeaders = { [CONTENT_TYPE]: 'application/zip', [APP_HEADER]: APP };

interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

interface Call {
  method: string;
  /** Path below /svc/api/rest. */
  path: string;
  headers?: OutgoingHttpHeaders;
  body?: Buffer;
  /** Send the body chunked, without Content-Length. */
  chunked?: boolean;
}

/**
 * One request with node:http. The answer is read even when the server closes the connection
 * before it has read the body (a 413): a socket error after the response has arrived is ignored.
 */
function send(base: string, call: Call): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest(
      new URL(`${base}${REST}${call.path}`),
      { method: call.method, headers: call.headers, agent: false },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', (error) => {
      if (!answered) {
        reject(error);
      }
    });
    if (call.body !== undefined && call.chunked === true) {
      req.write(call.body);
      req.end();
    } else {
      // end(body) before any write sends Content-Length.
      req.end(call.body);
    }
  });
}

type CallFactory = () => Call | Promise<Call>;

/** A request with no body; `path` may be computed when the test runs (a job id known only then). */
function call(method: string, path: string | (() => string)): CallFactory {
  return () => ({ method, path: typeof path === 'string' ? path : path() });
}

async function validZip(): Promise<Buffer> {
  return makeZip([
    { name: 'job.R', content: 'x <- read.csv("data.csv")\n' },
    { name: 'data.csv', content: 'x\n1\n' },
  ]);
}

interface SubmissionOptions {
  /** Added to (or replacing) the base headers: application/zip as application `demo`. */
  headers?: OutgoingHttpHeaders;
  /** Base headers to leave out. */
  without?: string[];
  /** The body; a valid two-file job ZIP when absent. */
  body?: Buffer | (() => Promise<Buffer>);
  chunked?: boolean;
}

/** POST /jobs, by default a valid job: each case spoils one thing. */
function submission(options: SubmissionOptions = {}): CallFactory {
  return async () => {
    const headers: OutgoingHttpHeaders = { ...BASE_HEADERS, ...options.headers };
    for (const name of options.without ?? []) {
      delete headers[name];
    }
    const body =
      options.body === undefined
        ? await validZip()
        : typeof options.body === 'function'
          ? await options.body()
          : options.body;
    return { method: 'POST', path: '/jobs', headers, body, chunked: options.chunked };
  };
}

interface Rejection {
  title: string;
  status: number;
  request: CallFactory;
  /** What the error message must say, so that the request fails for the reason under test. */
  message?: RegExp;
  /** The Allow header a 405 must carry. */
  allow?: string;
  /** Sent as Accept, and the format the error must come in; else the case runs in both formats. */
  accept?: { header: string; answersIn: Format };
}

/** The error body of SPEC §4 in `format`, with no stack trace; returns its message. */
async function expectErrorBody(
  answer: HttpAnswer,
  status: number,
  format: Format,
): Promise<string> {
  // Status and body together, so a failure shows what the service said.
  expect({ status: answer.status, body: answer.text }).toEqual({
    status,
    body: expect.any(String),
  });
  expect(answer.headers['content-type']).toMatch(MEDIA_TYPE[format]);
  expect(answer.text).not.toMatch(STACK_TRACE);
  const reason = STATUS_CODES[status];
  if (format === 'xml') {
    expect((await validateAgainstSchema(answer.text, 'rest-data.xsd')).errors).toEqual([]);
    const { error } = parseXml(answer.text);
    expect(error).toMatchObject({ status: String(status), error: reason });
    expect(typeof error.message).toBe('string');
    return error.message;
  }
  const body = JSON.parse(answer.text) as { error: { message: string } };
  expect(body).toEqual({ error: { status, error: reason, message: expect.any(String) } });
  return body.error.message;
}

async function jobCount(service: TestService): Promise<number> {
  const dataSource = service.app.get(DataSource);
  const rows = await dataSource.query<Array<{ n: number }>>('SELECT count(*)::int AS n FROM job');
  return rows[0].n;
}

async function listedResults(service: TestService, applicationName: string): Promise<unknown> {
  const answer = await request(`${service.url}${REST}/results/${applicationName}`, {
    headers: { Accept: VND_JSON },
  });
  expect(answer.status).toBe(200);
  return (JSON.parse(answer.text) as { results: unknown }).results;
}

/** Sends the request and checks the rejection: status, error body, no token, no stored job. */
async function expectRejected(
  service: TestService,
  rejection: Rejection,
  format: Format,
  accept?: string,
): Promise<void> {
  const before = await jobCount(service);
  const sent = await rejection.request();
  const headers = accept === undefined ? sent.headers : { ...sent.headers, Accept: accept };
  const answer = await send(service.url, { ...sent, headers });
  const message = await expectErrorBody(answer, rejection.status, format);
  if (rejection.message) {
    expect(message).toMatch(rejection.message);
  }
  if (rejection.allow !== undefined) {
    expect(answer.headers.allow).toBe(rejection.allow);
  }
  expect(answer.headers.location).toBeUndefined();
  expect(answer.text).not.toContain('jobToken');
  expect(await jobCount(service)).toBe(before);
  expect(await listedResults(service, APP)).toBe('');
}

/** One test per case, in XML (no Accept) and in JSON (Accept vnd+json) unless the case fixes Accept. */
function itRejects(getService: () => TestService, rejections: Rejection[]): void {
  for (const rejection of rejections) {
    const runs = rejection.accept
      ? [{ format: rejection.accept.answersIn, accept: rejection.accept.header }]
      : FORMATS.map((format) => ({ format, accept: format === 'json' ? VND_JSON : undefined }));
    for (const { format, accept } of runs) {
      it(`${rejection.title} → ${rejection.status} (${format})`, async () => {
        await expectRejected(getService(), rejection, format, accept);
      });
    }
  }
}

/** A service for the enclosing describe block, started once. */
function useService(overrides: Record<string, string> = {}): () => TestService {
  let service: TestService | undefined;
  beforeAll(async () => {
    service = await startTestService(overrides);
  });
  afterAll(async () => {
    await service?.stop();
  });
  return () => {
    if (service === undefined) {
      throw new Error('the test service did not start');
    }
    return service;
  };
}

/** Submits a valid job; expects 202 and one more stored job. Returns the token. */
async function expectAccepted(
  service: TestService,
  submit: CallFactory,
): Promise<Record<string, string>> {
  const before = await jobCount(service);
  const answer = await send(service.url, await submit());
  expect({ status: answer.status, body: answer.text }).toEqual({
    status: 202,
    body: expect.any(String),
  });
  expect(await jobCount(service)).toBe(before + 1);
  return parseXml(answer.text).jobToken;
}

const UNKNOWN_JOB = randomUUID();

describe('bad input to the REST API (SPEC §3, §4, §5.1, §12)', () => {
  const service = useService();

  describe('X-SVC-Application-Name', () => {
    itRejects(service, [
      {
        title: 'missing',
        status: 400,
        request: submission({ without: [APP_HEADER] }),
        message: /missing/,
      },
      {
        title: 'empty',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: '' } }),
        message: /missing or empty/,
      },
      {
        title: '"bad-name"',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: 'bad-name' } }),
        message: /invalid/,
      },
      {
        title: '"a b"',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: 'a b' } }),
        message: /invalid/,
      },
      // node:http sends header strings as Latin-1: first the byte E4, then the UTF-8 bytes of ä.
      {
        title: '"ä" (Latin-1)',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: 'ä' } }),
        message: /invalid/,
      },
      {
        title: '"ä" (UTF-8)',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: Buffer.from('ä').toString('latin1') } }),
        message: /invalid/,
      },
      {
        title: 'given twice with the same value',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: [APP, APP] } }),
        message: /2 times/,
      },
      {
        title: 'given twice with different values',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: [APP, 'other'] } }),
        message: /2 times/,
      },
      {
        title: '65 characters',
        status: 400,
        request: submission({ headers: { [APP_HEADER]: 'a'.repeat(65) } }),
        message: /longer than 64/,
      },
    ]);

    it('64 characters → 202', async () => {
      const name = 'a'.repeat(64);
      const token = await expectAccepted(
        service(),
        submission({ headers: { [APP_HEADER]: name } }),
      );
      expect(token.applicationName).toBe(name);
    });
  });

  describe('Content-Type', () => {
    itRejects(service, [
      {
        title: 'missing',
        status: 415,
        request: submission({ without: [CONTENT_TYPE] }),
        message: /missing/,
      },
      {
        title: 'text/plain',
        status: 415,
        request: submission({ headers: { [CONTENT_TYPE]: 'text/plain' } }),
      },
      {
        title: 'application/octet-stream',
        status: 415,
        request: submission({ headers: { [CONTENT_TYPE]: 'application/octet-stream' } }),
      },
      {
        title: 'application/xml with an empty body (a function call needs a payload)',
        status: 400,
        request: submission({
          headers: { [CONTENT_TYPE]: 'application/xml' },
          body: Buffer.alloc(0),
        }),
        message: /empty/,
      },
      {
        title: 'application/json that is not UTF-8',
        status: 400,
        request: submission({
          headers: { [CONTENT_TYPE]: 'application/json' },
          body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
        }),
        message: /UTF-8/,
      },
    ]);

    it('application/zip; charset=utf-8 → 202', async () => {
      await expectAccepted(
        service(),
        submission({
          headers: { [CONTENT_TYPE]: 'application/zip; charset=utf-8', [APP_HEADER]: 'charset_ok' },
        }),
      );
    });
  });

  describe('Accept', () => {
    itRejects(service, [
      {
        title: 'text/html on a valid submission',
        status: 406,
        request: submission(),
        accept: { header: 'text/html', answersIn: 'xml' },
      },
      {
        title: 'text/html on a result list',
        status: 406,
        request: call('GET', `/results/${APP}`),
        accept: { header: 'text/html', answersIn: 'xml' },
      },
      {
        title: 'json;q=0.5, xml;q=0.9 on a bad submission',
        status: 400,
        request: submission({ without: [APP_HEADER] }),
        accept: {
          header: 'application/vnd.svc+json;q=0.5, application/vnd.svc+xml;q=0.9',
          answersIn: 'xml',
        },
      },
      {
        title: 'xml;q=0.5, json;q=0.9 on a bad submission',
        status: 400,
        request: submission({ without: [APP_HEADER] }),
        accept: {
          header: 'application/vnd.svc+xml;q=0.5, application/vnd.svc+json;q=0.9',
          answersIn: 'json',
        },
      },
    ]);

    it('json;q=0.5, xml;q=0.9 on a result list → 200 in XML', async () => {
      const answer = await send(service().url, {
        method: 'GET',
        path: `/results/${APP}`,
        headers: { Accept: 'application/vnd.svc+json;q=0.5, application/vnd.svc+xml;q=0.9' },
      });
      expect(answer.status).toBe(200);
      expect(answer.headers['content-type']).toMatch(MEDIA_TYPE.xml);
      expect((await validateAgainstSchema(answer.text, 'rest-data.xsd')).errors).toEqual([]);
    });
  });

  describe('ZIP body', () => {
    itRejects(service, [
      {
        title: 'an entry in a sub-directory',
        status: 400,
        request: submission({
          body: () =>
            makeZip([
              { name: 'job.R', content: 'x <- 1\n' },
              { name: 'sub/data.csv', content: 'x\n1\n' },
            ]),
        }),
        message: /nested directories/,
      },
      {
        title: 'a directory entry',
        status: 400,
        request: submission({ body: () => makeZip([{ name: 'sub/', content: '' }]) }),
        message: /nested directories/,
      },
      {
        title: 'an entry named ../x.R',
        status: 400,
        request: submission({ body: () => makeZipWithRawName('../x.R', 'x <- 1\n') }),
        message: /"\.\."/,
      },
      {
        title: 'an entry named /x.R',
        status: 400,
        request: submission({ body: () => makeZipWithRawName('/x.R', 'x <- 1\n') }),
        message: /absolute path/,
      },
      {
        title: 'an entry named a\\x.R',
        status: 400,
        request: submission({ body: () => makeZipWithRawName('a\\x.R', 'x <- 1\n') }),
        message: /backslash/,
      },
      {
        title: 'two .R files',
        status: 400,
        request: submission({
          body: () =>
            makeZip([
              { name: 'a.R', content: 'x <- 1\n' },
              { name: 'b.r', content: 'y <- 2\n' },
            ]),
        }),
        message: /at most one R script/,
      },
      {
        title: 'a body that is not a ZIP',
        status: 400,
        request: submission({ body: Buffer.from('this is not a ZIP archive\n') }),
        message: /not a ZIP archive/,
      },
      {
        title: 'an empty body',
        status: 400,
        request: submission({ body: Buffer.alloc(0) }),
        message: /empty/,
      },
    ]);
  });

  describe('meta headers', () => {
    itRejects(service, [
      {
        title: 'X-SVC-Meta- with no name',
        status: 400,
        request: submission({ headers: { 'X-SVC-Meta-': 'value' } }),
        message: /empty name/,
      },
      {
        title: 'type B with no name',
        status: 400,
        request: submission({ headers: { 'X-SVC-Meta-#1': '= value' } }),
        message: /empty name/,
      },
      {
        title: 'type B without "="',
        status: 400,
        request: submission({ headers: { 'X-SVC-Meta-#1': 'novalue' } }),
        message: /name = value/,
      },
      {
        title: 'the same parameter as type A and type B',
        status: 400,
        request: submission({
          headers: { 'X-SVC-Meta-rScript': 'a.R', 'X-SVC-Meta-#1': 'RSCRIPT = b.R' },
        }),
        message: /"rScript" is given more than once/,
      },
      {
        title: 'a meta header repeated',
        status: 400,
        request: submission({ headers: { 'X-SVC-Meta-colour': ['red', 'blue'] } }),
        message: /given more than once/,
      },
    ]);
  });

  describe('paths', () => {
    itRejects(service, [
      {
        title: 'GET /results/demo/not-a-uuid',
        status: 400,
        request: call('GET', '/results/demo/not-a-uuid'),
        message: /not a job id/,
      },
      {
        title: 'DELETE /results/demo/not-a-uuid',
        status: 400,
        request: call('DELETE', '/results/demo/not-a-uuid'),
        message: /not a job id/,
      },
      {
        title: 'GET /result/demo/not-a-uuid.zip',
        status: 400,
        request: call('GET', '/result/demo/not-a-uuid.zip'),
      },
      {
        title: 'GET /jobs/demo/123',
        status: 400,
        request: call('GET', '/jobs/demo/123'),
        message: /not a job id/,
      },
      {
        title: 'GET /results/bad-name',
        status: 400,
        request: call('GET', '/results/bad-name'),
        message: /invalid/,
      },
      {
        title: 'GET /results/bad-name/<uuid>',
        status: 400,
        request: call('GET', `/results/bad-name/${UNKNOWN_JOB}`),
      },
      {
        title: 'GET /result/bad-name/<uuid>.zip',
        status: 400,
        request: call('GET', `/result/bad-name/${UNKNOWN_JOB}.zip`),
      },
      {
        title: 'GET /jobs/bad-name/<uuid>',
        status: 400,
        request: call('GET', `/jobs/bad-name/${UNKNOWN_JOB}`),
      },
      {
        title: 'GET /results/<65 characters>',
        status: 400,
        request: call('GET', `/results/${'a'.repeat(65)}`),
      },
      {
        title: 'GET an unknown result',
        status: 404,
        request: call('GET', `/results/demo/${UNKNOWN_JOB}`),
      },
      {
        title: 'DELETE an unknown result',
        status: 404,
        request: call('DELETE', `/results/demo/${UNKNOWN_JOB}`),
      },
      {
        title: 'GET the data of an unknown job',
        status: 404,
        request: call('GET', `/result/demo/${UNKNOWN_JOB}.zip`),
      },
      {
        title: 'GET the status of an unknown job',
        status: 404,
        request: call('GET', `/jobs/demo/${UNKNOWN_JOB}`),
      },
      { title: 'GET an unknown path', status: 404, request: call('GET', '/nothing-here') },
      {
        title: 'POST an unknown deeper path',
        status: 404,
        request: call('POST', '/nothing/here/either'),
      },
      { title: 'GET the bare API root', status: 404, request: call('GET', '') },
    ]);
  });

  describe('methods', () => {
    itRejects(service, [
      { title: 'PUT /jobs', status: 405, request: call('PUT', '/jobs'), allow: 'POST' },
      { title: 'PATCH /jobs', status: 405, request: call('PATCH', '/jobs'), allow: 'POST' },
      { title: 'GET /jobs', status: 405, request: call('GET', '/jobs'), allow: 'POST' },
      { title: 'DELETE /jobs', status: 405, request: call('DELETE', '/jobs'), allow: 'POST' },
      {
        title: 'POST /jobs/demo/<uuid>',
        status: 405,
        request: call('POST', `/jobs/demo/${UNKNOWN_JOB}`),
        allow: 'GET, HEAD, DELETE',
      },
      {
        title: 'POST /jobs/demo/<uuid>/log',
        status: 405,
        request: call('POST', `/jobs/demo/${UNKNOWN_JOB}/log`),
        allow: 'GET, HEAD',
      },
      {
        title: 'POST /results/demo',
        status: 405,
        request: call('POST', '/results/demo'),
        allow: 'GET, HEAD',
      },
      {
        title: 'POST /results/demo/<uuid>',
        status: 405,
        request: call('POST', `/results/demo/${UNKNOWN_JOB}`),
        allow: 'GET, HEAD, DELETE',
      },
      {
        title: 'PUT /results/demo/<uuid>',
        status: 405,
        request: call('PUT', `/results/demo/${UNKNOWN_JOB}`),
        allow: 'GET, HEAD, DELETE',
      },
      {
        title: 'DELETE /result/demo/<uuid>.zip',
        status: 405,
        request: call('DELETE', `/result/demo/${UNKNOWN_JOB}.zip`),
        allow: 'GET, HEAD',
      },
      {
        title: 'POST /result/demo/<uuid>.zip',
        status: 405,
        request: call('POST', `/result/demo/${UNKNOWN_JOB}.zip`),
        allow: 'GET, HEAD',
      },
    ]);
  });

  describe('a job of application A under application B', () => {
    let jobId = '';
    let dataFile = '';

    beforeAll(async () => {
      const zip = await makeZip([{ name: 'job.R', content: 'writeLines("a", "a.txt")\n' }]);
      const submitted = await postZip(service().url, zip, { 'X-SVC-Application-Name': 'appA' });
      expect(submitted.status).toBe(202);
      const token = parseXml(submitted.text).jobToken;
      jobId = token.jobId;
      const result = parseXml((await waitForResult(token.resultUri)).text).result;
      dataFile = `${jobId}.${result.type}`;
    });

    itRejects(service, [
      {
        title: 'GET its result',
        status: 404,
        request: call('GET', () => `/results/appB/${jobId}`),
      },
      {
        title: 'DELETE its result',
        status: 404,
        request: call('DELETE', () => `/results/appB/${jobId}`),
      },
      {
        title: 'GET its data',
        status: 404,
        request: call('GET', () => `/result/appB/${dataFile}`),
      },
      { title: 'GET its status', status: 404, request: call('GET', () => `/jobs/appB/${jobId}`) },
    ]);

    it('is still there, and listed, under application A only', async () => {
      const base = service().url;
      expect((await request(`${base}${REST}/results/appA/${jobId}`)).status).toBe(200);
      expect((await request(`${base}${REST}/result/appA/${dataFile}`)).status).toBe(200);
      expect((await request(`${base}${REST}/jobs/appA/${jobId}`)).status).toBe(200);
      expect(await listedResults(service(), 'appB')).toBe('');
      expect(await listedResults(service(), 'appA')).toMatchObject({ result: { jobId } });
    });
  });
});

describe('bad input over the configured limits (SPEC §5.1, §12)', () => {
  const service = useService({
    ZIP_MAX_COMPRESSION_RATIO: '20',
    ZIP_MAX_ENTRIES: '3',
    ZIP_MAX_UNCOMPRESSED_BYTES: '500',
    MAX_REQUEST_BYTES: '1000',
  });

  itRejects(service, [
    {
      title: 'a ZIP bomb over the compression ratio',
      status: 413,
      request: submission({ body: () => makeZipBomb(5000) }),
      message: /ZIP bomb/,
    },
    {
      title: 'a ZIP with too many entries',
      status: 413,
      request: submission({
        body: () =>
          makeZip(['a', 'b', 'c', 'd'].map((name) => ({ name: `${name}.csv`, content: 'x\n' }))),
      }),
      message: /4 entries; at most 3/,
    },
    {
      title: 'a ZIP that expands over the uncompressed total',
      status: 413,
      request: submission({
        body: () =>
          makeZip([
            { name: 'a.csv', content: Buffer.alloc(300, 'a'), compress: false },
            { name: 'b.csv', content: Buffer.alloc(300, 'b'), compress: false },
          ]),
      }),
      message: /more than 500 bytes/,
    },
    {
      title: 'a body over the size limit, with Content-Length',
      status: 413,
      request: submission({ body: randomBytes(5000) }),
      message: /larger than the configured limit/,
    },
    {
      title: 'a body over the size limit, chunked',
      status: 413,
      request: submission({ body: randomBytes(5000), chunked: true }),
      message: /larger than the configured limit/,
    },
  ]);

  it('a job within every limit → 202', async () => {
    const zip = () =>
      makeZip([
        { name: 'job.R', content: 'x <- 1\n' },
        { name: 'a.csv', content: 'x\n1\n' },
        { name: 'b.csv', content: 'y\n2\n' },
      ]);
    await expectAccepted(
      service(),
      submission({ body: zip, headers: { [APP_HEADER]: 'limits_ok' } }),
    );
  });
});
