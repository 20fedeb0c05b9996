import { Injectable, Optional } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { ApiError } from '../common/api-error';
import { applicationSettingsOf } from '../config/application-settings';
import { ApplicationsConfig } from '../config/config-slices';
import { MetricsService } from '../metrics/metrics.service';
import { QueueRepository } from '../queue/queue.repository';
import { RateBucket, SubmissionBucketRepository } from './submission-bucket.repository';

/** Seconds a client is told to wait when an application has maxQueuedJobs queued. */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 10;

/** The name of an application limit, as error bodies, faults and the rejection metric give it. */
export type SubmissionLimit =
  | 'maxQueuedJobs'
  | 'maxSubmissionsPerMinute'
  | 'maxSubmissionsPerMinutePerPrincipal'
  | 'maxJobSizeBytes'
  | 'priority';

/** The longest bucket key stored; a longer caller name is stored as its hash. */
const BUCKET_KEY_MAX = 200;

/**
 * The per-application limits of a submission (APPLICATION_SETTINGS), checked by the intake
 * before it reads anything: jobs queued (maxQueuedJobs) and submission rates, of the application
 * and of each caller (token buckets shared by all API nodes through PostgreSQL). An application
 * without limits costs no statement. A refusal is a 429 with Retry-After whose message names
 * the limit; REST, the form and SOAP answer it in their own way.
 */
@Injectable()
export class SubmissionLimits {
  constructor(
    private readonly config: ApplicationsConfig,
    private readonly queue: QueueRepository,
    private readonly buckets: SubmissionBucketRepository,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  /**
   * Refuses a submission at a limit (a 429 ApiError). The maxQueuedJobs count here is only an
   * early refusal that spares reading a body; the admission that holds across nodes is the
   * enqueue's (`maxQueuedOf`, `queueFull`). With `transaction`, every statement runs in it.
   */
  async admit(
    applicationName: string,
    principal: string | null,
    transaction?: EntityManager,
  ): Promise<void> {
    const settings = applicationSettingsOf(this.config, applicationName);
    if (settings.maxQueuedJobs !== null) {
      const queued = await this.queue.queuedJobsOf(
        applicationName,
        settings.maxQueuedJobs,
        transaction,
      );
      if (queued >= settings.maxQueuedJobs) {
        throw this.queueFull(applicationName, queued);
      }
    }
    const perPrincipal = settings.maxSubmissionsPerMinutePerPrincipal;
    const perApplication = settings.maxSubmissionsPerMinute;
    if (perPrincipal === null && perApplication === null) {
      return;
    }
    const caller: RateBucket | null =
      perPrincipal === null
        ? null
        : { key: principalBucket(applicationName, principal), perMinute: perPrincipal };
    const application: RateBucket | null =
      perApplication === null ? null : { key: `app:${applicationName}`, perMinute: perApplication };
    const refusal = await this.buckets.take(caller, application, transaction);
    if (refusal === null) {
      return;
    }
    if (caller !== null && refusal.key === caller.key) {
      throw this.refuse(
        applicationName,
        'maxSubmissionsPerMinutePerPrincipal',
        `${principal === null ? 'Anonymous callers' : `The caller "${principal}"`} submitted more than ${perPrincipal} jobs a minute to "${applicationName}", its limit (maxSubmissionsPerMinutePerPrincipal: ${perPrincipal}).`,
        refusal.retryAfterSeconds,
      );
    }
    throw this.refuse(
      applicationName,
      'maxSubmissionsPerMinute',
      `The application "${applicationName}" was sent more than ${perApplication} jobs a minute, its limit (maxSubmissionsPerMinute: ${perApplication}).`,
      refusal.retryAfterSeconds,
    );
  }

  /** The application's maxQueuedJobs (null: no limit), for the enqueue's admission. */
  maxQueuedOf(applicationName: string): number | null {
    return applicationSettingsOf(this.config, applicationName).maxQueuedJobs;
  }

  /** The refusal of a job at maxQueuedJobs, with the jobs queued that filled it. */
  queueFull(applicationName: string, queued: number): ApiError {
    return this.refuse(
      applicationName,
      'maxQueuedJobs',
      `The application "${applicationName}" has ${queued} jobs queued, its limit (maxQueuedJobs: ${this.maxQueuedOf(applicationName) ?? queued}); submit again once some have started.`,
      QUEUE_FULL_RETRY_AFTER_SECONDS,
    );
  }

  /** The largest job of the application in bytes, and the limit that sets it. */
  maxJobBytes(applicationName: string): { bytes: number; limit: 'maxJobSizeBytes' | null } {
    const own = applicationSettingsOf(this.config, applicationName).maxJobSizeBytes;
    return own !== null && own < this.config.maxRequestBytes
      ? { bytes: own, limit: 'maxJobSizeBytes' }
      : { bytes: this.config.maxRequestBytes, limit: null };
  }

  /** The priority of a job that asks for `asked` (undefined: none), within the application's bounds (else 400). */
  priorityOf(applicationName: string, asked: number | undefined): number {
    const settings = applicationSettingsOf(this.config, applicationName);
    if (asked === undefined) {
      return settings.defaultPriority;
    }
    if (asked < settings.minPriority || asked > settings.maxPriority) {
      this.metrics?.submissionRejected(applicationName, 'priority');
      throw ApiError.badRequest(
        `The priority ${asked} is outside what the application "${applicationName}" allows (minPriority: ${settings.minPriority}, maxPriority: ${settings.maxPriority}).`,
      );
    }
    return asked;
  }

  /** Counts a refusal at `limit` (413 over maxJobSizeBytes, 429 at the others). */
  rejected(applicationName: string, limit: SubmissionLimit): void {
    this.metrics?.submissionRejected(applicationName, limit);
  }

  private refuse(
    applicationName: string,
    limit: SubmissionLimit,
    message: string,
    retryAfterSeconds: number,
  ): ApiError {
    this.rejected(applicationName, limit);
    return ApiError.tooManyRequests(message, retryAfterSeconds);
  }
}

/** A caller's bucket within an application; anonymous callers share one. */
function principalBucket(applicationName: string, principal: string | null): string {
  const key = `principal:${applicationName}:${principal ?? ''}`;
  return key.length <= BUCKET_KEY_MAX
    ? key
    : `principal:${applicationName}:#${createHash('sha256')
        .update(principal ?? '')
        .digest('hex')}`;
}
