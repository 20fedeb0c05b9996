/**
 * Exported R functions as endpoints: listing, description and calls.
 *
 * @ci-pass embedded
 */
import { CatalogService } from '../../src/catalog/catalog.service';
import { ALICE, BOB, basicUsersEnvironment } from '../support/admin-auth';
import { validateOpenApiDocument } from '../support/openapi-validation';
import { Answer, REST, request, waitForResult } from '../support/rest-client';
import { loadTestCatalog } from '../support/function-calls';
import { startTestService, TestService, waitFor } from '../support/test-service';

const FUNCTIONS = `${REST}/functions`;

/** The hostile application's library: what it defines but does not export is not callable. */
const TRAPS = `
#' Exported, to compare with
#' @export
visible <- function(a) a

#' Documented but not exported
secret <- function() "should never be answered"

hidden <- function() "should never be answered"

#' Exported, with the dots
#' @export
dots <- function(...) length(list(...))

#' Fails with an R error
#' @export
failing <- function(x) stop("bad input: ", x)

#' Answers what JSON cannot hold
#' @export
environment_value <- function() new.env()
`;

/** The data of a job's result, once it is there. */
async function resultData(resultUri: string): Promise<Answer> {
  const meta = await waitForResult(resultUri, { Accept: 'application/vnd.svc+json' });
  return request((JSON.parse(meta.text) as { result: { dataUri: string } }).result.dataUri);
}

describe('exported R functions as endpoints', () => {
  let service: TestService;

  function call(app: string, fn: string, body: string, headers: Record<string, string> = {}) {
    return request(`${service.url}${FUNCTIONS}/${app}/${fn}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
    });
  }

  beforeAll(async () => {
    service = await startTestService({ FUNCTION_TIMEOUT_SECONDS: '10' });
    await loadTestCatalog(service);
    await service.app
      .get(CatalogService)
      .putFile('traps', 'R_FUNCTIONS', 'traps.R', Buffer.from(TRAPS));
  });
  afterAll(async () => {
    await service.stop();
  });

  it('calls an exported function with named arguments; a missing one takes its default', async () => {
    const answer = await call('demo', 'sum2', '{"x": [1, 2, 3]}');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(answer.text)).toEqual([2, 3, 4]);
    const scalar = await call('demo', 'sum2', '{"x": 40, "y": 2}');
    expect(JSON.parse(scalar.text)).toBe(42);
  });

  it('turns an array of objects into a data frame and a named list into an object', async () => {
    const rows = [
      { g: 'a', v: 1 },
      { g: 'b', v: 3 },
      { g: 'c', v: null },
    ];
    const answer = await call('demo', 'summarise_column', JSON.stringify({ rows, column: 'v' }));
    expect(answer.status).toBe(200);
    const summary = JSON.parse(answer.text) as { n: number; mean: number; sd: number };
    expect(summary).toMatchObject({ n: 2, mean: 2 });
    expect(summary.sd).toBeCloseTo(Math.sqrt(2), 12);
  });

  it('answers NA as null, data frames as rows, and vectors of one as scalars', async () => {
    const answer = await call('demo', 'fit_line', '{"x": [1, 2, 3], "y": [2, 4, 6]}');
    expect(answer.status).toBe(200);
    const fit = JSON.parse(answer.text) as { intercept: number; slope: number; fitted: number[] };
    expect(fit.slope).toBeCloseTo(2, 10);
    expect(fit.fitted).toHaveLength(3);
  });

  it('400 with the R message and the call for an R error', async () => {
    const answer = await call('traps', 'failing', '{"x": "nope"}');
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('bad input: nope');
    expect(answer.text).toContain('failing(x = x)');
  });

  it('400 naming an argument the function does not take; dots take any', async () => {
    const answer = await call('demo', 'sum2', '{"x": 1, "z": 2}');
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text)).toEqual({
      status: 400,
      error: 'Bad Request',
      message: 'sum2: argument "z" is not one sum2 takes.',
    });
    const dots = await call('traps', 'dots', '{"a": 1, "b": 2, "c": [1,2]}');
    expect(dots.status).toBe(200);
    expect(JSON.parse(dots.text)).toBe(3);
  });

  it('400 for a body that is not a JSON object, 415 for another type', async () => {
    for (const body of ['[1, 2]', '"x"', '{"x": ', '']) {
      const answer = await call('demo', 'sum2', body);
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(/JSON/);
    }
    const xml = await call('demo', 'sum2', '<x/>', { 'Content-Type': 'application/xml' });
    expect(xml.status).toBe(415);
  });

  it('400 for a value JSON cannot hold', async () => {
    const answer = await call('traps', 'environment_value', '{}');
    expect(answer.status).toBe(400);
    expect(answer.text).toMatch(/cannot be written as JSON|environment/);
  });

  it('404 for a function that is not exported, whatever its name says', async () => {
    for (const fn of [
      'secret',
      'hidden',
      'get',
      'system',
      '.Internal',
      'svcJsonService',
      'x%20y',
      '..%2Fvisible',
    ]) {
      const answer = await call(fn === 'svcJsonService' ? 'demo' : 'traps', fn, '{}');
      expect(answer.status).toBe(404);
      expect(answer.text).not.toContain('should never be answered');
    }
    const unknownApp = await call('nosuchapp', 'sum2', '{"x":1}');
    expect(unknownApp.status).toBe(404);
  });

  it('refuses hostile arguments with a 400: deep nesting, an empty name', async () => {
    const deep = `{"a": ${'['.repeat(200)}1${']'.repeat(200)}}`;
    const answer = await call('traps', 'dots', deep);
    expect(answer.status).toBe(400);
    const empty = await call('traps', 'dots', '{"": 1}');
    expect(empty.status).toBe(400);
  });

  it('queues the call as an ordinary JSON job with Prefer: respond-async', async () => {
    const answer = await call('demo', 'sum2', '{"x": [1, 2], "y": 5}', {
      Prefer: 'wait=10, respond-async',
      'X-SVC-Meta-note': 'queued',
    });
    expect(answer.status).toBe(202);
    expect(answer.headers.get('preference-applied')).toBe('respond-async');
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const token = JSON.parse(answer.text) as { jobId: string; resultUri: string };
    expect(answer.headers.get('location')).toBe(token.resultUri);
    const result = await resultData(token.resultUri);
    expect(result.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(result.text)).toEqual([6, 7]);
    const status = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, {
      headers: { Accept: 'application/vnd.svc+json' },
    });
    expect(status.text).toContain('"state":"DONE"');
  });

  it('a queued call fails as a function-call job: its R error as the result', async () => {
    const answer = await call('traps', 'failing', '{"x": "later"}', { Prefer: 'respond-async' });
    expect(answer.status).toBe(202);
    const token = JSON.parse(answer.text) as { resultUri: string };
    const result = await resultData(token.resultUri);
    expect(JSON.parse(result.text)).toMatchObject({
      applicationName: 'traps',
      errorMessage: expect.stringContaining('bad input: later') as unknown,
    });
  });

  it('answers its errors and job tokens in plain JSON unless Accept prefers the mapped or XML shape', async () => {
    for (const accept of [undefined, '*/*', 'text/html', 'application/json']) {
      const answer = await call('traps', 'secret', '{}', accept ? { Accept: accept } : {});
      expect(answer.status).toBe(404);
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(JSON.parse(answer.text)).toMatchObject({ status: 404, error: 'Not Found' });
    }
    const mapped = await call('traps', 'secret', '{}', { Accept: 'application/vnd.svc+json' });
    expect(mapped.headers.get('content-type')).toBe('application/vnd.svc+json; charset=utf-8');
    expect(JSON.parse(mapped.text)).toMatchObject({ error: { status: 404 } });
    const xml = await call('traps', 'secret', '{}', { Accept: 'application/vnd.svc+xml' });
    expect(xml.text).toContain('<error xmlns="urn:svc:rest:types" status="404"');
    const token = await call('demo', 'sum2', '{"x": 1}', {
      Prefer: 'respond-async',
      Accept: 'application/vnd.svc+json',
    });
    expect(token.status).toBe(202);
    expect(token.headers.get('content-type')).toBe('application/vnd.svc+json; charset=utf-8');
    expect(JSON.parse(token.text)).toMatchObject({ jobToken: { applicationName: 'demo' } });
  });

  it('checks a queued call as a direct one: 404 unexported, 400 bad body, before queueing', async () => {
    expect((await call('traps', 'secret', '{}', { Prefer: 'respond-async' })).status).toBe(404);
    expect((await call('demo', 'sum2', '[1]', { Prefer: 'respond-async' })).status).toBe(400);
  });

  it('lists the exported functions with their arguments, defaults and docs', async () => {
    const answer = await request(`${service.url}${FUNCTIONS}/demo`);
    expect(answer.status).toBe(200);
    const { functions } = JSON.parse(answer.text) as {
      functions: Array<{ name: string; title: string; arguments: Array<Record<string, unknown>> }>;
    };
    expect(functions.map((f) => f.name)).toEqual([
      'sum2',
      'summarise_column',
      'fit_line',
      'combinations',
    ]);
    expect(functions[0]).toMatchObject({
      title: 'Add two numbers',
      description: 'Adds y to every element of x.',
      returns: 'x + y',
      arguments: [
        { name: 'x', default: null, description: 'numbers' },
        { name: 'y', default: '1', description: 'a number added to each of them' },
      ],
    });
  });

  it('describes the application in OpenAPI 3.1, valid against the schema', async () => {
    const answer = await request(`${service.url}${FUNCTIONS}/demo/openapi.json`);
    expect(answer.status).toBe(200);
    const document = JSON.parse(answer.text) as {
      openapi: string;
      paths: Record<
        string,
        { post: { requestBody: { content: Record<string, { schema: { required: string[] } }> } } }
      >;
    };
    expect(document.openapi).toBe('3.1.0');
    const sum2 = document.paths[`${FUNCTIONS}/demo/sum2`].post;
    expect(sum2.requestBody.content['application/json'].schema.required).toEqual(['x']);
    expect(validateOpenApiDocument(document)).toMatchObject({ valid: true, version: '3.1' });
  });

  it('follows a catalog change at once: a new export is listed and callable', async () => {
    const catalog = service.app.get(CatalogService);
    await catalog.putFile(
      'traps',
      'R_FUNCTIONS',
      'more.R',
      Buffer.from("#' Twice\n#' @export\ntwice <- function(v) 2 * v\n"),
    );
    await waitFor(
      async () => (await request(`${service.url}${FUNCTIONS}/traps`)).text.includes('twice'),
      10000,
      'the new export listed',
    );
    const answer = await call('traps', 'twice', '{"v": 21}');
    expect(JSON.parse(answer.text)).toBe(42);
    await catalog.deleteFile('traps', 'R_FUNCTIONS', 'more.R');
    await waitFor(
      async () => (await call('traps', 'twice', '{"v": 1}')).status === 404,
      10000,
      'the export gone',
    );
  });
});

/** Called at once, or queued. */
const PREFERENCES: Array<Record<string, string>> = [{}, { Prefer: 'respond-async' }];

describe('exported R functions: who may call them, with how much, how many at once', () => {
  let service: TestService;
  const SLOW = "#' Sleeps\n#' @export\nslow <- function(s) { Sys.sleep(s); s }\n";

  function send(path: string, init: RequestInit = {}): Promise<Answer> {
    return request(`${service.url}${FUNCTIONS}/${path}`, init);
  }
  function post(path: string, body: string, headers: Record<string, string>): Promise<Answer> {
    return send(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
    });
  }

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        demo: { userPrincipals: ['alice'], functionCallAllowed: true },
        slowapp: { userPrincipals: ['bob'], functionCallAllowed: true },
      })),
      MAX_REQUEST_BYTES: '4096',
      PROCESS_MAX_CONCURRENT: '1',
      PROCESS_MAX_QUEUED: '1',
      FUNCTION_TIMEOUT_SECONDS: '20',
    });
    await loadTestCatalog(service);
    await service.app
      .get(CatalogService)
      .putFile('slowapp', 'R_FUNCTIONS', 'slow.R', Buffer.from(SLOW));
  });
  afterAll(async () => {
    await service.stop();
  });

  it('asks for credentials on every route, and refuses another application’s user', async () => {
    const routes: Array<[string, RequestInit]> = [
      ['demo', {}],
      ['demo/openapi.json', {}],
      [
        'demo/sum2',
        { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"x":1}' },
      ],
    ];
    for (const [path, init] of routes) {
      expect([path, (await send(path, init)).status]).toEqual([path, 401]);
    }
    for (const prefer of PREFERENCES) {
      const answer = await post('demo/sum2', '{"x": 1}', { ...BOB, ...prefer });
      expect(answer.status).toBe(403);
      expect(answer.text).not.toContain('2');
    }
    expect((await send('demo', { headers: BOB })).status).toBe(403);
    expect((await send('demo/openapi.json', { headers: BOB })).status).toBe(403);
    const own = await post('demo/sum2', '{"x": 1}', ALICE);
    expect([own.status, own.text]).toEqual([200, '2']);
    expect((await post('slowapp/slow', '{"s": 0}', ALICE)).status).toBe(403);
  });

  it('answers 401 in JSON to a request that sent JSON or asked for it, on the functions and /process', async () => {
    const jsonBody = { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' };
    const requests: Array<[string, RequestInit]> = [];
    const accepts: Array<Record<string, string>> = [
      {},
      { Accept: '*/*' },
      { Accept: 'application/json' },
    ];
    for (const accept of accepts) {
      requests.push(
        [`${REST}/process`, { method: 'POST', headers: { ...jsonBody, ...accept }, body: '"x"' }],
        [
          `${FUNCTIONS}/demo/sum2`,
          { method: 'POST', headers: { ...jsonBody, ...accept }, body: '{"x": 1}' },
        ],
        [`${FUNCTIONS}/demo`, { headers: accept }],
        [`${FUNCTIONS}/demo/openapi.json`, { headers: accept }],
      );
    }
    for (const [path, init] of requests) {
      const answer = await request(`${service.url}${path}`, init);
      expect([path, init.headers, answer.status, answer.headers.get('content-type')]).toEqual([
        path,
        init.headers,
        401,
        'application/json; charset=utf-8',
      ]);
      expect(JSON.parse(answer.text)).toMatchObject({ status: 401, error: 'Unauthorized' });
    }
    // A client of the seed's XML contract keeps its XML; so does one that asks for it.
    const xml = await request(`${service.url}${REST}/process`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/xml', 'X-SVC-Application-Name': 'demo' },
      body: '<x/>',
    });
    expect([xml.status, xml.headers.get('content-type')]).toEqual([
      401,
      'application/vnd.svc+xml; charset=utf-8',
    ]);
    const asked = await request(`${service.url}${REST}/process`, {
      method: 'POST',
      headers: { ...jsonBody, Accept: 'application/vnd.svc+xml' },
      body: '"x"',
    });
    expect(asked.headers.get('content-type')).toBe('application/vnd.svc+xml; charset=utf-8');
  });

  it('refuses a body over MAX_REQUEST_BYTES with 413, called or queued, and queues nothing', async () => {
    const big = JSON.stringify({ x: Array.from({ length: 2000 }, (_, i) => i) });
    expect(big.length).toBeGreaterThan(4096);
    for (const prefer of PREFERENCES) {
      const answer = await post('demo/sum2', big, { ...ALICE, ...prefer });
      expect(answer.status).toBe(413);
    }
    const results = await request(`${service.url}${REST}/results/demo`, {
      headers: { ...ALICE, Accept: 'application/vnd.svc+json' },
    });
    expect(results.text).not.toContain('jobId');
  });

  it('answers calls beyond the node’s bounds at once with 503 and Retry-After, never a 500', async () => {
    const answers = await Promise.all(
      [0, 1, 2, 3].map(() => post('slowapp/slow', '{"s": 2}', BOB)),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses.filter((status) => status !== 200 && status !== 503)).toEqual([]);
    expect(statuses).toContain(200);
    expect(statuses).toContain(503);
    const refused = answers.find((answer) => answer.status === 503);
    expect(refused?.headers.get('retry-after')).toBe('1');
  });
});
