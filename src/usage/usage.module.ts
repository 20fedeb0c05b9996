import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { UsageRepository } from './usage.repository';

/**
 * Usage statistics (GET /admin/statistics). The records are written by the queue with each
 * job's result; this module only reads them. Its controller is declared in ApiModule.
 */
@Module({
  imports: [QueueModule],
  providers: [UsageRepository],
  exports: [UsageRepository],
})
export class UsageModule {}
