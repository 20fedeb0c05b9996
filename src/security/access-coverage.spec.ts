import 'reflect-metadata';
import { MODULE_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { ApiModule } from '../api.module';
import { ACCESS_RULE } from './access.decorator';

interface DynamicModuleLike {
  module?: unknown;
  imports?: unknown[];
  controllers?: unknown[];
}

/** Every controller an API node serves: ApiModule's own and those of every module it imports. */
function controllersOf(root: unknown, seen = new Set<unknown>()): Array<new () => unknown> {
  if (root === null || root === undefined || seen.has(root)) {
    return [];
  }
  seen.add(root);
  const dynamic = typeof root === 'object' ? (root as DynamicModuleLike) : null;
  const moduleClass = dynamic ? dynamic.module : root;
  const read = (key: string): unknown[] =>
    typeof moduleClass === 'function'
      ? ((Reflect.getMetadata(key, moduleClass) as unknown[] | undefined) ?? [])
      : [];
  const controllers = [...read(MODULE_METADATA.CONTROLLERS), ...(dynamic?.controllers ?? [])];
  const imports = [...read(MODULE_METADATA.IMPORTS), ...(dynamic?.imports ?? [])];
  return [
    ...(controllers as Array<new () => unknown>),
    ...imports.flatMap((imported) => controllersOf(imported, seen)),
  ];
}

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
