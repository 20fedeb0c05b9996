import {
  Inject,
  Injectable,
  OnApplicationShutdown,
  OnModuleInit,
  Optional,
  Provider,
} from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service';
import { REngineConfig } from '../config/config-slices';
import { FUNCTION_CALL_ENGINE, type FunctionCallEngine } from './function-call-engine';
import { FunctionLibraryService } from './function-library';
import { R_ENGINE, type REngine } from './r-engine';

/** Starts the function-call engine with the module (warm sessions at start-up) and stops it. */
@Injectable()
class FunctionCallEngineLifecycle implements OnModuleInit, OnApplicationShutdown {
  constructor(
    @Inject(FUNCTION_CALL_ENGINE) private readonly engine: FunctionCallEngine,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.engine.start();
    this.metrics?.observeRSessionPool(() => this.engine.stats());
  }

  async onApplicationShutdown(): Promise<void> {
    await this.engine.stop();
  }
}

/**
 * The function-call engine follows the R engine: native R gets a pool of warm sessions, webR
 * serves calls on its one instance (in turn with script runs).
 */
export const FUNCTION_CALL_PROVIDERS: Provider[] = [
  FunctionLibraryService,
  {
    provide: FUNCTION_CALL_ENGINE,
    inject: [REngineConfig, R_ENGINE, FunctionLibraryService],
    useFactory: (
      config: REngineConfig,
      engine: REngine,
      libraries: FunctionLibraryService,
    ): FunctionCallEngine => engine.functionCalls(config, libraries),
  },
  FunctionCallEngineLifecycle,
];
