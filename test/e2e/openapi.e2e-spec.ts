/**
 * The OpenAPI description, validated against what the service answers.
 *
 * @ci-pass node24
 */
import { randomUUID } from 'node:crypto';
import { load } from 'js-yaml';
import { ADMIN_AUTHORIZATION, ADMIN_ENV } from '../support/admin-auth';
import { loadTestCatalog } from '../support/function-calls';
import { OpenApiChecker } from '../support/openapi-validation';
import { buildPackage } from '../support/r-packages';
import { Answer, REST, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

const JSON_ACCEPT = { Accept: 'application/vnd.svc+json' };
const XML_ACCEPT = { Accept: 'application/vnd.svc+xml' };
/** Plain JSON: the same representations without Jettison's wrapping, lists always arrays. */
const PLAIN_ACCEPT = { Accept: 'application/json' };
const QUICK = 'cat("first line\\n")\nwriteLines("done", "done.txt")\n';
const SLEEPER = 'svc_progress(0.5, "halfway")\nSys.sleep(120)\n';
const MAX_REQUEST_BYTES = 200000;

/**
 * Every operation of the OpenAPI document, called for real: each answer's status and
 * Content-Type must be documented for its operation, and its body must match the document's
 * schema (JSON, with ajv) or rest-data.xsd (XML). The document checked is the one the service
 * serves.
 */
describe('the OpenAPI document against the running service', () => {
  let service: TestService;
  let base: string;
  let checker: OpenApiChecker;
  const exercised = new Set<string>();

  /** One request to an operation, checked against the document. */
  async function call(
    method: string,
    template: string,
    path: string,
    init: RequestInit & { headers?: Record<string, string> } = {},
  ): Promise<Answer> {
    const answer = await request(`${base}${REST}${path}`, { ...init, method });
    exercised.add(`${method} ${template}`);
    const problems = await checker.problems({
      method,
      path: template,
      status: answer.status,
      contentType: answer.headers.get('content-type'),
      body: answer.text,
    });
    expect(problems).toEqual([]);
    return answer;
  }

  async function submit(script: string, headers: Record<string, string> = {}): Promise<string> {
    const answer = await call('POST', '/jobs', '/jobs', {
      headers: {
        'Content-Type': 'application/zip',
        'X-SVC-Application-Name': 'demo',
        ...JSON_ACCEPT,
        ...headers,
      },
      body: await makeZip([{ name: 'job.R', content: script }]),
    });
    expect(answer.status).toBe(202);
    const token = (JSON.parse(answer.text) as { jobToken: { jobId: string; resultUri: string } })
      .jobToken;
    expect(answer.headers.get('location')).toBe(token.resultUri);
    return token.jobId;
  }

  async function stateOf(jobId: string): Promise<string> {
    const answer = await request(`${base}${REST}/jobs/demo/${jobId}`, { headers: JSON_ACCEPT });
    return (JSON.parse(answer.text) as { jobStatus: { state: string } }).jobStatus.state;
  }

  beforeAll(async () => {
    service = await startTestService({
      ...ADMIN_ENV,
      SCRIPT_SLOTS: '1',
      MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES),
      // The document's server link follows a proxy's forwarded headers (the tests' loopback).
      TRUST_PROXY: 'loopback',
    });
    base = service.url;
    await loadTestCatalog(service);
    const served = await request(`${base}${REST}/openapi.json`);
    checker = new OpenApiChecker(JSON.parse(served.text) as Record<string, unknown>);
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('serves the document as JSON and as the same document in YAML, with its links', async () => {
    const json = await call('GET', '/openapi.json', '/openapi.json', {
      headers: { Accept: 'text/html' },
    });
    expect(json.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const document = JSON.parse(json.text) as { openapi: string; servers: Array<{ url: string }> };
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers[0].url).toBe(`${base}${REST}`);
    const yaml = await call('GET', '/openapi.yaml', '/openapi.yaml');
    expect(yaml.headers.get('content-type')).toBe('application/yaml; charset=utf-8');
    expect(load(yaml.text)).toEqual(document);
    const forwarded = await request(`${base}${REST}/openapi.json`, {
      headers: { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.org' },
    });
    expect((JSON.parse(forwarded.text) as typeof document).servers[0].url).toBe(
      `https://api.example.org${REST}`,
    );
    expect((await request(`${base}${REST}/openapi.json`, { method: 'POST' })).status).toBe(405);
  });

  it('submits jobs in every documented body and refuses the documented errors', async () => {
    await submit(QUICK, { 'X-SVC-Meta-#1': 'colour = blue' });
    const xml = await call('POST', '/jobs', '/jobs', {
      headers: {
        'Content-Type': 'application/json',
        'X-SVC-Application-Name': 'demo',
        ...XML_ACCEPT,
      },
      body: JSON.stringify({ RFunction: 'combn', n: 4, k: 2 }),
    });
    expect([xml.status, xml.headers.get('content-type')]).toEqual([
      202,
      'application/vnd.svc+xml; charset=utf-8',
    ]);
    const form = new FormData();
    form.append('X-SVC-Application-Name', 'demo');
    form.append('X-SVC-JobFile[]', new Blob([QUICK]), 'job.R');
    const formAnswer = await call('POST', '/jobs', '/jobs', {
      headers: { Accept: 'application/json' },
      body: form,
    });
    expect([formAnswer.status, formAnswer.headers.get('content-type')]).toEqual([
      202,
      'application/json; charset=utf-8',
    ]);

    const zip = await makeZip([{ name: 'job.R', content: QUICK }]);
    const noApplication = await call('POST', '/jobs', '/jobs', {
      headers: { 'Content-Type': 'application/zip', ...JSON_ACCEPT },
      body: zip,
    });
    expect(noApplication.status).toBe(400);
    const wrongType = await call('POST', '/jobs', '/jobs', {
      headers: { 'Content-Type': 'text/plain', 'X-SVC-Application-Name': 'demo' },
      body: 'x',
    });
    expect(wrongType.status).toBe(415);
    const notAcceptable = await call('POST', '/jobs', '/jobs', {
      headers: {
        'Content-Type': 'application/zip',
        'X-SVC-Application-Name': 'demo',
        Accept: 'text/html',
      },
      body: zip,
    });
    expect(notAcceptable.status).toBe(406);
    const tooLarge = await call('POST', '/jobs', '/jobs', {
      headers: {
        'Content-Type': 'application/zip',
        'X-SVC-Application-Name': 'demo',
        ...JSON_ACCEPT,
      },
      body: Buffer.alloc(MAX_REQUEST_BYTES + 1),
    });
    expect(tooLarge.status).toBe(413);
  });

  it("answers a job's status, log and result, waiting when asked", async () => {
    const jobId = await submit(QUICK);
    const waited = await call('GET', '/results/{app}/{jobId}', `/results/demo/${jobId}?wait=60`, {
      headers: JSON_ACCEPT,
    });
    expect(waited.status).toBe(200);
    for (const headers of [JSON_ACCEPT, PLAIN_ACCEPT, XML_ACCEPT]) {
      expect(
        (await call('GET', '/jobs/{app}/{jobId}', `/jobs/demo/${jobId}`, { headers })).status,
      ).toBe(200);
      expect(
        (await call('GET', '/results/{app}/{jobId}', `/results/demo/${jobId}`, { headers })).status,
      ).toBe(200);
    }
    const statusWaited = await call('GET', '/jobs/{app}/{jobId}', `/jobs/demo/${jobId}?wait=1`, {
      headers: JSON_ACCEPT,
    });
    expect(statusWaited.status).toBe(200);
    for (const [path, status] of [
      [`/jobs/demo/${jobId}?wait=0`, 400],
      [`/jobs/demo/not-a-uuid`, 400],
      [`/jobs/demo/${randomUUID()}`, 404],
    ] as const) {
      expect(
        (await call('GET', '/jobs/{app}/{jobId}', path, { headers: JSON_ACCEPT })).status,
      ).toBe(status);
    }
    const refused = await call('GET', '/jobs/{app}/{jobId}', `/jobs/demo/${jobId}`, {
      headers: { Accept: 'text/html' },
    });
    expect(refused.status).toBe(406);
    for (const [path, status] of [
      [`/results/demo/${jobId}?wait=x`, 400],
      [`/results/demo/${randomUUID()}`, 404],
    ] as const) {
      expect(
        (await call('GET', '/results/{app}/{jobId}', path, { headers: JSON_ACCEPT })).status,
      ).toBe(status);
    }

    const plainLog = await call('GET', '/jobs/{app}/{jobId}/log', `/jobs/demo/${jobId}/log`);
    expect([plainLog.status, plainLog.headers.get('content-type')]).toEqual([
      200,
      'text/plain; charset=utf-8',
    ]);
    expect(plainLog.text).toMatch(/ stdout first line\n/);
    const events = await call('GET', '/jobs/{app}/{jobId}/log', `/jobs/demo/${jobId}/log`, {
      headers: { Accept: 'text/event-stream' },
    });
    // Written by Nest's event stream, without the charset parameter, which for event streams is
    // always UTF-8 and "serves no purpose" (the HTML standard's registration of the type).
    expect(events.headers.get('content-type')).toBe('text/event-stream');
    expect(events.text).toMatch(/event: end\n/);
    const badEventId = await call('GET', '/jobs/{app}/{jobId}/log', `/jobs/demo/${jobId}/log`, {
      headers: { Accept: 'text/event-stream', 'Last-Event-ID': 'x' },
    });
    expect(badEventId.status).toBe(400);
    const noLog = await call('GET', '/jobs/{app}/{jobId}/log', `/jobs/demo/${randomUUID()}/log`);
    expect(noLog.status).toBe(404);
  });

  it("serves a result's data with ranges and ETags, and deletes it", async () => {
    const jobId = await submit(QUICK);
    const result = (
      JSON.parse(
        (await waitForResult(`${base}${REST}/results/demo/${jobId}`, JSON_ACCEPT)).text,
      ) as {
        result: { dataUri: string };
      }
    ).result;
    const dataPath = new URL(result.dataUri).pathname.slice(REST.length);
    const template = '/result/{app}/{jobId}.{type}';
    const whole = await call('GET', template, dataPath);
    expect([whole.status, whole.headers.get('content-type')]).toEqual([200, 'application/zip']);
    const etag = whole.headers.get('etag') ?? '';
    expect((await call('HEAD', template, dataPath)).status).toBe(200);
    expect(
      (await call('GET', template, dataPath, { headers: { Range: 'bytes=0-9' } })).status,
    ).toBe(206);
    expect(
      (await call('GET', template, dataPath, { headers: { 'If-None-Match': etag } })).status,
    ).toBe(304);
    expect(
      (await call('GET', template, dataPath, { headers: { Range: 'bytes=999999-' } })).status,
    ).toBe(416);
    expect((await call('GET', template, dataPath.replace('.zip', '.txt'))).status).toBe(404);
    expect((await call('GET', template, '/result/demo/nothing.zip')).status).toBe(400);

    const path = `/results/demo/${jobId}`;
    expect((await call('DELETE', '/results/{app}/{jobId}', path)).status).toBe(204);
    expect(
      (await call('DELETE', '/results/{app}/{jobId}', path, { headers: JSON_ACCEPT })).status,
    ).toBe(404);
    expect((await call('DELETE', '/results/{app}/{jobId}', '/results/demo/x')).status).toBe(400);
  });

  it('lists no, one and several results (an object for one, an array for several)', async () => {
    const list = async (app: string, query = ''): Promise<unknown> => {
      const answer = await call('GET', '/results/{app}', `/results/${app}${query}`, {
        headers: JSON_ACCEPT,
      });
      expect(answer.status).toBe(200);
      return (JSON.parse(answer.text) as { results: unknown }).results;
    };
    expect(await list('nobody')).toBe('');
    await waitFor(
      async () => {
        const results = (await list('demo')) as { result?: unknown[] };
        return Array.isArray(results.result) && results.result.length >= 2;
      },
      90000,
      'two results of demo',
    );
    const one = (await list('demo', '?limit=1')) as { result: unknown };
    expect(Array.isArray(one.result)).toBe(false);
    expect(
      (await call('GET', '/results/{app}', '/results/demo', { headers: XML_ACCEPT })).status,
    ).toBe(200);
    expect(
      (await call('GET', '/results/{app}', '/results/demo?limit=-1', { headers: JSON_ACCEPT }))
        .status,
    ).toBe(400);
    expect(
      (await call('GET', '/results/{app}', '/results/demo', { headers: { Accept: 'text/html' } }))
        .status,
    ).toBe(406);
  });

  it('cancels a queued job (204), a running one (202) and refuses a finished one (409)', async () => {
    const running = await submit(SLEEPER);
    await waitFor(async () => (await stateOf(running)) === 'RUNNING', 60000, 'the sleeper running');
    // webR hands over a run's output and progress when the run ends; native R while it runs.
    const live = process.env.R_ENGINE !== 'webr';
    if (live) {
      // The report reaches the database with the next batch of log lines.
      await waitFor(
        async () => {
          const answer = await call('GET', '/jobs/{app}/{jobId}', `/jobs/demo/${running}`, {
            headers: JSON_ACCEPT,
          });
          return (JSON.parse(answer.text) as { jobStatus: { progress?: unknown } }).jobStatus
            .progress;
        },
        60000,
        'the sleeper reporting progress',
      );
      const withProgress = await call('GET', '/jobs/{app}/{jobId}', `/jobs/demo/${running}`, {
        headers: XML_ACCEPT,
      });
      expect(withProgress.text).toContain('<progress fraction="0.5" message="halfway"/>');
    }
    const queued = await submit(SLEEPER);
    expect(await stateOf(queued)).toBe('QUEUED');
    const path = (jobId: string): string => `/jobs/demo/${jobId}`;
    const template = '/jobs/{app}/{jobId}';
    expect((await call('DELETE', template, path(queued), { headers: JSON_ACCEPT })).status).toBe(
      204,
    );
    const stopping = await call('DELETE', template, path(running), { headers: JSON_ACCEPT });
    expect(stopping.status).toBe(202);
    expect(JSON.parse(stopping.text)).toMatchObject({
      jobStatus: {
        state: 'DONE',
        ...(live ? { progress: { fraction: 0.5, message: 'halfway' } } : {}),
        cancellation: { by: 'anonymous' },
      },
    });
    expect((await call('DELETE', template, path(running), { headers: XML_ACCEPT })).status).toBe(
      409,
    );
    expect(
      (await call('DELETE', template, path(randomUUID()), { headers: JSON_ACCEPT })).status,
    ).toBe(404);
    expect((await call('DELETE', template, path('x'), { headers: JSON_ACCEPT })).status).toBe(400);
  });

  it('calls functions at once, and answers their failures and bad requests', async () => {
    const headers = { 'X-SVC-Application-Name': 'demo' };
    const json = await call('POST', '/process', '/process', {
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ RFunction: 'combn', n: 4, k: 2 }),
    });
    expect([json.status, json.headers.get('content-type')]).toEqual([
      200,
      'application/json; charset=utf-8',
    ]);
    const xml = await call('POST', '/process', '/process', {
      headers: { ...headers, 'Content-Type': 'application/xml' },
      body: '<call RFunction="describe"><x>3</x><x>5</x></call>',
    });
    expect(xml.status).toBe(200);
    for (const [type, body] of [
      ['application/json', JSON.stringify({ RFunction: 'fail' })],
      ['application/xml', '<call RFunction="fail"/>'],
    ]) {
      const failed = await call('POST', '/process', '/process', {
        headers: { ...headers, 'Content-Type': type },
        body,
      });
      expect([failed.status, failed.headers.get('content-type')]).toEqual([
        400,
        `${type}; charset=utf-8`,
      ]);
    }
    const empty = await call('POST', '/process', '/process', {
      headers: { ...headers, 'Content-Type': 'application/json', ...JSON_ACCEPT },
      body: '',
    });
    expect(empty.status).toBe(400);
    const noApplication = await call('POST', '/process', '/process', {
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(noApplication.status).toBe(400);
    const wrongType = await call('POST', '/process', '/process', {
      headers: { ...headers, 'Content-Type': 'application/zip', ...JSON_ACCEPT },
      body: 'x',
    });
    expect(wrongType.status).toBe(415);
  });

  it('lists, describes and calls the exported R functions', async () => {
    const list = await call('GET', '/functions/{app}', '/functions/demo');
    expect(list.status).toBe(200);
    const described = await call(
      'GET',
      '/functions/{app}/openapi.json',
      '/functions/demo/openapi.json',
    );
    expect(described.status).toBe(200);
    const fn = '/functions/{app}/{fn}';
    const json = { 'Content-Type': 'application/json' };
    const one = await call('GET', fn, '/functions/demo/sum2');
    expect(one.status).toBe(200);
    expect((await call('GET', fn, '/functions/demo/nothing')).status).toBe(404);
    expect((await call('GET', '/functions/{app}', '/functions/nosuchapp')).status).toBe(404);
    const sum = await call('POST', fn, '/functions/demo/sum2', {
      headers: json,
      body: '{"x": [1, 2, 3], "y": 10}',
    });
    expect([sum.status, sum.text]).toEqual([200, '[11,12,13]']);
    for (const [path, body, headers, status] of [
      ['/functions/demo/sum2', '{"z": 1}', { ...json, ...JSON_ACCEPT }, 400],
      ['/functions/demo/nothing', '{}', { ...json, ...XML_ACCEPT }, 404],
      ['/functions/demo/sum2', 'x', { 'Content-Type': 'text/plain', ...JSON_ACCEPT }, 415],
      // Plain JSON errors, also when Accept says nothing.
      ['/functions/demo/sum2', '{"z": 1}', json, 400],
      ['/functions/demo/nothing', '{}', { ...json, ...PLAIN_ACCEPT }, 404],
    ] as const) {
      expect((await call('POST', fn, path, { headers, body })).status).toBe(status);
    }
    // Queued: the job token in each shape.
    for (const accept of [{}, PLAIN_ACCEPT, JSON_ACCEPT, XML_ACCEPT]) {
      const queued = await call('POST', fn, '/functions/demo/sum2', {
        headers: { ...json, ...accept, Prefer: 'respond-async' },
        body: '{"x": 1}',
      });
      expect(queued.status).toBe(202);
    }
  });

  it('administers the catalog and shows the configuration to an admin only', async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION, 'X-SVC-Application-Name': 'demo' };
    const file = '/admin/catalog/{section}/{file}';
    const scriptPath = '/admin/catalog/R_SCRIPTS/openapi.R';
    for (const headers of [JSON_ACCEPT, PLAIN_ACCEPT, XML_ACCEPT]) {
      const catalog = await call('GET', '/admin/catalog', '/admin/catalog', {
        headers: { ...admin, ...headers },
      });
      expect(catalog.status).toBe(200);
    }
    expect(
      (
        await call('GET', '/admin/catalog', '/admin/catalog', {
          headers: { 'X-SVC-Application-Name': 'demo', ...JSON_ACCEPT },
        })
      ).status,
    ).toBe(401);
    expect(
      (
        await call('GET', '/admin/catalog', '/admin/catalog', {
          headers: { Authorization: ADMIN_AUTHORIZATION, ...JSON_ACCEPT },
        })
      ).status,
    ).toBe(400);
    const created = await call('PUT', file, scriptPath, { headers: admin, body: 'cat("hi")\n' });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`${base}${REST}${scriptPath}`);
    expect(
      (await call('PUT', file, scriptPath, { headers: admin, body: 'cat("hello")\n' })).status,
    ).toBe(204);
    const read = await call('GET', file, scriptPath, { headers: admin });
    expect([read.status, read.headers.get('content-type'), read.text]).toEqual([
      200,
      'text/plain; charset=utf-8',
      'cat("hello")\n',
    ]);
    expect((await call('DELETE', file, scriptPath, { headers: admin })).status).toBe(204);
    expect(
      (await call('DELETE', file, scriptPath, { headers: { ...admin, ...JSON_ACCEPT } })).status,
    ).toBe(404);
    expect((await call('GET', file, scriptPath, { headers: admin })).status).toBe(404);
    expect((await call('GET', file, '/admin/catalog/SCRIPTS/a.R', { headers: admin })).status).toBe(
      400,
    );
    const configuration = await call(
      'GET',
      '/admin/system/configuration',
      '/admin/system/configuration',
      {
        headers: { Authorization: ADMIN_AUTHORIZATION },
      },
    );
    expect(configuration.status).toBe(200);
    expect(
      (await call('GET', '/admin/system/configuration', '/admin/system/configuration')).status,
    ).toBe(401);
  });

  it('manages R packages as documented', async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION, 'X-SVC-Application-Name': 'demo' };
    const one = '/admin/packages/{name}';
    const path = '/admin/packages/openapidemo';
    // tar alone: the API checks the archive; installs (or not, on webR) happen on the nodes.
    const archive = buildPackage('openapidemo', '1.0', { tar: true });
    const gzip = { ...admin, 'Content-Type': 'application/gzip' };
    const created = await call('PUT', one, path, { headers: gzip, body: archive });
    expect([created.status, created.headers.get('location')]).toEqual([
      201,
      `${base}${REST}${path}`,
    ]);
    expect((await call('PUT', one, path, { headers: gzip, body: archive })).status).toBe(204);
    for (const headers of [JSON_ACCEPT, PLAIN_ACCEPT, XML_ACCEPT]) {
      const listed = await call('GET', '/admin/packages', '/admin/packages', {
        headers: { ...admin, ...headers },
      });
      expect(listed.status).toBe(200);
    }
    const wrongName = await call('PUT', one, '/admin/packages/other', {
      headers: { ...gzip, ...JSON_ACCEPT },
      body: archive,
    });
    expect(wrongName.status).toBe(400);
    const wrongType = await call('PUT', one, path, {
      headers: { ...admin, 'Content-Type': 'text/plain', ...JSON_ACCEPT },
      body: 'x',
    });
    expect(wrongType.status).toBe(415);
    expect(
      (
        await call('GET', '/admin/packages', '/admin/packages', {
          headers: { 'X-SVC-Application-Name': 'demo', ...JSON_ACCEPT },
        })
      ).status,
    ).toBe(401);
    expect((await call('DELETE', one, path, { headers: admin })).status).toBe(204);
    expect(
      (await call('DELETE', one, path, { headers: { ...admin, ...JSON_ACCEPT } })).status,
    ).toBe(404);
  });

  it('manages R environments as documented', async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION, 'X-SVC-Application-Name': 'envdemo' };
    const asJson = { ...admin, 'Content-Type': 'application/json' };
    // The application's upload is the lockfile's only source here (no R_REPOSITORIES).
    await request(`${base}${REST}/admin/packages/openapienv`, {
      method: 'PUT',
      headers: { ...admin, 'Content-Type': 'application/gzip' },
      body: buildPackage('openapienv', '1.0', { tar: true }),
    });
    const lockfile = JSON.stringify({
      R: { Version: '4.3.2' },
      Packages: { openapienv: { Package: 'openapienv', Version: '1.0', Source: 'Repository' } },
    });
    const env = '/admin/environment';
    const created = await call('PUT', env, env, { headers: asJson, body: lockfile });
    expect(created.status).toBe(201);
    const { id } = JSON.parse(created.text) as { id: string };
    expect((await call('PUT', env, env, { headers: asJson, body: lockfile })).status).toBe(200);
    const missing = lockfile.replace(/1\.0/g, '2.0');
    expect((await call('PUT', env, env, { headers: asJson, body: missing })).status).toBe(400);
    const text = { ...admin, 'Content-Type': 'text/plain' };
    expect((await call('PUT', env, env, { headers: text, body: lockfile })).status).toBe(415);
    const huge = JSON.stringify({ Packages: {}, pad: 'x'.repeat(1_100_000) });
    expect((await call('PUT', env, env, { headers: asJson, body: huge })).status).toBe(413);
    expect((await call('GET', env, env, { headers: admin })).status).toBe(200);
    const history = `${env}/history`;
    expect((await call('GET', history, history, { headers: admin })).status).toBe(200);
    const one = `${env}/history/{id}`;
    expect((await call('GET', one, `${env}/history/${id}`, { headers: admin })).status).toBe(200);
    expect((await call('GET', one, `${env}/history/0`, { headers: admin })).status).toBe(404);
    const rollback = `${env}/history/{id}/rollback`;
    const back = await call('POST', rollback, `${env}/history/${id}/rollback`, { headers: admin });
    expect(back.status).toBe(200);
    expect(
      (await call('POST', rollback, `${env}/history/0/rollback`, { headers: admin })).status,
    ).toBe(404);
    const anonymous = { 'X-SVC-Application-Name': 'envdemo' };
    expect((await call('GET', env, env, { headers: anonymous })).status).toBe(401);
    expect(
      (await call('GET', env, env, { headers: { Authorization: ADMIN_AUTHORIZATION } })).status,
    ).toBe(400);
    expect((await call('DELETE', env, env, { headers: admin })).status).toBe(204);
    expect((await call('DELETE', env, env, { headers: admin })).status).toBe(404);
    expect((await call('GET', env, env, { headers: admin })).status).toBe(404);
  });

  it('runs flows as documented', async () => {
    const asJson = {
      'X-SVC-Application-Name': 'demo',
      'Content-Type': 'application/json',
      Accept: 'application/json',
    };
    const base64 = (text: string): string => Buffer.from(text).toString('base64');
    const flow = {
      steps: [
        { name: 'prep', files: { 'prep.R': base64('writeLines("42", "n.txt")\n') } },
        {
          name: 'report',
          needs: ['prep'],
          files: { 'report.R': base64('writeLines(readLines("prep/n.txt"), "seen.txt")\n') },
        },
      ],
    };
    const flows = '/flows';
    const one = '/flows/{app}/{flowId}';
    const accepted = await call('POST', flows, flows, {
      headers: asJson,
      body: JSON.stringify(flow),
    });
    expect(accepted.status).toBe(202);
    const { flowId } = JSON.parse(accepted.text) as { flowId: string };
    expect(accepted.headers.get('location')).toBe(`${base}${REST}/flows/demo/${flowId}`);
    const cycle = {
      steps: [
        { name: 'a', needs: ['b'], files: { 'a.R': base64('1\n') } },
        { name: 'b', needs: ['a'], files: { 'b.R': base64('1\n') } },
      ],
    };
    const refused = await call('POST', flows, flows, {
      headers: asJson,
      body: JSON.stringify(cycle),
    });
    expect(refused.status).toBe(400);
    const ended = await waitFor(
      async () => {
        const answer = await call('GET', one, `/flows/demo/${flowId}`, { headers: asJson });
        const state = (JSON.parse(answer.text) as { state: string }).state;
        return state === 'DONE' && answer;
      },
      60000,
      'the flow to end',
    );
    expect(JSON.parse(ended.text)).toMatchObject({ state: 'DONE', outcome: 'succeeded' });
    expect(
      (await call('GET', one, `/flows/demo/${randomUUID()}`, { headers: asJson })).status,
    ).toBe(404);
    expect((await call('DELETE', one, `/flows/demo/${flowId}`, { headers: asJson })).status).toBe(
      409,
    );
    const sleeper = {
      steps: [
        { name: 'slow', files: { 'slow.R': base64('Sys.sleep(120)\n') } },
        { name: 'after', needs: ['slow'], files: { 'after.R': base64('1\n') } },
      ],
    };
    const running = await call('POST', flows, flows, {
      headers: asJson,
      body: JSON.stringify(sleeper),
    });
    const runningId = (JSON.parse(running.text) as { flowId: string }).flowId;
    expect(
      (await call('DELETE', one, `/flows/demo/${runningId}`, { headers: asJson })).status,
    ).toBe(202);
  });

  it('manages schedules as documented', async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION, 'X-SVC-Application-Name': 'demo' };
    const asJson = { ...admin, 'Content-Type': 'application/json', Accept: 'application/json' };
    const list = '/admin/schedules';
    const one = '/admin/schedules/{id}';
    await request(`${base}${REST}/admin/catalog/R_SCRIPTS/openapi-tick.R`, {
      method: 'PUT',
      headers: admin,
      body: 'writeLines("tick", "tick.txt")\n',
    });
    const definition = {
      name: 'yearly',
      cron: '0 0 0 1 1 *',
      timeZone: 'Europe/Berlin',
      job: { rScript: 'openapi-tick.R', meta: { region: 'north' } },
    };
    const made = await call('POST', list, list, {
      headers: asJson,
      body: JSON.stringify(definition),
    });
    expect(made.status).toBe(201);
    const { id, selfUri } = JSON.parse(made.text) as { id: string; selfUri: string };
    expect(made.headers.get('location')).toBe(selfUri);
    const path = `${list}/${id}`;
    const refused: Array<[string, Record<string, string>, string, number]> = [
      [list, asJson, JSON.stringify({ ...definition, cron: '61 * * * *' }), 400],
      // No SMTP_URL here: a schedule's email is refused.
      [list, asJson, JSON.stringify({ ...definition, email: { to: ['team@example.com'] } }), 400],
      [list, { ...asJson, 'Content-Type': 'text/plain' }, 'x', 415],
      [list, { ...asJson, 'X-SVC-Application-Name': 'nowhere' }, JSON.stringify(definition), 404],
      [
        list,
        { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' },
        JSON.stringify(definition),
        401,
      ],
      [list, asJson, JSON.stringify({ ...definition, name: 'x'.repeat(1_100_000) }), 413],
    ];
    for (const [target, headers, body, status] of refused) {
      expect((await call('POST', list, target, { headers, body })).status).toBe(status);
    }
    expect((await call('GET', list, list, { headers: asJson })).status).toBe(200);
    expect((await call('GET', one, path, { headers: asJson })).status).toBe(200);
    expect((await call('GET', one, `${list}/42`, { headers: asJson })).status).toBe(400);
    const put = (body: unknown): Promise<Answer> =>
      call('PUT', one, path, { headers: asJson, body: JSON.stringify(body) });
    expect((await put({ ...definition, name: 'every new year' })).status).toBe(200);
    expect((await put({ ...definition, timeZone: 'Nowhere/Else' })).status).toBe(400);
    for (const action of ['pause', 'resume']) {
      const template = `${one}/${action}`;
      expect((await call('POST', template, `${path}/${action}`, { headers: asJson })).status).toBe(
        200,
      );
    }
    expect((await call('DELETE', one, path, { headers: asJson })).status).toBe(204);
    expect((await call('DELETE', one, path, { headers: asJson })).status).toBe(404);
    expect((await call('GET', one, path, { headers: asJson })).status).toBe(404);
    expect((await call('POST', `${one}/pause`, `${path}/pause`, { headers: asJson })).status).toBe(
      404,
    );
  });

  it('answers usage statistics in XML, JSON and CSV, to admins only', async () => {
    // After the jobs the earlier tests ran: at least one month of demo.
    const admin = { Authorization: ADMIN_AUTHORIZATION };
    const statistics = '/admin/statistics';
    for (const headers of [JSON_ACCEPT, XML_ACCEPT, { Accept: 'text/csv' }]) {
      const answer = await call('GET', statistics, statistics, {
        headers: { ...admin, ...headers },
      });
      expect(answer.status).toBe(200);
      expect(answer.text).toContain('demo');
    }
    const one = await call('GET', statistics, `${statistics}?application=demo&format=json`, {
      headers: admin,
    });
    expect(one.status).toBe(200);
    expect((await call('GET', statistics, statistics, { headers: JSON_ACCEPT })).status).toBe(401);
    expect(
      (
        await call('GET', statistics, `${statistics}?from=2026-13`, {
          headers: { ...admin, ...JSON_ACCEPT },
        })
      ).status,
    ).toBe(400);
    expect(
      (await call('GET', statistics, statistics, { headers: { ...admin, Accept: 'text/html' } }))
        .status,
    ).toBe(406);
  });

  it('creates, lists and revokes API keys as documented', async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION };
    const keys = '/admin/api-keys';
    const json = { ...admin, 'Content-Type': 'application/json' };
    const created = await call('POST', keys, keys, {
      headers: json,
      body: JSON.stringify({ principal: 'reporter', roles: ['analyst'] }),
    });
    expect(created.status).toBe(201);
    const { id } = JSON.parse(created.text) as { id: string };
    const bad = { principal: 'reporter', expiresAt: '2001-01-01T00:00:00Z' };
    for (const [headers, body, status] of [
      [json, JSON.stringify(bad), 400],
      [{ ...admin, 'Content-Type': 'text/plain' }, 'reporter', 415],
      [json, JSON.stringify({ principal: 'p'.repeat(70000) }), 413],
      [{ 'Content-Type': 'application/json' }, '{}', 401],
    ] as const) {
      expect((await call('POST', keys, keys, { headers, body })).status).toBe(status);
    }
    expect((await call('GET', keys, keys, { headers: admin })).status).toBe(200);
    expect((await call('GET', keys, keys)).status).toBe(401);
    const one = '/admin/api-keys/{keyId}';
    expect((await call('DELETE', one, `${keys}/${id}`, { headers: admin })).status).toBe(204);
    expect((await call('DELETE', one, `${keys}/${id}`, { headers: admin })).status).toBe(404);
  });

  it("reads and replaces an application's rights and settings as documented", async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION };
    const one = '/admin/applications/{app}';
    const path = '/admin/applications/documented';
    const json = { ...admin, 'Content-Type': 'application/json' };
    const body = JSON.stringify({ security: { userPrincipals: ['alice'] }, slots: 1 });
    // Nothing knows "documented" yet: a read and a plain PUT are 404, a PUT with
    // If-None-Match: * makes its settings.
    expect((await call('GET', one, path, { headers: admin })).status).toBe(404);
    expect((await call('PUT', one, path, { headers: json, body })).status).toBe(404);
    const created = await call('PUT', one, path, {
      headers: { ...json, 'If-None-Match': '*' },
      body,
    });
    expect(created.status).toBe(200);
    const read = await call('GET', one, path, { headers: admin });
    expect(read.status).toBe(200);
    const etag = read.headers.get('etag') ?? '';
    expect((await call('PUT', one, path, { headers: json, body })).status).toBe(428);
    const changed = await call('PUT', one, path, { headers: { ...json, 'If-Match': etag }, body });
    expect(changed.status).toBe(200);
    for (const [headers, sent, status] of [
      [{ ...json, 'If-Match': etag }, body, 412],
      [{ ...json, 'If-None-Match': '*' }, body, 412],
      [{ ...json, 'If-Match': '"2"' }, '{"slots":0}', 400],
      [{ ...admin, 'Content-Type': 'text/plain', 'If-Match': '"2"' }, 'x', 415],
      [{ ...json, 'If-Match': '"2"' }, JSON.stringify({ settings: { x: 'p'.repeat(70000) } }), 413],
      [{ 'Content-Type': 'application/json', 'If-Match': '"2"' }, body, 401],
    ] as const) {
      expect((await call('PUT', one, path, { headers, body: sent })).status).toBe(status);
    }
    const list = await call('GET', '/admin/applications', '/admin/applications', {
      headers: admin,
    });
    expect(list.status).toBe(200);
    expect((await call('GET', '/admin/applications', '/admin/applications')).status).toBe(401);
    expect(
      (await call('GET', one, '/admin/applications/bad-name', { headers: admin })).status,
    ).toBe(400);
    expect((await call('GET', one, path)).status).toBe(401);
  });

  it('answers the audit trail in XML, JSON and CSV, to admins only', async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION };
    const audit = '/admin/audit';
    for (const headers of [JSON_ACCEPT, XML_ACCEPT, { Accept: 'text/csv' }]) {
      const answer = await call('GET', audit, `${audit}?action=job.submitted&limit=2`, {
        headers: { ...admin, ...headers },
      });
      expect(answer.status).toBe(200);
      expect(answer.text).toContain('job.submitted');
    }
    expect((await call('GET', audit, `${audit}?limit=0`, { headers: admin })).status).toBe(400);
    expect((await call('GET', audit, audit, { headers: JSON_ACCEPT })).status).toBe(401);
    expect(
      (await call('GET', audit, audit, { headers: { ...admin, Accept: 'text/html' } })).status,
    ).toBe(406);
  });

  it("answers the operator console's routes as documented", async () => {
    const admin = { Authorization: ADMIN_AUTHORIZATION, ...PLAIN_ACCEPT };
    const json = { ...admin, 'Content-Type': 'application/json' };
    expect((await call('GET', '/admin/me', '/admin/me', { headers: admin })).status).toBe(200);
    expect((await call('GET', '/admin/me', '/admin/me', { headers: PLAIN_ACCEPT })).status).toBe(
      401,
    );
    const failed = await submit('stop("documented failure")');
    await waitFor(async () => (await stateOf(failed)) === 'DONE', 60000, 'the failure');
    const list = '/admin/jobs';
    for (const [query, status] of [
      ['?state=FAILED&limit=1', 200],
      ['?application=demo&kind=script&source=rest', 200],
      ['?state=LOST', 400],
    ] as const) {
      expect((await call('GET', list, `${list}${query}`, { headers: admin })).status).toBe(status);
    }
    const one = '/admin/jobs/{app}/{jobId}';
    const unknown = randomUUID();
    expect((await call('GET', one, `${list}/demo/${failed}`, { headers: admin })).status).toBe(200);
    expect((await call('GET', one, `${list}/demo/${unknown}`, { headers: admin })).status).toBe(
      404,
    );
    expect((await call('GET', one, `${list}/demo/not-a-job`, { headers: admin })).status).toBe(400);
    const retry = '/admin/jobs/{app}/{jobId}/retry';
    const post = { method: 'POST', headers: admin };
    expect((await call('POST', retry, `${list}/demo/${failed}/retry`, post)).status).toBe(202);
    expect((await call('POST', retry, `${list}/demo/${failed}/retry`, post)).status).toBe(409);
    expect((await call('POST', retry, `${list}/demo/${unknown}/retry`, post)).status).toBe(404);
    expect((await call('POST', retry, `${list}/demo/x/retry`, post)).status).toBe(400);
    await waitFor(async () => (await stateOf(failed)) === 'DONE', 60000, 'the retried failure');
    /** The statuses of a bulk action's bodies, each posted as JSON. */
    const bulkStatuses = async (path: string, bodies: object[]): Promise<number[]> => {
      const statuses: number[] = [];
      for (const body of bodies) {
        const sent = { method: 'POST', headers: json, body: JSON.stringify(body) };
        statuses.push((await call('POST', path, path, sent)).status);
      }
      return statuses;
    };
    const bulk = [
      { application: 'demo', dryRun: true },
      { application: 'demo', limit: 1 },
      { state: 'FAILED' },
    ];
    expect(await bulkStatuses('/admin/jobs/retry', bulk)).toEqual([200, 200, 400]);
    await waitFor(
      async () => (await stateOf(failed)) === 'DONE',
      60000,
      'the bulk-retried failure',
    );
    const files = '/admin/jobs/{app}/{jobId}/files/{fileId}';
    const kept = JSON.parse(
      (await call('GET', one, `${list}/demo/${failed}`, { headers: admin })).text,
    ) as {
      inputFiles: { files: Array<{ uri: string }> };
    };
    const fileUri = new URL(kept.inputFiles.files[0].uri).pathname.replace(REST, '');
    for (const [path, status] of [
      [fileUri, 200],
      [fileUri.replace(/\d+$/, '999999'), 404],
      [fileUri.replace(/\d+$/, 'x'), 400],
    ] as const) {
      expect((await call('GET', files, path, { headers: admin })).status).toBe(status);
    }
    const cancelOne = '/admin/jobs/{app}/{jobId}/cancel';
    const sleeper = await submit(SLEEPER);
    for (const [path, status] of [
      [`${list}/demo/${sleeper}/cancel`, 200],
      [`${list}/demo/${sleeper}/cancel`, 409],
      [`${list}/demo/${unknown}/cancel`, 404],
      [`${list}/demo/x/cancel`, 400],
    ] as const) {
      expect((await call('POST', cancelOne, path, post)).status).toBe(status);
    }
    expect((await call('POST', cancelOne, `${list}/demo/${sleeper}/cancel`)).status).toBe(401);
    const cancels = [{ application: 'demo', state: 'QUEUED', limit: 1 }, { limit: 0 }];
    expect(await bulkStatuses('/admin/jobs/cancel', cancels)).toEqual([200, 400]);
    expect(
      (await call('GET', '/admin/overview', '/admin/overview', { headers: admin })).status,
    ).toBe(200);
    expect((await call('GET', '/admin/events', '/admin/events', { headers: admin })).status).toBe(
      406,
    );
  });

  it('answers health and node information', async () => {
    const check = await call('GET', '/system/health/check', '/system/health/check');
    expect([check.status, check.text]).toEqual([200, 'OK']);
    expect((await call('GET', '/system/health/live', '/system/health/live')).status).toBe(200);
    expect((await call('GET', '/system/health/ready', '/system/health/ready')).status).toBe(200);
    for (const headers of [JSON_ACCEPT, PLAIN_ACCEPT, XML_ACCEPT]) {
      expect((await call('GET', '/system/info', '/system/info', { headers })).status).toBe(200);
    }
    expect(
      (await call('GET', '/system/info', '/system/info', { headers: { Accept: 'text/html' } }))
        .status,
    ).toBe(406);
  });

  it('has called every operation of the document', () => {
    const paths = checker.document.paths as Record<string, Record<string, unknown>>;
    const documented = Object.entries(paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(documented.filter((operation) => !exercised.has(operation))).toEqual([]);
  });
});
