import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { JobRecordsRepository } from '../queue/job-records.repository';
import type { ResultMetadata } from '../results/result.repository';
import type { TraceCarrier } from '../tracing/tracing';
import { CallbackState, JobCallbackEntity } from './job-callback.entity';

/** A callback taken for one delivery attempt, with what its body is made of. */
export interface DueCallback {
  jobId: string;
  url: string;
  /** Attempts made before this one. */
  attempts: number;
  /** When the job ended: the retry period counts from here. */
  createdAt: Date;
  /** The public base URL the job was submitted under, for the links in the body. */
  linksBase: string;
  result: ResultMetadata;
  /** The trace the job was submitted in: the delivery joins it. */
  trace: TraceCarrier | null;
}

/** What jobStatus shows of a job's callback. */
export interface CallbackStatus {
  state: CallbackState;
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  lastAttemptTime: Date | null;
  deliveryTime: Date | null;
}

/**
 * The SQL of callback delivery. The rows are made by the statements that store a job's result
 * (QueueRepository: complete, cancel), so a result and its callback commit together; the claim
 * reads the job too, so its statement is the queue module's.
 */
@Injectable()
export class CallbackRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly records: JobRecordsRepository,
  ) {}

  /** Takes up to `limit` due callbacks for one attempt each (JobRecordsRepository's statement). */
  async claimDue(limit: number, leaseSeconds: number): Promise<DueCallback[]> {
    const rows = await this.records.claimDueCallbacks(limit, leaseSeconds);
    return rows.map((row) => ({
      jobId: row.job_id,
      url: row.url,
      attempts: row.attempts,
      createdAt: new Date(row.created_at),
      linksBase: row.callback_links_base ?? '',
      trace: row.traceparent ? { traceparent: row.traceparent, tracestate: row.tracestate } : null,
      result: {
        jobId: row.job_id,
        applicationName: row.application_name,
        resultTime: new Date(row.result_time),
        success: row.success,
        type: row.type,
      },
    }));
  }

  /** The receiver answered 2xx. */
  async markDelivered(jobId: string, httpStatus: number): Promise<void> {
    await this.dataSource.query(
      `UPDATE job_callback SET state = 'delivered', attempts = attempts + 1, last_attempt_at = now(),
              delivered_at = now(), last_http_status = $2, last_error = NULL
        WHERE job_id = $1 AND state = 'pending'`,
      [jobId, httpStatus],
    );
  }

  /** An attempt failed: try again at `retryAt`, or (null) give up and mark the callback failed. */
  async recordFailure(
    jobId: string,
    failure: { httpStatus: number | null; error: string },
    retryAt: Date | null,
  ): Promise<void> {
    await this.dataSource.query(
      `UPDATE job_callback SET attempts = attempts + 1, last_attempt_at = now(),
              last_http_status = $2, last_error = $3,
              state = CASE WHEN $4::timestamptz IS NULL THEN 'failed' ELSE 'pending' END,
              next_attempt_at = COALESCE($4::timestamptz, next_attempt_at)
        WHERE job_id = $1 AND state = 'pending'`,
      [jobId, failure.httpStatus, failure.error.slice(0, 1000), retryAt],
    );
  }

  /** An attempt cut short by this node's shutdown: due again at once, the attempt not counted. */
  async release(jobId: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE job_callback SET next_attempt_at = now() WHERE job_id = $1 AND state = 'pending'`,
      [jobId],
    );
  }

  async findStatus(jobId: string): Promise<CallbackStatus | null> {
    const row = await this.dataSource.getRepository(JobCallbackEntity).findOne({
      where: { jobId },
    });
    return row
      ? {
          state: row.state,
          attempts: row.attempts,
          lastHttpStatus: row.lastHttpStatus,
          lastError: row.lastError,
          lastAttemptTime: row.lastAttemptAt,
          deliveryTime: row.deliveredAt,
        }
      : null;
  }
}
