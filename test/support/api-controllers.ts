import 'reflect-metadata';
import { MODULE_METADATA } from '@nestjs/common/constants';

interface DynamicModuleLike {
  module?: unknown;
  imports?: unknown[];
  controllers?: unknown[];
}

/** Every controller a module serves: its own and those of every module it imports, dynamic ones included. */
export function controllersOf(root: unknown, seen = new Set<unknown>()): Array<new () => unknown> {
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
