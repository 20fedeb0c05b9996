import { Module } from '@nestjs/common';
import { JobWaiter } from './job-waiter.service';
import { QueueNotifier } from './queue-notifier.service';
import { QueueRepository } from './queue.repository';

/** Delivery of jobs: the claim/lease SQL the wake-up signals and waiting for a job. Workers are in WorkerModule. */
@Module({
  providers: [QueueRepository, QueueNotifier, JobWaiter],
  exports: [QueueRepository, QueueNotifier, JobWaiter],
})
export class QueueModule {}
