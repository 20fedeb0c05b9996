import 'reflect-metadata';
import { PATH_METADATA } from '@nestjs/common/constants';
import { ApiModule } from '../api.module';
import { ACCESS_RULE } from './access.decorator';
import { controllersOf } from '../../test/support/api-controllers';

describe('access rules cover every route (deny by default is a last resort, not a habit)', () => {
  const controllers = controllersOf(ApiModule);

  it('finds the API controllers', () => {
    expect(controllers.map((c) => c.name)).toEqual(
      expect.arrayContaining(['JobsController', 'ResultsController', 'FallbackController']),
    );
  });

  it('every route handler declares @Access, on itself or on its controller', () => {
    const undeclared: string[] = [];
    for (const controller of controllers) {
      const classRule: unknown = Reflect.getMetadata(ACCESS_RULE, controller);
      const prototype = controller.prototype as Record<string, unknown>;
      for (const name of Object.getOwnPropertyNames(prototype)) {
        const handler = prototype[name];
        if (name === 'constructor' || typeof handler !== 'function') {
          continue;
        }
        const isRoute = Reflect.getMetadata(PATH_METADATA, handler) !== undefined;
        if (
          isRoute &&
          classRule === undefined &&
          Reflect.getMetadata(ACCESS_RULE, handler) === undefined
        ) {
          undeclared.push(`${controller.name}.${name}`);
        }
      }
    }
    expect(undeclared).toEqual([]);
  });
});
