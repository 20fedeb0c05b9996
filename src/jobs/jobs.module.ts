import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { JobCancellationService } from './job-cancellation.service';
import { JobLogRepository } from './job-log.repository';
import { JobLogService } from './job-log.service';
import { ResultsModule } from '../results/results.module';
import { JobRepository } from './job.repository';
import { JobsService } from './jobs.service';

/** Job submission and job state, shared by the REST, form and SOAP front ends. */
@Module({
  imports: [QueueModule, ResultsModule],
  providers: [JobRepository, JobsService, JobCancellationService, JobLogRepository, JobLogService],
  exports: [JobRepository, JobsService, JobCancellationService, JobLogRepository, JobLogService],
})
export class JobsModule {}
