import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { rowsOf } from '../storage/query-rows';
import { deliveryEnded, deliveryRetried, heldDeliveryJob } from './queue-leases';
import { JOB_QUEUED_CHANNEL } from './queue-channels';
import { ClaimedJob, JobKind, JobSource } from './queue.types';

/*
 * The mail-reply jobs' statements: an e-mail reply (a mail_reply row, what the message's record
 * and the reply say) is sent by a job of kind `mail_reply`, queued when the reply is owed and
 * claimed into a worker's mail-reply slots once it can go (a refusal at once, a job's reply once
 * the job has its result), leased and put back by the supervisor like any job; here it is
 * queued, claimed, retried and ended, each in one statement that records the attempt on its
 * mail_reply row.
 */

/** A mail-reply job as MailReplyJobsRepository.claim takes it, with its reply's columns. */
interface MailReplyClaimRow {
  id: string;
  application_name: string;
  submitted_at: Date;
  attempts: number;
  source: string;
  source_key: string;
  job_id: string;
  rejection: string | null;
  reply_to: string;
  reply_cc: string | null;
  reply_subject: string | null;
  reply_from: string;
  in_reply_to: string | null;
  attach_max_bytes: string;
  reply_attempts: number;
  first_attempt_at: Date;
}

/**
 * The mail-reply jobs' claim (MailReplyJobsRepository.claim): $1 owner, $2 free mail-reply
 * slots, $3 lease seconds. The due ones by job_mail_reply_claim_idx, which holds only queued
 * mail-reply jobs; of those, the replies that can go now (a refusal, a job with its result, or
 * a job deleted meanwhile, whose reply says so).
 */
export const MAIL_REPLY_CLAIM_SQL = `WITH due AS (
         SELECT j.id FROM job j JOIN mail_reply m ON m.reply_job_id = j.id
          WHERE j.state = 'QUEUED' AND j.kind = 'mail_reply' AND j.run_after <= now()
            AND (m.rejection IS NOT NULL OR EXISTS (SELECT 1 FROM result r WHERE r.job_id = m.job_id)
                 OR NOT EXISTS (SELECT 1 FROM job d WHERE d.id = m.job_id))
          ORDER BY j.run_after LIMIT $2
          FOR UPDATE OF j SKIP LOCKED),
       claimed AS (
         UPDATE job SET state = 'RUNNING', attempts = job.attempts + 1, started_at = now(),
                lease_owner = $1, lease_expires_at = now() + make_interval(secs => $3)
          WHERE job.id IN (SELECT id FROM due)
         RETURNING job.id, job.application_name, job.submitted_at, job.attempts),
       replies AS (
         UPDATE mail_reply m SET first_attempt_at = coalesce(m.first_attempt_at, now())
           FROM claimed WHERE m.reply_job_id = claimed.id
         RETURNING m.reply_job_id, m.source, m.source_key, m.job_id, m.rejection, m.reply_to,
                   m.reply_cc, m.reply_subject, m.reply_from, m.in_reply_to, m.attach_max_bytes,
                   m.attempts AS reply_attempts, m.first_attempt_at)
       SELECT claimed.*, replies.* FROM claimed JOIN replies ON replies.reply_job_id = claimed.id
        ORDER BY claimed.submitted_at`;

@Injectable()
export class MailReplyJobsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Queues the mail-reply job of the reply `source`/`sourceKey` owes, if it owes one (state
   * `pending`) and has none yet, in ONE statement that also sends `svc_job_queued` (payload
   * `mail_reply`, after `sender`, delivered at commit). On `runner` when given: the transaction
   * that makes the reply owed, so the reply and its job commit together. Returns whether it
   * queued one (the caller wakes this node's workers after the commit).
   */
  async queue(
    source: string,
    sourceKey: string,
    sender: string,
    runner: DataSource | EntityManager = this.dataSource,
  ): Promise<boolean> {
    const raw: unknown = await runner.query(
      `WITH owed AS (
         UPDATE mail_reply SET reply_job_id = gen_random_uuid()
          WHERE source = $1 AND source_key = $2 AND state = 'pending' AND reply_job_id IS NULL
          RETURNING reply_job_id, application_name),
       queued AS (
         INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at,
                          run_after, attempts)
         SELECT reply_job_id, application_name, 'mail_reply', 'QUEUED', 0, '{}', 'mail_reply',
                now(), now(), 0
           FROM owed)
       SELECT pg_notify($3, $4::text || 'mail_reply') FROM owed`,
      [source, sourceKey, JOB_QUEUED_CHANNEL, sender],
    );
    return rowsOf(raw).length > 0;
  }

  /**
   * Claims up to `limit` mail-reply jobs that can go for `owner` (a worker's mail-reply slots),
   * with what their reply is made of, in ONE statement: the oldest due first, `FOR UPDATE SKIP
   * LOCKED` so that nodes claiming at once never take the same one, leased like any job. The
   * reply's first attempt is recorded (its retry period counts from there).
   */
  async claim(owner: string, limit: number, leaseSeconds: number): Promise<ClaimedJob[]> {
    const raw: unknown = await this.dataSource.query(MAIL_REPLY_CLAIM_SQL, [
      owner,
      limit,
      leaseSeconds,
    ]);
    return rowsOf<MailReplyClaimRow>(raw).map((row) => ({
      id: row.id,
      applicationName: row.application_name,
      kind: JobKind.MAIL_REPLY,
      meta: {},
      submittedAt: new Date(row.submitted_at),
      attempts: row.attempts,
      source: JobSource.MAIL_REPLY,
      hasCallback: false,
      files: [],
      trace: null,
      mailReply: {
        source: row.source,
        sourceKey: row.source_key,
        applicationName: row.application_name,
        jobId: row.job_id,
        rejection: row.rejection,
        replyTo: row.reply_to,
        cc: row.reply_cc,
        subject: row.reply_subject ?? '',
        from: row.reply_from,
        inReplyTo: row.in_reply_to,
        attachMaxBytes: Number(row.attach_max_bytes),
        attempts: row.reply_attempts,
        firstAttemptAt: new Date(row.first_attempt_at),
      },
    }));
  }

  /**
   * A mail-reply job's attempt failed and it is tried again at `retryAt`: queued again with that
   * run_after, and the attempt recorded on its reply, in ONE statement, if `owner` still holds
   * the lease.
   */
  async retry(jobId: string, owner: string, error: string, retryAt: Date): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `WITH retried AS (
         UPDATE job SET ${deliveryRetried('$3', '$4')}
          WHERE ${heldDeliveryJob(JobKind.MAIL_REPLY)}
          RETURNING id)
       UPDATE mail_reply SET attempts = attempts + 1, last_error = $3
        WHERE reply_job_id IN (SELECT id FROM retried) AND state = 'pending'
        RETURNING reply_job_id`,
      [jobId, owner, error.slice(0, 1000), retryAt],
    );
    return rowsOf(raw).length > 0;
  }

  /**
   * Ends a mail-reply job, if `owner` still holds its lease: sent, or failed, its dead letter
   * (no attempt is left within the retry period). ONE statement: the job goes and its reply
   * records the last attempt and its end.
   */
  async end(
    jobId: string,
    owner: string,
    outcome: { sent: true } | { sent: false; error: string },
  ): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `WITH ${deliveryEnded(JobKind.MAIL_REPLY, 'id')}
       UPDATE mail_reply SET state = CASE WHEN $3 THEN 'sent' ELSE 'failed' END,
              attempts = attempts + 1, replied_at = CASE WHEN $3 THEN now() ELSE replied_at END,
              last_error = $4, reply_job_id = NULL
        WHERE reply_job_id IN (SELECT id FROM ended) AND state = 'pending'
        RETURNING source`,
      [jobId, owner, outcome.sent, outcome.sent ? null : outcome.error.slice(0, 1000)],
    );
    return rowsOf(raw).length > 0;
  }
}
