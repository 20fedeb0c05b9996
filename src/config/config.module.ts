import { DynamicModule, Global, Module, Provider } from '@nestjs/common';
import { AppConfig } from './app-config';
import { configView } from './config-slice';
import { CONFIG_SLICES } from './config-slices';

/** `AppConfig` and a view of it under each slice's class (src/config/config-slices.ts). */
export function configProviders(config: AppConfig): Provider[] {
  return [
    { provide: AppConfig, useValue: config },
    ...CONFIG_SLICES.map((slice) => ({
      provide: slice,
      useValue: configView(config, slice.keys),
    })),
  ];
}

/**
 * Makes the validated configuration injectable: whole as `AppConfig`, and by concern as its
 * slices (`QueueConfig`, `REngineConfig`, …), which is how a service should ask for it.
 */
@Global()
@Module({})
export class ConfigModule {
  static forConfig(config: AppConfig): DynamicModule {
    const providers = configProviders(config);
    return {
      module: ConfigModule,
      providers,
      exports: [AppConfig, ...CONFIG_SLICES],
    };
  }
}
