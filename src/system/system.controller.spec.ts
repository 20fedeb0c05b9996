import { controllerOf } from '../../test/support/controller-testing';
import { SystemController } from './system.controller';
import { NodeInformationRepresentation } from './system-view';
import { SystemService } from './system.service';

describe('SystemController', () => {
  let system: Record<string, jest.Mock>;
  let controller: SystemController;

  beforeEach(async () => {
    system = { check: jest.fn(), ready: jest.fn(), information: jest.fn().mockResolvedValue({}) };
    controller = await controllerOf(SystemController, [
      { provide: SystemService, useValue: system },
    ]);
  });

  it('answers the health check OK with 200, else ERROR with 500', async () => {
    system.check.mockResolvedValueOnce({ healthy: true }).mockResolvedValueOnce({ healthy: false });
    expect(await controller.check()).toMatchObject({ status: 200, body: 'OK' });
    expect(await controller.check()).toMatchObject({ status: 500, body: 'ERROR' });
  });

  it('is live without asking anything', () => {
    expect(controller.live()).toEqual({ status: 'up' });
    expect(system.check).not.toHaveBeenCalled();
  });

  it('answers ready, or 503 with the reason', async () => {
    system.ready
      .mockResolvedValueOnce({ ready: true })
      .mockResolvedValueOnce({ ready: false, reason: 'shutting down' });
    expect(await controller.ready()).toMatchObject({ status: undefined, body: { status: 'up' } });
    expect(await controller.ready()).toMatchObject({
      status: 503,
      body: { status: 'down', reason: 'shutting down' },
    });
  });

  it("answers the node's information", async () => {
    expect(await controller.info()).toBeInstanceOf(NodeInformationRepresentation);
    expect(system.information).toHaveBeenCalled();
  });
});
