import { Module } from '@nestjs/common';
import { UsageRepository } from './usage.repository';

/**
 * Usage statistics (GET /admin/statistics). The records are written by the queue with each
 * job's result; this module only reads them. Its controller is declared in ApiModule.
 */
@Module({
  providers: [UsageRepository],
  exports: [UsageRepository],
})
export class UsageModule {}
