/**
 * A flow on every backend: the example of docs/flows.md (one step, three in parallel, one after
 * them) produces the report from the three fits, with nothing through the client.
 *
 * @ci-pass embedded
 */
import { CatalogService } from '../../src/catalog/catalog.service';
import { basicUsersEnvironment } from '../support/admin-auth';
import {
  APP,
  ended,
  EXAMPLE,
  FUNCTIONS,
  readFlow,
  step,
  submitted,
  valueOf,
} from '../support/flows';
import { startTestService, TestService } from '../support/test-service';

describe('a flow', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService(
      await basicUsersEnvironment({
        [APP]: { userPrincipals: ['alice'], functionCallAllowed: true },
      }),
    );
    await service.app
      .get(CatalogService)
      .putFile(APP, 'R_FUNCTIONS', 'flow.R', Buffer.from(FUNCTIONS));
  });
  afterAll(async () => {
    await service.stop();
  });

  it('runs the example: the report gets the three fits, nothing through the client', async () => {
    const location = await submitted(service.url, EXAMPLE);
    const waitingAtFirst = await readFlow(location);
    expect(waitingAtFirst.steps.map((s) => s.name)).toEqual([
      'prep',
      'fit1',
      'fit2',
      'fit3',
      'report',
    ]);
    expect(step(waitingAtFirst, 'report')).toMatchObject({ state: 'QUEUED', waiting: true });
    const flow = await ended(location);
    expect(flow).toMatchObject({ state: 'DONE', outcome: 'succeeded', decidedBy: 'report' });
    for (const s of flow.steps) {
      expect([s.name, s.state, s.outcome, s.attempts]).toEqual([s.name, 'DONE', 'succeeded', 1]);
    }
    // mean(1:100) = 50.5, times k.
    expect(await valueOf(step(flow, 'report'))).toEqual({
      estimates: { fit1: 50.5, fit2: 101, fit3: 151.5 },
      missing: [],
    });
  });
});
