import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { JobLogRepository } from './job-log.repository';

/**
 * A job's log: the job_log_line table (its entity), every statement on it (JobLogRepository) and
 * the writer of a run's lines (JobLogWriter). One provider for the roles that write the log
 * (WorkerModule) and those that read it (JobsModule).
 */
@Module({
  imports: [QueueModule],
  providers: [JobLogRepository],
  exports: [JobLogRepository],
})
export class JobLogModule {}
