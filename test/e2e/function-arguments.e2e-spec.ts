/**
 * Exported functions check their arguments against the signature and the roxygen `@param`
 * types before R runs (missing, unknown and mistyped arguments in one 400, the same answer
 * called at once and queued, and nothing queued), describe those types in their OpenAPI, and
 * answer in JSON on every door of theirs (404 for GET of an unknown function, 405, the queued
 * call's Location). Values R cannot hold (a NUL, an unpaired surrogate, a number beyond a double,
 * an integer a double cannot hold exactly) are refused with a 400 naming the argument, on every
 * path where a client's string reaches R: exported functions, `/process`, function-call jobs,
 * meta parameters and configuration.txt.
 * @ci-pass embedded
 */
import { CatalogService } from '../../src/catalog/catalog.service';
import { postForm, textField, fileField } from '../support/form-client';
import { loadTestCatalog } from '../support/function-calls';
import { Answer, REST, request, waitForResult } from '../support/rest-client';
import { validateOpenApiDocument } from '../support/openapi-validation';
import { startTestService, storedJobRows, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const FUNCTIONS = `${REST}/functions`;

/** The message of a plain JSON error answer. */
function messageOf(answer: Answer): string {
  return (JSON.parse(answer.text) as { message: string }).message;
}

/** The message of a form post's JSON error: the seed's `error` element in mapped JSON (docs/api.md). */
function formMessageOf(answer: Answer): string {
  return (JSON.parse(answer.text) as { error: { message: string } }).error.message;
}

const TYPED = `
#' Typed arguments
#'
#' Echoes what R received.
#' @param n:integer how many
#' @param label:string a label
#' @param flag:boolean whether
#' @param values:number[] some numbers
#' @param options:object settings
#' @param rows:data.frame a table
#' @param anything what you like
#' @return:object what R received
#' @export
typed <- function(n, label, flag = FALSE, values = c(1, 2), options = list(), rows = NULL,
                  anything = NULL) {
  list(n = n, integer = is.integer(n), label = label, chars = nchar(label), flag = flag,
       values = values, options = options, rows = if (is.null(rows)) NULL else nrow(rows))
}

#' Takes any name
#' @param first:string the first
#' @export
dotted <- function(first, ...) {
  list(first = nchar(first), rest = lengths(list(...)))
}

#' Counts characters
#' @param s a string
#' @export
chars <- function(s) nchar(s)
`;

describe('exported functions check their arguments before R runs', () => {
  let service: TestService;

  function call(fn: string, body: string, headers: Record<string, string> = {}): Promise<Answer> {
    return request(`${service.url}${FUNCTIONS}/typed/${fn}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body,
    });
  }

  beforeAll(async () => {
    service = await startTestService({ FUNCTION_TIMEOUT_SECONDS: '20' });
    await loadTestCatalog(service);
    await service.app
      .get(CatalogService)
      .putFile('typed', 'R_FUNCTIONS', 'typed.R', Buffer.from(TYPED));
  });
  afterAll(async () => {
    await service.stop();
  });

  it('calls with well-typed arguments; a number stands for an array of one', async () => {
    const answer = await call(
      'typed',
      JSON.stringify({
        n: 3,
        label: 'héllo',
        values: 2.5,
        options: { a: 1 },
        rows: [{ a: 1 }, { a: 2 }],
        anything: [true, 'x'],
      }),
    );
    expect([answer.status, JSON.parse(answer.text)]).toEqual([
      200,
      {
        n: 3,
        integer: true,
        label: 'héllo',
        chars: 5,
        flag: false,
        values: 2.5,
        options: { a: 1 },
        rows: 2,
      },
    ]);
    const arrays = await call('typed', '{"n": 1, "label": "", "values": [1, null, 3]}');
    expect([arrays.status, (JSON.parse(arrays.text) as { values: unknown }).values]).toEqual([
      200,
      [1, null, 3],
    ]);
  });

  it('answers missing, unknown and mistyped arguments in one 400, called or queued, and queues nothing', async () => {
    const body = '{"label": 3, "flag": "yes", "values": ["a"], "options": [1], "zzz": 1}';
    const before = await storedJobRows(service);
    const direct = await call('typed', body);
    const queued = await call('typed', body, { Prefer: 'respond-async' });
    expect(direct.status).toBe(400);
    expect(direct.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const error = JSON.parse(direct.text) as { status: number; error: string; message: string };
    expect(error).toMatchObject({ status: 400, error: 'Bad Request' });
    for (const problem of [
      'argument "n" is missing',
      'argument "zzz" is not one typed takes',
      'argument "label" must be a string, not a number',
      'argument "flag" must be a boolean, not a string',
      'argument "values" must be a number[]',
      'argument "options" must be an object, not an array',
    ]) {
      expect(error.message).toContain(problem);
    }
    expect([queued.status, queued.headers.get('content-type'), queued.text]).toEqual([
      400,
      'application/json; charset=utf-8',
      direct.text,
    ]);
    expect(queued.headers.get('location')).toBeNull();
    expect(await storedJobRows(service)).toEqual(before);
  });

  it('refuses a fraction for an integer and null for a scalar; dots take any name', async () => {
    const fraction = await call('typed', '{"n": 1.5, "label": null}');
    expect(fraction.status).toBe(400);
    expect(fraction.text).toContain('argument \\"n\\" must be an integer');
    expect(fraction.text).toContain('argument \\"label\\" must be a string, not null');
    const dots = await call('dotted', '{"first": "ab", "x": [1, 2], "y": {"z": 1}}');
    expect([dots.status, JSON.parse(dots.text)]).toEqual([200, { first: 2, rest: [2, 1] }]);
  });

  it('describes each argument with its declared type and the value with its documented one', async () => {
    const answer = await request(`${service.url}${FUNCTIONS}/typed/openapi.json`);
    const document = JSON.parse(answer.text) as {
      paths: Record<string, { post: Record<string, unknown> }>;
    };
    expect(validateOpenApiDocument(document)).toMatchObject({ valid: true, version: '3.1' });
    const typed = document.paths[`${FUNCTIONS}/typed/typed`].post as {
      requestBody: { content: { 'application/json': { schema: Record<string, unknown> } } };
      responses: { '200': { content: { 'application/json': { schema: unknown } } } };
    };
    const schema = typed.requestBody.content['application/json'].schema as {
      properties: Record<string, Record<string, unknown>>;
      required: string[];
    };
    expect(schema.required).toEqual(['n', 'label']);
    expect(schema.properties.n).toMatchObject({ type: 'integer' });
    expect(schema.properties.label).toMatchObject({ type: 'string' });
    expect(schema.properties.flag).toMatchObject({ type: 'boolean' });
    expect(schema.properties.values).toMatchObject({
      type: ['array', 'number'],
      items: { type: ['number', 'null'] },
    });
    expect(schema.properties.options).toMatchObject({ type: 'object' });
    expect(schema.properties.rows).toMatchObject({ type: 'array', items: { type: 'object' } });
    expect(schema.properties.anything.type).toBeUndefined();
    expect(typed.responses['200'].content['application/json'].schema).toEqual({ type: 'object' });
    const listing = await request(`${service.url}${FUNCTIONS}/typed`);
    const { functions } = JSON.parse(listing.text) as {
      functions: Array<{ name: string; arguments: Array<{ name: string; type: string | null }> }>;
    };
    expect(functions[0].arguments.map((a) => [a.name, a.type])).toEqual([
      ['n', 'integer'],
      ['label', 'string'],
      ['flag', 'boolean'],
      ['values', 'number[]'],
      ['options', 'object'],
      ['rows', 'data.frame'],
      ['anything', null],
    ]);
  });

  it('answers GET of an unknown function or application 404 and another method 405, in JSON', async () => {
    for (const path of ['typed/nosuch', 'nosuchapp', 'nosuchapp/openapi.json']) {
      const answer = await request(`${service.url}${FUNCTIONS}/${path}`);
      expect([path, answer.status, answer.headers.get('content-type')]).toEqual([
        path,
        404,
        'application/json; charset=utf-8',
      ]);
      expect(JSON.parse(answer.text)).toMatchObject({ status: 404, error: 'Not Found' });
    }
    const one = await request(`${service.url}${FUNCTIONS}/typed/chars`);
    expect([one.status, JSON.parse(one.text)]).toMatchObject([200, { name: 'chars' }]);
    for (const method of ['PUT', 'DELETE', 'PATCH']) {
      const answer = await request(`${service.url}${FUNCTIONS}/typed/chars`, { method });
      expect([method, answer.status, answer.headers.get('content-type')]).toEqual([
        method,
        405,
        'application/json; charset=utf-8',
      ]);
      expect(answer.headers.get('allow')).toBe('GET, HEAD, POST');
      expect(JSON.parse(answer.text)).toMatchObject({ status: 405 });
    }
  });

  it("answers a JSON client at the queued call's Location in JSON", async () => {
    const answer = await call('chars', '{"s": "abc"}', {
      Prefer: 'respond-async',
      Accept: 'application/json',
    });
    expect(answer.status).toBe(202);
    const location = answer.headers.get('location') as string;
    const result = await waitForResult(location, { Accept: 'application/json' });
    expect(result.headers.get('content-type')).toMatch(/^application\/json/);
    const meta = JSON.parse(result.text) as { dataUri: string };
    const data = await request(meta.dataUri, { headers: { Accept: 'application/json' } });
    expect([data.status, data.text]).toEqual([200, '3']);
  });

  it.each([
    ['a NUL', '{"s": "abc\\u0000def"}', 's', 'NUL'],
    ['an unpaired surrogate', '{"s": "abc\\ud800"}', 's', 'unpaired surrogate'],
    ['a NUL in a nested name', '{"s": {"a\\u0000b": 1}}', 's', 'NUL'],
    ['a number beyond a double', '{"s": [1, 1e400]}', 's', 'beyond'],
    ['a non-zero number below a double', '{"s": 1e-400}', 's', 'beyond'],
    ['an integer a double cannot hold', '{"s": 9007199254740993}', 's', '9007199254740993'],
  ])('refuses %s with a 400 naming the argument', async (_what, body, name, problem) => {
    const preferences: Array<Record<string, string>> = [{}, { Prefer: 'respond-async' }];
    for (const prefer of preferences) {
      const answer = await call('chars', body, prefer);
      expect([answer.status, answer.text]).toEqual([400, expect.stringContaining(problem)]);
      expect(answer.text).toContain(`argument \\"${name}\\"`);
    }
  });

  it('refuses a NUL in a name the dots take, and takes integers a double holds exactly', async () => {
    const named = await call('dotted', '{"first": "a", "b\\u0000c": 1}');
    expect([named.status, named.text]).toEqual([400, expect.stringContaining('NUL')]);
    const exact = await call('chars', '{"s": 9007199254740992}');
    expect([exact.status, exact.text]).toEqual([200, '16']);
  });

  it('refuses a NUL in the payload of /process and of a function-call job, before R', async () => {
    const payload = Buffer.from('"abc\u0000def"');
    const before = await storedJobRows(service);
    for (const path of ['process', 'jobs']) {
      const answer = await request(`${service.url}${REST}/${path}`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'X-SVC-Application-Name': 'calls',
          Accept: 'application/json',
        },
        body: payload,
      });
      expect([path, answer.status]).toEqual([path, 400]);
      expect(answer.text).toContain('NUL');
    }
    expect(await storedJobRows(service)).toEqual(before);
  });

  it('refuses a NUL or an unpaired surrogate in meta parameters, from a form or configuration.txt', async () => {
    const before = await storedJobRows(service);
    const field = await postForm(
      service.url,
      [
        textField('X-SVC-Application-Name', 'demo'),
        textField('X-SVC-Meta-note', 'abc\u0000def'),
        fileField('job.R', 'cat(1)\n'),
      ],
      { Accept: 'application/json' },
    );
    expect([field.status, formMessageOf(field)]).toEqual([400, expect.stringContaining('"note"')]);
    for (const configuration of ['note = abc\\u0000def\n', 'note = abc\\ud800\n']) {
      const zip = await makeZip([
        { name: 'job.R', content: 'cat(1)\n' },
        { name: 'configuration.txt', content: configuration },
      ]);
      const answer = await request(`${service.url}${REST}/jobs`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/zip',
          'X-SVC-Application-Name': 'demo',
          Accept: 'application/json',
        },
        body: zip,
      });
      expect([answer.status, messageOf(answer)]).toEqual([400, expect.stringContaining('"note"')]);
    }
    expect(await storedJobRows(service)).toEqual(before);
  });
});
