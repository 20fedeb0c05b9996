import { Module } from '@nestjs/common';
import { JobsModule } from '../jobs/jobs.module';
import { QueueModule } from '../queue/queue.module';
import { REngineModule } from '../r-engine/r-engine.module';
import { FlowRepository } from './flow.repository';
import { FlowsService } from './flows.service';

/**
 * Flows: steps that are jobs, waiting for one another (docs/flows.md), on API nodes. Its
 * controller is listed in ApiModule, before the catch-all FallbackController.
 */
@Module({
  imports: [JobsModule, QueueModule, REngineModule],
  providers: [FlowsService, FlowRepository],
  exports: [FlowsService],
})
export class FlowsModule {}
