import { Module } from '@nestjs/common';
import { EnvironmentRuntimeModule } from '../environments/environment-runtime.module';
import { REngineModule } from '../r-engine/r-engine.module';
import { ProcessService } from './process.service';

/**
 * Synchronous function calls on API nodes, on this node's own function-call engine. Its
 * controller is listed in ApiModule, before the catch-all FallbackController.
 */
@Module({
  imports: [REngineModule, EnvironmentRuntimeModule],
  providers: [ProcessService],
  exports: [ProcessService],
})
export class ProcessModule {}
