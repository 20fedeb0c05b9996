import { Injectable } from '@nestjs/common';
import { CallbackRepository } from '../callbacks/callback.repository';
import { CallbackState } from '../callbacks/job-callback.entity';
import { missing } from '../common/missing-resource';
import type { RestLinks } from '../common/public-uri';
import { JobEntity } from '../queue/job.entity';
import { JobState } from '../queue/queue.types';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { JobWaiter } from '../queue/job-waiter.service';
import { JobStatusRepresentation } from './jobs-view';

/** How a status request may wait: `?wait=N` in ms, `&while=S`, and the client's going. */
export interface StatusWait {
  /** null: answer at once. */
  waitMs: number | null;
  /** The state the client saw last; null: the job's state now. */
  seenState: JobState | null;
  signal: AbortSignal;
}

/** A job's status (`jobStatus`): its state and times, progress, cancellation and callback. */
@Injectable()
export class JobStatusService {
  constructor(
    private readonly jobs: JobRecordsRepository,
    private readonly waiter: JobWaiter,
    private readonly callbacks: CallbackRepository,
  ) {}

  /**
   * The job's status, or 404. With `waitMs`: answers when the state changes (the job starts or
   * ends), else after waitMs; `seenState` names the state the client saw last, so that a change
   * between its two requests is answered at once instead of being waited past.
   */
  async status(
    links: RestLinks,
    applicationName: string,
    jobId: string,
    wait: StatusWait = { waitMs: null, seenState: null, signal: new AbortController().signal },
  ): Promise<JobStatusRepresentation> {
    const job = await this.existingJob(applicationName, jobId);
    const heldState = wait.seenState ?? job.state;
    if (wait.waitMs === null || job.state === JobState.DONE || job.state !== heldState) {
      return await this.statusOf(links, job);
    }
    const changed = await this.waiter.waitFor(
      jobId,
      async () => {
        const now = await this.jobs.findOne(applicationName, jobId);
        return now === null || now.state !== heldState ? { now } : null;
      },
      wait.waitMs,
      { events: 'result-or-start', signal: wait.signal },
    );
    return await this.statusOf(links, await this.existingJob(applicationName, jobId, changed?.now));
  }

  /** The job, or 404; `known` is what the caller has just read (null: gone), undefined: look. */
  private async existingJob(
    applicationName: string,
    jobId: string,
    known?: JobEntity | null,
  ): Promise<JobEntity> {
    const job = known !== undefined ? known : await this.jobs.findOne(applicationName, jobId);
    if (!job) {
      throw missing.job(applicationName, jobId);
    }
    return job;
  }

  private async statusOf(links: RestLinks, job: JobEntity): Promise<JobStatusRepresentation> {
    // The delivery row is made when the job ends; until then its callback is pending, untried.
    const callback =
      job.callbackUrl === null
        ? null
        : ((await this.callbacks.findStatus(job.id)) ?? {
            state: CallbackState.PENDING,
            attempts: 0,
            lastHttpStatus: null,
            lastError: null,
            lastAttemptTime: null,
            deliveryTime: null,
          });
    return new JobStatusRepresentation({
      jobId: job.id,
      applicationName: job.applicationName,
      state: job.state,
      submissionTime: job.submittedAt,
      startTime: job.state === JobState.QUEUED ? null : job.startedAt,
      finishTime: job.finishedAt,
      attempts: job.attempts,
      resultUri: links.result(job.applicationName, job.id),
      cancellation:
        job.cancelledAt && job.cancelledBy !== null
          ? { by: job.cancelledBy, time: job.cancelledAt }
          : null,
      progress:
        job.progressFraction !== null
          ? { fraction: job.progressFraction, message: job.progressMessage ?? '' }
          : null,
      callback,
    });
  }
}
