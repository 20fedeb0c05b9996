import { Module } from '@nestjs/common';
import { JobsModule } from '../jobs/jobs.module';
import { ProcessModule } from '../process/process.module';
import { REngineModule } from '../r-engine/r-engine.module';
import { FunctionsService } from './functions.service';

/**
 * Exported R functions as endpoints, on API nodes. Its controller is listed in ApiModule, before
 * the catch-all FallbackController.
 */
@Module({
  imports: [REngineModule, ProcessModule, JobsModule],
  providers: [FunctionsService],
  exports: [FunctionsService],
})
export class FunctionsModule {}
