import {
  Inject,
  Injectable,
  Logger,
  Module,
  OnApplicationShutdown,
  OnModuleInit,
  Optional,
} from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service';
import { REngineConfig } from '../config/config-slices';
import { CatalogModule } from '../catalog/catalog.module';
import { FUNCTION_CALL_ENGINE } from './function-call-engine';
import { FUNCTION_CALL_PROVIDERS } from './function-call.providers';
import { FunctionLibraryService } from './function-library';
import { createREngine } from './r-engine.factory';
import { R_ENGINE, REngine } from './r-engine';

/** Starts the engine with the module (start-up fails with one clear line if R cannot run) and stops it last. */
@Injectable()
class REngineLifecycle implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('REngine');
  constructor(
    @Inject(R_ENGINE) private readonly engine: REngine,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.engine.start();
    this.metrics?.observeRSandbox(() => this.engine.sandbox);
    this.logger.log(
      `R engine: ${this.engine.kind} (${await this.engine.version()}), sandbox: ${this.engine.sandbox}`,
    );
  }

  async onApplicationShutdown(): Promise<void> {
    await this.engine.stop();
  }
}

@Module({
  imports: [CatalogModule],
  providers: [
    {
      provide: R_ENGINE,
      // An API node runs no script jobs: its engine only chooses the sandbox for function calls.
      useFactory: (config: REngineConfig) =>
        createREngine({ ...config, scriptJobs: config.role !== 'api' }),
      inject: [REngineConfig],
    },
    REngineLifecycle,
    ...FUNCTION_CALL_PROVIDERS,
  ],
  exports: [R_ENGINE, FUNCTION_CALL_ENGINE, FunctionLibraryService],
})
export class REngineModule {}
