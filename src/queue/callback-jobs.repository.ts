import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { rowsOf } from '../storage/query-rows';
import { deliveryEnded, deliveryRetried, heldDeliveryJob } from './queue-leases';
import { CallbackDelivery, ClaimedJob, JobKind, JobSource } from './queue.types';

/*
 * The callback jobs' statements: a finished job's callback is a job of kind `callback` (queued by
 * the statement that stores the result, QueueRepository), claimed into a worker's callback slots,
 * leased and put back by the supervisor like any job; here it is claimed, retried and ended, each
 * in one statement that records the attempt on its job_callback row (what job status shows).
 */

/** A callback job as CallbackJobsRepository.claim takes it, with its callback's and its job's result's columns. */
interface CallbackClaimRow {
  id: string;
  application_name: string;
  submitted_at: Date;
  attempts: number;
  callback_of: string;
  callback_url: string;
  callback_links_base: string | null;
  traceparent: string | null;
  tracestate: string | null;
  callback_attempts: number;
  created_at: Date;
  result_time: Date;
  success: boolean;
  type: string;
}

/** A callback attempt that failed: its HTTP status (null: no answer) and why. */
export interface CallbackFailure {
  delivered: false;
  httpStatus: number | null;
  error: string;
}

/**
 * The callback jobs' claim (CallbackJobsRepository.claim): $1 owner, $2 free callback slots,
 * $3 lease seconds. The due ones by job_callback_claim_idx, which holds only queued callback jobs.
 */
export const CALLBACK_CLAIM_SQL = `WITH due AS (
         SELECT id FROM job WHERE state = 'QUEUED' AND kind = 'callback' AND run_after <= now()
          ORDER BY run_after LIMIT $2
          FOR UPDATE SKIP LOCKED),
       claimed AS (
         UPDATE job SET state = 'RUNNING', attempts = job.attempts + 1, started_at = now(),
                lease_owner = $1, lease_expires_at = now() + make_interval(secs => $3)
          WHERE job.id IN (SELECT id FROM due)
         RETURNING job.id, job.application_name, job.submitted_at, job.attempts, job.callback_of,
                   job.callback_url, job.callback_links_base, job.traceparent, job.tracestate)
       SELECT claimed.*, c.attempts AS callback_attempts, c.created_at,
              r.result_time, r.success, r.type
         FROM claimed
         JOIN job_callback c ON c.job_id = claimed.callback_of
         JOIN result r ON r.job_id = claimed.callback_of
        ORDER BY claimed.submitted_at`;

@Injectable()
export class CallbackJobsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Claims up to `limit` due callback jobs for `owner` (a worker's callback slots), with what
   * their POST is made of, in ONE statement: the oldest due first, `FOR UPDATE SKIP LOCKED` so
   * that nodes claiming at once never take the same one, leased like any job (heartbeats extend
   * it; the supervisor puts back the callback of a node that died). A statement of its own
   * rather than a third pool of CLAIM_SQL: callbacks have no fair share, priority or cap, and
   * their partial index (job_callback_claim_idx, due time) holds only them, so the R jobs' claim
   * reads none of them.
   */
  async claim(owner: string, limit: number, leaseSeconds: number): Promise<ClaimedJob[]> {
    const raw: unknown = await this.dataSource.query(CALLBACK_CLAIM_SQL, [
      owner,
      limit,
      leaseSeconds,
    ]);
    return rowsOf<CallbackClaimRow>(raw).map((row) => {
      const callback: CallbackDelivery = {
        jobId: row.callback_of,
        url: row.callback_url,
        attempts: row.callback_attempts,
        createdAt: new Date(row.created_at),
        linksBase: row.callback_links_base ?? '',
        result: {
          jobId: row.callback_of,
          applicationName: row.application_name,
          resultTime: new Date(row.result_time),
          success: row.success,
          type: row.type,
        },
      };
      return {
        id: row.id,
        applicationName: row.application_name,
        kind: JobKind.CALLBACK,
        meta: {},
        submittedAt: new Date(row.submitted_at),
        attempts: row.attempts,
        source: JobSource.CALLBACK,
        hasCallback: false,
        files: [],
        trace: row.traceparent
          ? { traceparent: row.traceparent, tracestate: row.tracestate }
          : null,
        callback,
      };
    });
  }

  /**
   * A callback job's attempt failed and it is tried again at `retryAt` (QueueRepository.retryLater's
   * step for a callback): queued again with that run_after, and the attempt recorded on its callback, in
   * ONE statement, if `owner` still holds the lease.
   */
  async retry(
    jobId: string,
    owner: string,
    failure: { httpStatus: number | null; error: string },
    retryAt: Date,
  ): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `WITH retried AS (
         UPDATE job SET ${deliveryRetried('$3', '$5')}
          WHERE ${heldDeliveryJob(JobKind.CALLBACK)}
          RETURNING callback_of)
       UPDATE job_callback SET attempts = attempts + 1, last_attempt_at = now(),
              last_http_status = $4, last_error = $3
        WHERE job_id IN (SELECT callback_of FROM retried) AND state = 'pending'
        RETURNING job_id`,
      [jobId, owner, failure.error.slice(0, 1000), failure.httpStatus, retryAt],
    );
    return rowsOf(raw).length > 0;
  }

  /**
   * Ends a callback job, if `owner` still holds its lease: delivered (the receiver answered
   * 2xx), or failed, its dead letter (no attempt is left within the retry period, or it may
   * not be sent). ONE statement: the callback job goes and its callback records the last
   * attempt and its end.
   */
  async end(
    jobId: string,
    owner: string,
    outcome: { delivered: true; httpStatus: number } | CallbackFailure,
  ): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `WITH ${deliveryEnded(JobKind.CALLBACK, 'callback_of')}
       UPDATE job_callback SET state = CASE WHEN $3 THEN 'delivered' ELSE 'failed' END,
              attempts = attempts + 1, last_attempt_at = now(),
              delivered_at = CASE WHEN $3 THEN now() END,
              last_http_status = $4, last_error = $5
        WHERE job_id IN (SELECT callback_of FROM ended) AND state = 'pending'
        RETURNING job_id`,
      [
        jobId,
        owner,
        outcome.delivered,
        outcome.httpStatus,
        outcome.delivered ? null : outcome.error.slice(0, 1000),
      ],
    );
    return rowsOf(raw).length > 0;
  }
}
