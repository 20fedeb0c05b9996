import { Module } from '@nestjs/common';
import { REngineModule } from '../r-engine/r-engine.module';
import { EnvironmentRuntime } from './environment-runtime';
import { EnvironmentsModule } from './environments.module';

/**
 * The library a job or a function call of an application runs in, where R runs: worker nodes
 * (script jobs, function-call jobs) and API nodes (`/process`, exported functions).
 */
@Module({
  imports: [REngineModule, EnvironmentsModule],
  providers: [EnvironmentRuntime],
  exports: [EnvironmentRuntime],
})
export class EnvironmentRuntimeModule {}
