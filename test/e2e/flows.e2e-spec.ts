/**
 * Flows (docs/flows.md): one request of steps that are jobs, each released by the queue when the
 * steps it needs have ended, with their results as its arguments; failure policies; cancel; the
 * refusals that store nothing; fan-in exactly once on two nodes.
 */
import { DataSource } from 'typeorm';
import { startService, RunningService } from '../../src/bootstrap';
import { CatalogService } from '../../src/catalog/catalog.service';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { loadConfig } from '../../src/config/app-config';
import { FLOW_MAX_STEPS } from '../../src/flows/flow-definition';
import { ALICE, BOB, basicUsersEnvironment } from '../support/admin-auth';
import { request, waitForResult } from '../support/rest-client';
import {
  APP,
  ended,
  EXAMPLE,
  FUNCTIONS,
  postFlow,
  readFlow,
  step,
  submitted,
  valueOf,
} from '../support/flows';
import { zipEntries } from '../support/zip-fixtures';
import {
  SERVER_DATABASE_URL,
  startTestService,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';

async function storedRows(service: RunningService): Promise<Record<string, number>> {
  const [row] = await service.app.get(DataSource).query<Record<string, number>[]>(
    `SELECT (SELECT count(*)::int FROM job) AS jobs, (SELECT count(*)::int FROM flow) AS flows,
            (SELECT count(*)::int FROM flow_step) AS steps, (SELECT count(*)::int FROM job_need) AS needs`,
  );
  return row;
}

describe('flows', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        [APP]: {
          userPrincipals: ['alice'],
          functionCallAllowed: true,
          scriptSubmissionAllowed: true,
        },
        other: { userPrincipals: ['bob'], functionCallAllowed: true },
      })),
      FUNCTION_TIMEOUT_SECONDS: '90',
      RETRY_BACKOFF_MS: '100',
    });
    await service.app
      .get(CatalogService)
      .putFile(APP, 'R_FUNCTIONS', 'flow.R', Buffer.from(FUNCTIONS));
  });
  afterAll(async () => {
    await service.stop();
  });

  it('gives a script step the results of the steps it needs, a folder each', async () => {
    const script = (code: string): Record<string, string> => ({
      'step.R': Buffer.from(code).toString('base64'),
    });
    const location = await submitted(service.url, {
      steps: [
        { name: 'prep', function: 'prepare', arguments: { n: 3 } },
        {
          name: 'summary',
          needs: ['prep'],
          files: script(
            'dir.create("sub"); writeLines(paste("prep said", readLines("prep/result.json")), "sub/out.txt")',
          ),
        },
        { name: 'broken1', needs: ['prep'], function: 'broken', onFailure: 'continue' },
        {
          name: 'final',
          needs: ['summary', 'broken1'],
          files: script(
            'writeLines(c(readLines("summary/sub/out.txt"), paste("broken1 given:", dir.exists("broken1"))), "final.txt")',
          ),
        },
      ],
    });
    const flow = await ended(location);
    expect(flow).toMatchObject({ outcome: 'succeeded', decidedBy: 'final' });
    const meta = await waitForResult(step(flow, 'final').resultUri, {
      Accept: 'application/vnd.svc+json',
      ...ALICE,
    });
    const dataUri = (JSON.parse(meta.text) as { result: { dataUri: string } }).result.dataUri;
    const files = await zipEntries((await request(dataUri, { headers: ALICE })).body);
    // Only what the step wrote: its inputs' folders are not in its result.
    expect([...files.keys()]).toEqual(['final.txt']);
    expect(files.get('final.txt')?.toString()).toBe(
      'prep said {"n":3,"values":[1,2,3]}\nbroken1 given: FALSE\n',
    );
  });

  it('streams a large needed result (kept in pieces) into the folder of the step that needs it', async () => {
    const script = (code: string): Record<string, string> => ({
      'step.R': Buffer.from(code).toString('base64'),
    });
    const location = await submitted(service.url, {
      steps: [
        {
          name: 'big',
          files: script('set.seed(1); writeBin(as.raw(sample(0:255, 3e6, TRUE)), "big.bin")'),
        },
        {
          name: 'use',
          needs: ['big'],
          files: script('writeLines(as.character(file.size("big/big.bin")), "size.txt")'),
        },
      ],
    });
    const flow = await ended(location);
    expect(flow).toMatchObject({ outcome: 'succeeded', decidedBy: 'use' });
    const [stored] = await service.app
      .get(DataSource)
      .query<Array<{ chunked: boolean }>>('SELECT chunked FROM result WHERE job_id = $1', [
        step(flow, 'big').jobId,
      ]);
    expect(stored.chunked).toBe(true);
    const meta = await waitForResult(step(flow, 'use').resultUri, {
      Accept: 'application/vnd.svc+json',
      ...ALICE,
    });
    const dataUri = (JSON.parse(meta.text) as { result: { dataUri: string } }).result.dataUri;
    const files = await zipEntries((await request(dataUri, { headers: ALICE })).body);
    expect(files.get('size.txt')?.toString()).toBe('3e+06\n');
  });

  it('cancels the dependants of a failed step and fails the flow, naming the step', async () => {
    const location = await submitted(service.url, {
      steps: [
        { name: 'prep', function: 'prepare', arguments: { n: 4 } },
        { name: 'fit1', needs: ['prep'], function: 'broken' },
        { name: 'fit2', needs: ['prep'], function: 'fit', arguments: { k: 2 } },
        { name: 'report', needs: ['fit1', 'fit2'], function: 'report' },
        { name: 'after', needs: ['report'], function: 'report' },
      ],
    });
    const flow = await ended(location);
    expect(flow).toMatchObject({ outcome: 'failed', decidedBy: 'fit1' });
    expect(flow.steps.map((s) => [s.name, s.outcome])).toEqual([
      ['prep', 'succeeded'],
      ['fit1', 'failed'],
      ['fit2', 'succeeded'],
      ['report', 'cancelled'],
      ['after', 'cancelled'],
    ]);
    // The cancelled steps never ran.
    expect(step(flow, 'report').attempts).toBe(0);
  });

  it('runs the dependants of a step that may fail without it, telling them what is missing', async () => {
    const location = await submitted(service.url, {
      steps: [
        { name: 'prep', function: 'prepare', arguments: { n: 4 } },
        { name: 'fit1', needs: ['prep'], function: 'broken', onFailure: 'continue' },
        { name: 'fit2', needs: ['prep'], function: 'fit', arguments: { k: 2 } },
        { name: 'report', needs: ['fit1', 'fit2'], function: 'report' },
      ],
    });
    const flow = await ended(location);
    expect(flow).toMatchObject({ outcome: 'succeeded', decidedBy: 'report' });
    expect(step(flow, 'fit1').outcome).toBe('failed');
    expect(await valueOf(step(flow, 'report'))).toEqual({
      estimates: { fit2: 5 },
      missing: ['fit1', 'fit3'],
    });
  });

  it('runs a failing step again as often as it asks, then applies its policy', async () => {
    const location = await submitted(service.url, {
      steps: [
        { name: 'prep', function: 'prepare', arguments: { n: 4 } },
        { name: 'fit1', needs: ['prep'], function: 'broken', retries: 2 },
        { name: 'report', needs: ['fit1'], function: 'report' },
      ],
    });
    const flow = await ended(location);
    expect(flow).toMatchObject({ outcome: 'failed', decidedBy: 'fit1' });
    expect(step(flow, 'fit1')).toMatchObject({ outcome: 'failed', attempts: 3 });
    expect(step(flow, 'report').outcome).toBe('cancelled');
  });

  it('cancels every step not ended, the running one too', async () => {
    const location = await submitted(service.url, {
      steps: [
        { name: 'prep', function: 'prepare', arguments: { n: 4 } },
        { name: 'fit1', needs: ['prep'], function: 'slow' },
        { name: 'report', needs: ['fit1'], function: 'report' },
      ],
    });
    await waitFor(
      async () => step(await readFlow(location), 'fit1').state === 'RUNNING',
      60_000,
      'the slow step to run',
    );
    const cancel = await request(location, {
      method: 'DELETE',
      headers: { Accept: 'application/json', ...ALICE },
    });
    expect(cancel.status).toBe(202);
    const flow = await ended(location);
    expect(flow).toMatchObject({ outcome: 'cancelled' });
    expect(flow.steps.map((s) => [s.name, s.outcome])).toEqual([
      ['prep', 'succeeded'],
      ['fit1', 'cancelled'],
      ['report', 'cancelled'],
    ]);
    const again = await request(location, {
      method: 'DELETE',
      headers: { Accept: 'application/json', ...ALICE },
    });
    expect(again.status).toBe(409);
  });

  it('refuses a bad flow with a 400 naming the step, and stores nothing', async () => {
    const before = await storedRows(service);
    const refusals: Array<[unknown, RegExp]> = [
      [
        {
          steps: [
            { name: 'a', needs: ['c'], function: 'fit' },
            { name: 'b', needs: ['a'], function: 'fit' },
            { name: 'c', needs: ['b'], function: 'fit' },
          ],
        },
        /step "[abc]": its needs make a cycle/,
      ],
      [
        { steps: [{ name: 'a', needs: ['nowhere'], function: 'fit' }] },
        /step "a": it needs "nowhere", which is no step/,
      ],
      [
        {
          steps: [
            { name: 'a', function: 'prepare' },
            { name: 'a', function: 'prepare' },
          ],
        },
        /step "a": another step has the same name/,
      ],
      [
        {
          steps: [
            { name: 'prep', function: 'prepare', arguments: { n: 1 } },
            { name: 'later', needs: ['prep'], function: 'nosuchfunction' },
          ],
        },
        /step "later": application flows exports no function nosuchfunction/,
      ],
      [
        {
          steps: Array.from({ length: FLOW_MAX_STEPS + 1 }, (_, i) => ({
            name: `s${i}`,
            function: 'prepare',
          })),
        },
        /at most 100 steps/,
      ],
    ];
    for (const [flow, message] of refusals) {
      const answer = await postFlow(service.url, flow);
      const refusal = JSON.parse(answer.text) as { message: string };
      expect([answer.status, refusal.message]).toEqual([400, expect.stringMatching(message)]);
    }
    // An application the caller may not use: the intake's refusal, for the first step.
    const foreign = await postFlow(service.url, EXAMPLE, BOB);
    expect(foreign.status).toBe(403);
    expect((JSON.parse(foreign.text) as { message: string }).message).toMatch(/^step "prep": /);
    expect(await storedRows(service)).toEqual(before);
  });

  it("shows and cancels a flow only to those who may read and cancel the application's jobs", async () => {
    const location = await submitted(service.url, {
      steps: [{ name: 'prep', function: 'prepare', arguments: { n: 1 } }],
    });
    for (const method of ['GET', 'DELETE']) {
      const asBob = await request(location, {
        method,
        headers: { Accept: 'application/json', ...BOB },
      });
      expect([method, asBob.status]).toEqual([method, 404]);
      const anonymous = await request(location, {
        method,
        headers: { Accept: 'application/json' },
      });
      expect([method, anonymous.status]).toEqual([method, 401]);
    }
    expect((await ended(location)).outcome).toBe('succeeded');
  });

  const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

  // Two nodes need a shared database server; the embedded database belongs to one process.
  describeWithServer('on two nodes', () => {
    let second: RunningService;

    beforeAll(async () => {
      const config = loadConfig(
        testEnvironment(service.database, {
          ...(await basicUsersEnvironment({
            [APP]: { userPrincipals: ['alice'], functionCallAllowed: true },
          })),
          FUNCTION_TIMEOUT_SECONDS: '90',
        }),
      );
      second = await startService(config, new PinoLoggerService(config.logLevel));
    });
    afterAll(async () => {
      await second.close();
    });

    it('starts a fan-in exactly once when the steps it needs end together', async () => {
      const fanIn = {
        steps: [
          { name: 'prep', function: 'prepare', arguments: { n: 10 } },
          ...[1, 2, 3].map((k) => ({
            name: `fit${k}`,
            needs: ['prep'],
            function: 'fit',
            arguments: { k },
          })),
          { name: 'report', needs: ['fit1', 'fit2', 'fit3'], function: 'report' },
        ],
      };
      const locations = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          submitted(i % 2 === 0 ? service.url : (second.url ?? ''), fanIn),
        ),
      );
      const flows = await Promise.all(locations.map(ended));
      const reports = flows.map((flow) => step(flow, 'report'));
      for (const flow of flows) {
        expect(flow.outcome).toBe('succeeded');
      }
      // Each report ran once: one attempt, one usage record, one released job.
      expect(reports.map((r) => r.attempts)).toEqual(reports.map(() => 1));
      const usage = await service.app
        .get(DataSource)
        .query<Array<{ n: number }>>(
          'SELECT count(*)::int AS n FROM job_usage WHERE job_id = ANY ($1::uuid[])',
          [reports.map((r) => r.jobId)],
        );
      expect(usage[0].n).toBe(reports.length);
    });
  });
});
