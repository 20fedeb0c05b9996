import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { JobLogRepository } from './job-log.repository';

/**
 * The job's log table, one provider for the roles that write it (WorkerModule) and those that
 * read it (JobsModule). The rest of job-core is functions and types that both of them import.
 */
@Module({
  imports: [QueueModule],
  providers: [JobLogRepository],
  exports: [JobLogRepository],
})
export class JobCoreModule {}
