import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { auditRowSql } from '../audit/audit.repository';
import { RESULT_MAIL_SOURCE } from '../config/mail-settings';
import { rowsOf } from '../storage/query-rows';
import { MailReplyState } from './mail-reply.entity';

/** What the record of a message says on a later look: its job id and whether it is done with. */
export interface MailRecord {
  jobId: string;
  state: MailReplyState;
  /** Settled as not a job (refused or unreadable): the message is set aside, not removed. */
  refused: boolean;
}

/** Who a reply goes to and how: the message's addresses and the account's sender. */
export interface ReplyAddressing {
  replyTo: string | null;
  cc: string | null;
  subject: string;
  from: string;
  inReplyTo: string | null;
  attachMaxBytes: number;
}

/** A reply taken for one sending attempt. */
export interface DueReply {
  source: string;
  sourceKey: string;
  applicationName: string;
  jobId: string;
  rejection: string | null;
  replyTo: string;
  cc: string | null;
  subject: string;
  from: string;
  inReplyTo: string | null;
  attachMaxBytes: number;
  attempts: number;
  firstAttemptAt: Date;
}

interface DueRow {
  source: string;
  source_key: string;
  application_name: string;
  job_id: string;
  rejection: string | null;
  reply_to: string;
  reply_cc: string | null;
  reply_subject: string | null;
  reply_from: string;
  in_reply_to: string | null;
  attach_max_bytes: string;
  attempts: number;
  first_attempt_at: Date;
}

/** Every statement about mail_reply (see mail-reply.entity.ts). */
@Injectable()
export class MailReplyRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Records a message under the job id it will get, or finds the record a node made before
   * (then its job id and state win): the key of exactly-once intake.
   */
  async record(
    account: string,
    key: string,
    applicationName: string,
    jobId: string,
    from: string,
  ): Promise<MailRecord> {
    await this.dataSource.query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_from, attach_max_bytes)
       VALUES ($1, $2, $3, $4, 'received', now(), $5, 0) ON CONFLICT DO NOTHING`,
      [account, key, applicationName, jobId, from],
    );
    const rows = await this.dataSource.query<
      Array<{ job_id: string; state: MailReplyState; refused: boolean }>
    >(
      `SELECT job_id, state, rejection IS NOT NULL AS refused FROM mail_reply
        WHERE source = $1 AND source_key = $2`,
      [account, key],
    );
    return { jobId: rows[0].job_id, state: rows[0].state, refused: rows[0].refused };
  }

  /**
   * The message's job is stored (`rejection` null) or the message is refused: a reply is owed
   * (a refusal's at once, a job's once it has a result), or none when there is no address.
   * `audit` (auditRowJson) is written by the same statement, so only by the node that settles.
   * Returns whether this call settled it (false: another node did first).
   */
  async settle(
    account: string,
    key: string,
    addressing: ReplyAddressing,
    rejection: string | null,
    audit: string | null = null,
  ): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `WITH settled AS (
         UPDATE mail_reply SET state = $3, rejection = $4, reply_to = $5, reply_cc = $6,
                reply_subject = $7, reply_from = $8, in_reply_to = $9, attach_max_bytes = $10,
                next_attempt_at = now()
          WHERE source = $1 AND source_key = $2 AND state = 'received'
          RETURNING application_name),
       audited AS (${auditRowSql('$11', 'settled', 'settled.application_name', 'NULL::uuid')})
       SELECT count(*)::int AS settled FROM settled`,
      [
        account,
        key,
        addressing.replyTo === null ? MailReplyState.NONE : MailReplyState.PENDING,
        rejection,
        addressing.replyTo,
        addressing.cc,
        addressing.subject,
        addressing.from,
        addressing.inReplyTo,
        addressing.attachMaxBytes,
        audit,
      ],
    );
    return rowsOf<{ settled: number }>(raw)[0]?.settled === 1;
  }

  /**
   * A reply owed for a job that is not a message's (MailReplyService.sendResult); once per job.
   * Given `transaction`, it is stored with what the transaction stores (a schedule's job).
   */
  async owe(
    jobId: string,
    applicationName: string,
    addressing: ReplyAddressing,
    transaction?: EntityManager,
  ): Promise<void> {
    await (transaction ?? this.dataSource.manager).query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_to, reply_cc, reply_subject, reply_from, in_reply_to,
                               attach_max_bytes, next_attempt_at)
       VALUES ($10, $1, $2, $9::uuid, 'pending', now(), $3, $4, $5, $6, $7, $8, now())
       ON CONFLICT DO NOTHING`,
      [
        jobId,
        applicationName,
        addressing.replyTo,
        addressing.cc,
        addressing.subject,
        addressing.from,
        addressing.inReplyTo,
        addressing.attachMaxBytes,
        jobId,
        RESULT_MAIL_SOURCE,
      ],
    );
  }

  /**
   * Takes up to `limit` replies that can go now (a refusal, or a job with its result) in ONE
   * statement, as CallbackRepository.claimDue does: SKIP LOCKED keeps nodes off each other's
   * rows, and moving next_attempt_at `leaseSeconds` ahead keeps them off while it is sent.
   */
  async claimDue(limit: number, leaseSeconds: number): Promise<DueReply[]> {
    const raw: unknown = await this.dataSource.query(
      `WITH due AS (
         SELECT m.source, m.source_key FROM mail_reply m
          WHERE m.state = 'pending' AND m.next_attempt_at <= now()
            AND (m.rejection IS NOT NULL OR EXISTS (SELECT 1 FROM result r WHERE r.job_id = m.job_id))
          ORDER BY m.next_attempt_at
          LIMIT $1
          FOR UPDATE OF m SKIP LOCKED)
       UPDATE mail_reply m SET next_attempt_at = now() + make_interval(secs => $2),
              first_attempt_at = COALESCE(m.first_attempt_at, now())
         FROM due WHERE m.source = due.source AND m.source_key = due.source_key
       RETURNING m.source, m.source_key, m.application_name, m.job_id, m.rejection, m.reply_to,
                 m.reply_cc, m.reply_subject, m.reply_from, m.in_reply_to, m.attach_max_bytes,
                 m.attempts, m.first_attempt_at`,
      [limit, leaseSeconds],
    );
    return rowsOf<DueRow>(raw).map((row) => ({
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
      attempts: row.attempts,
      firstAttemptAt: new Date(row.first_attempt_at),
    }));
  }

  async markSent(reply: DueReply): Promise<void> {
    await this.dataSource.query(
      `UPDATE mail_reply SET state = 'sent', attempts = attempts + 1, replied_at = now(),
              last_error = NULL
        WHERE source = $1 AND source_key = $2 AND state = 'pending'`,
      [reply.source, reply.sourceKey],
    );
  }

  /** An attempt failed: again at `retryAt`, or (null) given up. */
  async recordFailure(reply: DueReply, error: string, retryAt: Date | null): Promise<void> {
    await this.dataSource.query(
      `UPDATE mail_reply SET attempts = attempts + 1, last_error = $3,
              state = CASE WHEN $4::timestamptz IS NULL THEN 'failed' ELSE 'pending' END,
              next_attempt_at = COALESCE($4::timestamptz, next_attempt_at)
        WHERE source = $1 AND source_key = $2 AND state = 'pending'`,
      [reply.source, reply.sourceKey, error.slice(0, 1000), retryAt],
    );
  }

  /** An attempt cut short by this node's shutdown: due again at once. */
  async release(reply: DueReply): Promise<void> {
    await this.dataSource.query(
      `UPDATE mail_reply SET next_attempt_at = now()
        WHERE source = $1 AND source_key = $2 AND state = 'pending'`,
      [reply.source, reply.sourceKey],
    );
  }

  /** Settled records older than `days` go (a message is removed from its mailbox long before). */
  async deleteOlderThan(days: number): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM mail_reply WHERE state IN ('sent', 'failed', 'none')
          AND received_at < now() - make_interval(days => $1)`,
      [days],
    );
  }
}
