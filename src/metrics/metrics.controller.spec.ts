import { AdminConfig } from '../config/config-slices';
import { apiErrorOf, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { MetricsController } from './metrics.controller';
import { MetricsService } from './metrics.service';

describe('MetricsController', () => {
  const metrics = {
    render: jest.fn().mockResolvedValue('svc_up 1\n'),
    contentType: 'text/plain; version=0.0.4',
  };
  const controllerWith = (config: Partial<AdminConfig>) =>
    controllerOf(MetricsController, [
      { provide: MetricsService, useValue: metrics },
      { provide: AdminConfig, useValue: config },
    ]);

  beforeEach(() => metrics.render.mockClear());

  it('answers the metrics in their own type when they are open', async () => {
    const controller = await controllerWith({ metricsAccess: 'open', metricsToken: null });
    const answer = await controller.scrape(fakeRequest());
    expect(answer.body).toBe('svc_up 1\n');
    expect(answer.headers).toEqual({ 'Content-Type': 'text/plain; version=0.0.4' });
  });

  it('takes the token as a bearer token, and answers 401 with a challenge without it', async () => {
    const controller = await controllerWith({ metricsAccess: 'token', metricsToken: 's3cret' });
    const ok = await controller.scrape(
      fakeRequest({ headers: { Authorization: 'Bearer s3cret' } }),
    );
    expect(ok.body).toBe('svc_up 1\n');
    const error = await apiErrorOf(() =>
      controller.scrape(fakeRequest({ headers: { Authorization: 'Bearer wrong' } })),
    );
    expect(error.status).toBe(401);
    expect(metrics.render).toHaveBeenCalledTimes(1);
  });
});
