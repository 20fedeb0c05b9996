import { Injectable, Optional } from '@nestjs/common';
import { auditRowJson } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { QueueRepository } from '../queue/queue.repository';
import { JobState } from '../queue/queue.types';
import { resultData } from '../job-core/job-result';

/** Who cancels when no one is authenticated (AUTH_MODE=none). */
export const ANONYMOUS = 'anonymous';

/**
 * What a cancel did: `stopped` a queued job (it will never run: nothing is left to do),
 * `stopping` a running one (its result is stored; its node is stopping R), or nothing because
 * the job had `finished` already or is `unknown`.
 */
export type CancelOutcome = 'stopped' | 'stopping' | 'finished' | 'unknown';

/** The text of a cancelled job's result (success=false, type txt). */
export function cancellationText(
  applicationName: string,
  jobId: string,
  cancelledBy: string,
  cancelledAt: Date,
): string {
  return (
    `Job ${jobId} of application ${applicationName} was cancelled by ${cancelledBy} ` +
    `at ${cancelledAt.toISOString()}.\n`
  );
}

/**
 * Cancels jobs for every front end. The job ends at once in the database (DONE, with the
 * cancellation result); the worker holding it learns of it from the result-ready notification
 * (WorkerService) and aborts its run.
 */
@Injectable()
export class JobCancellationService {
  constructor(
    private readonly queue: QueueRepository,
    private readonly notifier: QueueNotifier,
    @Optional() private readonly audit?: AuditService,
  ) {}

  async cancel(
    applicationName: string,
    jobId: string,
    cancelledBy: string | null,
  ): Promise<CancelOutcome> {
    const by = cancelledBy ?? ANONYMOUS;
    // Millisecond precision, as the database stores it, so the text and cancelledAt agree.
    const at = new Date();
    const text = cancellationText(applicationName, jobId, by, at);
    const before = await this.queue.cancel(
      applicationName,
      jobId,
      by,
      at,
      resultData(false, 'txt', 'text/plain; charset=utf-8', Buffer.from(text, 'utf8')),
      // Written by the cancelling statement, only when it cancels.
      this.audit ? auditRowJson(this.audit.rowOf({ action: 'job.cancelled' })) : null,
    );
    if (before === null) {
      return 'unknown';
    }
    if (before === JobState.DONE) {
      return 'finished';
    }
    // This node's waiters, worker and callback delivery (which looks whether the job had a
    // callback; cancels are rare) hear of it at once; other nodes through the NOTIFY.
    this.notifier.resultStored(jobId);
    this.notifier.callbackQueued(jobId);
    return before === JobState.QUEUED ? 'stopped' : 'stopping';
  }
}
