import { Module } from '@nestjs/common';
import { QueueNotifier } from './queue-notifier.service';
import { QueueRepository } from './queue.repository';

/** Delivery of jobs: the claim/lease SQL and the wake-up signal. Workers are in WorkerModule. */
@Module({
  providers: [QueueRepository, QueueNotifier],
  exports: [QueueRepository, QueueNotifier],
})
export class QueueModule {}
