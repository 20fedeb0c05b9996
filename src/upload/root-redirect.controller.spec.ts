import { REDIRECT_METADATA } from '@nestjs/common/constants';
import { controllerOf } from '../../test/support/controller-testing';
import { RootRedirectController } from './root-redirect.controller';

describe('RootRedirectController', () => {
  it('sends the root to the upload page with a relative 302', async () => {
    const controller = await controllerOf(RootRedirectController, []);
    expect(controller.root()).toBeUndefined();
    // The handler as Nest reads its metadata: the prototype's function itself.
    const handler = Object.getOwnPropertyDescriptor(RootRedirectController.prototype, 'root')
      ?.value as object;
    expect(Reflect.getMetadata(REDIRECT_METADATA, handler)).toEqual({
      url: 'svc/',
      statusCode: 302,
    });
  });
});
