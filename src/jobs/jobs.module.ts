import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { JobRepository } from './job.repository';
import { JobsService } from './jobs.service';

/** Job submission and job state, shared by the REST, form and SOAP front ends. */
@Module({
  imports: [QueueModule],
  providers: [JobRepository, JobsService],
  exports: [JobRepository, JobsService],
})
export class JobsModule {}
