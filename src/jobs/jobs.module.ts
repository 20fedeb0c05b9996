import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { JobCancellationService } from './job-cancellation.service';
import { JobLogModule } from '../job-log/job-log.module';
import { JobLogService } from './job-log.service';
import { JobStatusService } from './job-status.service';
import { ResultsModule } from '../results/results.module';
import { JobsService } from './jobs.service';
import { CallbacksModule } from '../callbacks/callbacks.module';
import { FormJobService } from './form-job.service';
import { SubmissionBucketRepository } from './submission-bucket.repository';
import { SubmissionLimits } from './submission-limits';

/**
 * Job submission and job state, shared by the REST, form and SOAP front ends; the multipart
 * form posted to /jobs (FormJobService) is read here too.
 */
@Module({
  imports: [QueueModule, JobLogModule, ResultsModule, CallbacksModule],
  providers: [
    JobsService,
    FormJobService,
    JobCancellationService,
    JobLogService,
    JobStatusService,
    SubmissionBucketRepository,
    SubmissionLimits,
  ],
  exports: [
    JobsService,
    FormJobService,
    JobCancellationService,
    JobLogService,
    JobStatusService,
    SubmissionLimits,
    CallbacksModule,
  ],
})
export class JobsModule {}
