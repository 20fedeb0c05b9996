import { Injectable, Module, OnModuleInit, Optional } from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service';
import { CallbackJobsRepository } from './callback-jobs.repository';
import { DirectStarts } from './direct-starts';
import { JobAdminRepository } from './job-admin.repository';
import { JobRecordsRepository } from './job-records.repository';
import { JobWaiter } from './job-waiter.service';
import { MailReplyJobsRepository } from './mail-reply-jobs.repository';
import { QueueNotifier } from './queue-notifier.service';
import { QueueRepository } from './queue.repository';
import { WorkerNodesRepository } from './worker-nodes.repository';

/** Gives the metrics registry the queue's depth and backlog to read at scrape time. */
@Injectable()
class QueueMetrics implements OnModuleInit {
  constructor(
    private readonly queue: QueueRepository,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  onModuleInit(): void {
    this.metrics?.observeQueueDepth(() => this.queue.queueDepth());
    this.metrics?.observeQueueBacklog(() => this.queue.queueBacklog());
    this.metrics?.observeApplicationJobs(() => this.queue.jobsPerApplication());
  }
}

/**
 * Delivery of jobs: the claim/lease SQL the wake-up signals and waiting for a job; every statement
 * on the job table (JobRecordsRepository: those other modules call; CallbackJobsRepository and
 * MailReplyJobsRepository: the callback and mail-reply jobs'). Workers are in WorkerModule.
 */
@Module({
  providers: [
    QueueRepository,
    JobRecordsRepository,
    JobAdminRepository,
    WorkerNodesRepository,
    CallbackJobsRepository,
    MailReplyJobsRepository,
    QueueNotifier,
    JobWaiter,
    DirectStarts,
    QueueMetrics,
  ],
  exports: [
    QueueRepository,
    JobRecordsRepository,
    JobAdminRepository,
    WorkerNodesRepository,
    CallbackJobsRepository,
    MailReplyJobsRepository,
    QueueNotifier,
    JobWaiter,
    DirectStarts,
  ],
})
export class QueueModule {}
