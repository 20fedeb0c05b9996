import { RestApiConfig } from '../config/config-slices';
import { RestLinks } from '../common/public-uri';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { FlowsController } from './flows.controller';
import { FlowsService } from './flows.service';

const FLOW_ID = '6ea67131-c06e-496c-a829-6e92a4eb3b7c';
const TOKEN = {
  flowId: FLOW_ID,
  applicationName: 'app',
  submissionTime: new Date('2026-12-08T01:00:00Z'),
  flowUri: `${BASE}/svc/api/rest/flows/app/${FLOW_ID}`,
};
const VIEW = { flowId: FLOW_ID, state: 'QUEUED', steps: [] };

describe('FlowsController', () => {
  let flows: Record<string, jest.Mock>;
  let controller: FlowsController;
  const req = () => fakeRequest({ headers: { 'X-SVC-Application-Name': 'app' } });

  beforeEach(async () => {
    flows = {
      submit: jest.fn().mockResolvedValue(TOKEN),
      get: jest.fn().mockResolvedValue(VIEW),
      cancel: jest.fn().mockResolvedValue(true),
    };
    controller = await controllerOf(FlowsController, [
      { provide: RestApiConfig, useValue: { publicBaseUrl: BASE } },
      { provide: FlowsService, useValue: flows },
    ]);
  });

  it('submits the checked steps: 202, the token, its Location', async () => {
    const answer = await controller.submit(req(), {
      steps: [{ name: 'prep', function: 'prepare', arguments: { n: 1 } }],
    });
    expect(flows.submit).toHaveBeenCalledWith(
      'app',
      [expect.objectContaining({ name: 'prep', kind: 'function', argumentsJson: '{"n":1}' })],
      null,
      new RestLinks(BASE),
    );
    expect(answer).toMatchObject({
      status: 202,
      body: TOKEN,
      headers: { Location: TOKEN.flowUri },
    });
  });

  it('refuses a flow that cannot be before the service sees it', async () => {
    const error = await apiErrorOf(() =>
      controller.submit(req(), { steps: [{ name: 'a', needs: ['a'], function: 'f' }] }),
    );
    expect(error).toEqual({
      status: 400,
      message: 'step "a": its needs make a cycle: it needs itself through them.',
    });
    expect(flows.submit).not.toHaveBeenCalled();
  });

  it('reads a flow; an id that is no UUID is a 400', async () => {
    expect(await controller.get(req(), 'app', FLOW_ID.toUpperCase())).toBe(VIEW);
    expect(flows.get).toHaveBeenCalledWith('app', FLOW_ID, new RestLinks(BASE));
    expect(await apiErrorOf(() => controller.get(req(), 'app', 'not-a-flow'))).toEqual({
      status: 400,
      message: '"not-a-flow" is not a flow id (a UUID).',
    });
    expect(await apiErrorOf(() => controller.cancel(req(), 'app', '42'))).toMatchObject({
      status: 400,
    });
    expect(flows.get).toHaveBeenCalledTimes(1);
  });

  it('cancels: 202 with the flow, 409 when it had ended', async () => {
    expect(await controller.cancel(req(), 'app', FLOW_ID)).toMatchObject({
      status: 202,
      body: VIEW,
    });
    flows.cancel.mockResolvedValue(false);
    expect(await controller.cancel(req(), 'app', FLOW_ID)).toMatchObject({
      status: 409,
      body: VIEW,
    });
    expect(flows.cancel).toHaveBeenCalledWith('app', FLOW_ID, null);
  });
});
