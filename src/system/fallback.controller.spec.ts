import { apiErrorOf, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { FallbackController } from './fallback.controller';

describe('FallbackController', () => {
  it('answers 404 naming the method and path', async () => {
    const controller = await controllerOf(FallbackController, []);
    const req = fakeRequest({ method: 'PATCH', path: '/svc/api/rest/nothing' });
    expect(await apiErrorOf(() => controller.unknown(req))).toEqual({
      status: 404,
      message: 'No resource at PATCH /svc/api/rest/nothing.',
    });
  });
});
