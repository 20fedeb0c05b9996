/**
 * /process: function calls answered at once on warm R sessions.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CatalogService } from '../../src/catalog/catalog.service';
import { ProcessService } from '../../src/process/process.service';
import { RSessionPool } from '../../src/r-engine/sessions/r-session-pool';
import { parseXml, REST, request } from '../support/rest-client';
import {
  functionCallEngine,
  LEAVING_FUNCTIONS,
  loadTestCatalog,
  post,
  waitUntilBusy,
} from '../support/function-calls';
import { runSvc } from '../support/service-process';
import { startTestService, TestService, testEnvironment, waitFor } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';

/** Sessions to kill exist with native R only; webR runs in the service's own process. */
const itWithSessions = process.env.R_ENGINE === 'webr' ? it.skip : it;
const DEMO = { 'X-SVC-Application-Name': 'demo' };
const CALLS = { 'X-SVC-Application-Name': 'calls' };

describe('POST /process (SPEC §5.3)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      FUNCTION_TIMEOUT_SECONDS: '5',
      PROCESS_MAX_CONCURRENT: '1',
      PROCESS_MAX_QUEUED: '1',
    });
    await loadTestCatalog(service);
  });
  afterAll(async () => {
    await service.stop();
  });

  it('200 with the function’s JSON string', async () => {
    const answer = await post(
      service,
      'process',
      'application/json',
      '{"RFunction":"combn","n":5,"k":2}',
    );
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    const combinations = (JSON.parse(answer.text) as { combinations: number[][] }).combinations;
    expect(combinations).toHaveLength(10);
    expect(combinations[3]).toEqual([1, 5]);
  });

  it('200 with the function’s XML string, whatever Accept asks for', async () => {
    const answer = await post(
      service,
      'process',
      'application/xml',
      '<call RFunction="describe" x="4"/>',
      {
        ...DEMO,
        Accept: 'application/vnd.svc+json',
      },
    );
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/xml/);
    expect(parseXml(answer.text).describeResult).toMatchObject({ n: '1', mean: '4' });
  });

  it('400 with the flat JSON error when the JSON call fails', async () => {
    const answer = await post(service, 'process', 'application/json', 'error', CALLS);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    const error = JSON.parse(answer.text) as Record<string, string>;
    expect(error).toMatchObject({
      applicationName: 'calls',
      errorMessage: 'the analysis failed: bad input',
    });
    expect(error.jobId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number.isNaN(Date.parse(error.submissionTime))).toBe(false);
  });

  it('400 with a valid errorResult when the XML call fails (here: no svcXmlService)', async () => {
    const answer = await post(service, 'process', 'application/xml', '<call/>', CALLS);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^application\/xml/);
    expect((await validateAgainstSchema(answer.text, 'rest-data.xsd')).errors).toEqual([]);
    expect(parseXml(answer.text).errorResult.errorMessage).toBe(
      'application calls defines no svcXmlService function',
    );
  });

  it('400 for a result that is not one string, and for a timeout', async () => {
    const notString = await post(service, 'process', 'application/json', 'number', CALLS);
    expect(notString.status).toBe(400);
    expect(JSON.parse(notString.text)).toMatchObject({
      errorMessage: expect.stringMatching(/not one character string/) as string,
    });
    const timeout = await post(service, 'process', 'application/json', 'sleep', CALLS);
    expect(timeout.status).toBe(400);
    expect(JSON.parse(timeout.text)).toMatchObject({
      errorMessage: expect.stringMatching(/time limit of 5 s/) as string,
    });
  });

  it('415 for another content type, with the error body', async () => {
    const answer = await post(service, 'process', 'text/plain', 'x', DEMO);
    expect(answer.status).toBe(415);
    expect(parseXml(answer.text).error.status).toBe('415');
  });

  it('400 for a missing or invalid application name, and for an empty body', async () => {
    expect((await post(service, 'process', 'application/json', '{}', {})).status).toBe(400);
    const invalid = await post(service, 'process', 'application/json', '{}', {
      'X-SVC-Application-Name': 'no-dashes',
    });
    expect(invalid.status).toBe(400);
    // A request that sent JSON gets its error in plain JSON; one that sent XML, the XML default.
    expect(invalid.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(JSON.parse(invalid.text)).toMatchObject({ status: 400, error: 'Bad Request' });
    const xml = await post(service, 'process', 'application/xml', '', DEMO);
    expect([xml.status, parseXml(xml.text).error.status]).toEqual([400, '400']);
    expect((await post(service, 'process', 'application/json', '', DEMO)).status).toBe(400);
  });

  it('405 with Allow: POST for other methods', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const answer = await request(`${service.url}${REST}/process`, { method, headers: DEMO });
      expect(answer.status).toBe(405);
      expect(answer.headers.get('allow')).toBe('POST');
    }
  });

  it('503 with Retry-After beyond its running and queued calls; the others still answer', async () => {
    // One call runs (PROCESS_MAX_CONCURRENT=1), one waits (PROCESS_MAX_QUEUED=1): a third is refused.
    const running = post(service, 'process', 'application/json', 'sleep', CALLS);
    await waitUntilBusy(service);
    const queued = post(service, 'process', 'application/json', 'queued', CALLS);
    const processService = service.app.get(ProcessService);
    await waitFor(
      () => Promise.resolve(processService.stats().queued === 1),
      10000,
      'the second call to wait',
    );
    const refused = await post(service, 'process', 'application/json', 'refused', CALLS);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(JSON.parse(refused.text)).toMatchObject({ status: 503 });
    expect((await running).status).toBe(400); // the sleep hits the 5 s time limit
    const answer = await queued;
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('echo:queued');
  });

  it('reloads an application’s functions when its catalog section changes', async () => {
    const version = (n: number): Buffer =>
      Buffer.from(`svcJsonService <- function(payload) "version ${n}"\n`);
    const catalog = service.app.get(CatalogService);
    await catalog.putFile('reload', 'R_FUNCTIONS', 'f.R', version(1));
    const call = async (): Promise<string> =>
      (
        await post(service, 'process', 'application/json', '{}', {
          'X-SVC-Application-Name': 'reload',
        })
      ).text;
    expect(await call()).toBe('version 1');
    // Another process changes the catalog, as an operator would (on the embedded database
    // through the service's socket).
    const dir = mkdtempSync(join(tmpdir(), 'svc-catalog-'));
    try {
      mkdirSync(join(dir, 'reload', 'R_FUNCTIONS'), { recursive: true });
      writeFileSync(join(dir, 'reload', 'R_FUNCTIONS', 'f.R'), version(2));
      const loaded = await runSvc(['catalog', 'load', dir], testEnvironment(service.database));
      expect(loaded.output).toMatch(/updated reload\/R_FUNCTIONS\/f.R/);
      expect(loaded.code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await waitFor(async () => (await call()) === 'version 2', 10000, 'the new version');
  });

  itWithSessions(
    'an application sees nothing another application left in R (globals, options, files …)',
    async () => {
      const catalog = service.app.get(CatalogService);
      for (const app of ['leaver', 'looker']) {
        await catalog.putFile(app, 'R_FUNCTIONS', 'leave.R', Buffer.from(LEAVING_FUNCTIONS));
      }
      const as = async (app: string, body: string): Promise<string> => {
        const answer = await post(service, 'process', 'application/json', body, {
          'X-SVC-Application-Name': app,
        });
        expect(answer.status).toBe(200);
        return answer.text;
      };
      const paths = await as('leaver', 'leave');
      expect(await as('leaver', `look ${paths}`)).toBe(
        'global,fun,option,env,namespace,cwdFile,files',
      );
      for (let i = 0; i < 3; i++) {
        expect(await as('looker', `look ${paths}`)).toBe('');
      }
    },
  );

  itWithSessions(
    'a session killed mid-call: that call fails cleanly (400), the next one succeeds',
    async () => {
      const engine = functionCallEngine(service);
      if (!(engine instanceof RSessionPool)) {
        throw new Error('R_ENGINE is not webr, so the engine should be the native session pool');
      }
      const running = post(service, 'process', 'application/json', 'sleep', CALLS);
      // Killed before R acknowledged it, the call would rightly run again on another session.
      await waitFor(() => Promise.resolve(engine.runningCalls() > 0), 30000, 'R running the call');
      const before = engine.pids();
      for (const pid of before) {
        process.kill(-pid, 'SIGKILL');
      }
      const answer = await running;
      expect(answer.status).toBe(400);
      expect((JSON.parse(answer.text) as Record<string, string>).errorMessage).toMatch(
        /R session ended/,
      );
      const after = await post(service, 'process', 'application/json', 'again', CALLS);
      expect(after.status).toBe(200);
      expect(after.text).toBe('echo:again');
      expect(engine.pids().some((pid) => before.includes(pid))).toBe(false);
    },
  );
});
