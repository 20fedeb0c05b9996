import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { ResultMetadata } from '../results/result.repository';
import { rowsOf } from '../storage/query-rows';
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

interface DueRow {
  job_id: string;
  url: string;
  attempts: number;
  created_at: Date;
  application_name: string;
  callback_links_base: string | null;
  traceparent: string | null;
  tracestate: string | null;
  result_time: Date;
  success: boolean;
  type: string;
}

/**
 * The SQL of callback delivery. The rows are made by the statements that store a job's result
 * (QueueRepository: complete, cancel), so a result and its callback commit together.
 */
@Injectable()
export class CallbackRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Takes up to `limit` due callbacks for one attempt each, in ONE statement: `FOR UPDATE SKIP
   * LOCKED` lets nodes take callbacks at once without taking the same one, and moving
   * next_attempt_at `leaseSeconds` ahead keeps the others off it while its attempt runs (no
   * transaction is held open over the HTTP request). A node that dies mid-attempt leaves the
   * callback due again when that lease ends.
   */
  async claimDue(limit: number, leaseSeconds: number): Promise<DueCallback[]> {
    const raw: unknown = await this.dataSource.query(
      `WITH due AS (
         SELECT job_id FROM job_callback
          WHERE state = 'pending' AND next_attempt_at <= now()
          ORDER BY next_attempt_at
          LIMIT $1
          FOR UPDATE SKIP LOCKED),
       leased AS (
         UPDATE job_callback c SET next_attempt_at = now() + make_interval(secs => $2)
           FROM due WHERE c.job_id = due.job_id
         RETURNING c.job_id, c.url, c.attempts, c.created_at)
       SELECT leased.*, job.application_name, job.callback_links_base, job.traceparent, job.tracestate,
              result.result_time, result.success, result.type
         FROM leased
         JOIN job ON job.id = leased.job_id
         JOIN result ON result.job_id = leased.job_id`,
      [limit, leaseSeconds],
    );
    return rowsOf<DueRow>(raw).map((row) => ({
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
