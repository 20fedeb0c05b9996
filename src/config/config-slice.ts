import type { AppConfig } from './app-config';

/** The settings of one concern, as its readers see them. */
export type ConfigView<K extends keyof AppConfig> = Readonly<Pick<AppConfig, K>>;

/**
 * A slice's class: the token Nest injects it by and the type of its view. Abstract, since
 * nothing constructs it: ConfigModule provides a view of the loaded configuration under it.
 */
export type ConfigSliceClass<K extends keyof AppConfig> = (abstract new () => ConfigView<K>) & {
  readonly keys: readonly K[];
};

/** Declares a slice: `export abstract class QueueConfig extends configSlice([...keys]) {}`. */
export function configSlice<const K extends keyof AppConfig>(
  keys: readonly K[],
): ConfigSliceClass<K> {
  abstract class Slice {
    static readonly keys = keys;
  }
  return Slice as unknown as ConfigSliceClass<K>;
}

/**
 * The view of `config` a slice gives: one getter per key, reading the loaded configuration on
 * each use. So a reader sees the very map objects AppConfig holds (application settings changed
 * at run time replace their entries) and nothing outside its keys; it cannot write.
 */
export function configView<K extends keyof AppConfig>(
  config: AppConfig,
  keys: readonly K[],
): ConfigView<K> {
  const view: Record<string, unknown> = {};
  for (const key of keys) {
    Object.defineProperty(view, key, { get: () => config[key], enumerable: true });
  }
  return Object.freeze(view) as ConfigView<K>;
}
