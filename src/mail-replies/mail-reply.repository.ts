import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { auditRowSql } from '../audit/audit.repository';
import { RESULT_MAIL_SOURCE } from '../config/mail-settings';
import { MailReplyJobsRepository } from '../queue/mail-reply-jobs.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
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

/** A reply's addressing as its statements' parameters, in their columns' order. */
function addressingParameters(addressing: ReplyAddressing): unknown[] {
  return [
    addressing.replyTo,
    addressing.cc,
    addressing.subject,
    addressing.from,
    addressing.inReplyTo,
    addressing.attachMaxBytes,
  ];
}

/**
 * Every statement about mail_reply (see mail-reply.entity.ts) but those of its reply's job,
 * which the queue owns (MailReplyJobsRepository): a reply owed is queued with it, in the same
 * transaction.
 */
@Injectable()
export class MailReplyRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly replyJobs: MailReplyJobsRepository,
    private readonly notifier: QueueNotifier,
  ) {}

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
   * `audit` (auditRowJson) is written by the same statement, so only by the node that settles;
   * the reply's job is queued in the same transaction. Returns whether this call settled it
   * (false: another node did first).
   */
  async settle(
    account: string,
    key: string,
    addressing: ReplyAddressing,
    rejection: string | null,
    audit: string | null = null,
  ): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const raw: unknown = await manager.query(
        `WITH settled AS (
         UPDATE mail_reply SET state = $3, rejection = $4, reply_to = $5, reply_cc = $6,
                reply_subject = $7, reply_from = $8, in_reply_to = $9, attach_max_bytes = $10
          WHERE source = $1 AND source_key = $2 AND state = 'received'
          RETURNING application_name),
       audited AS (${auditRowSql('$11', 'settled', 'settled.application_name', 'NULL::uuid')})
       SELECT count(*)::int AS settled FROM settled`,
        [
          account,
          key,
          addressing.replyTo === null ? MailReplyState.NONE : MailReplyState.PENDING,
          rejection,
          ...addressingParameters(addressing),
          audit,
        ],
      );
      if (rowsOf<{ settled: number }>(raw)[0]?.settled !== 1) {
        return false;
      }
      await this.replyJobs.queue(account, key, this.notifier.sender, manager);
      return true;
    });
  }

  /**
   * A reply owed for a job that is not a message's (MailReplyService.sendResult); once per job.
   * Given `transaction`, it is stored with what the transaction stores (a schedule's job), else
   * in one of its own; its job is queued with it.
   */
  async owe(
    jobId: string,
    applicationName: string,
    addressing: ReplyAddressing,
    transaction?: EntityManager,
  ): Promise<void> {
    if (transaction === undefined) {
      await this.dataSource.transaction((manager) =>
        this.owe(jobId, applicationName, addressing, manager),
      );
      return;
    }
    await transaction.query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_to, reply_cc, reply_subject, reply_from, in_reply_to,
                               attach_max_bytes)
       VALUES ($10, $1, $2, $9::uuid, 'pending', now(), $3, $4, $5, $6, $7, $8)
       ON CONFLICT DO NOTHING`,
      [jobId, applicationName, ...addressingParameters(addressing), jobId, RESULT_MAIL_SOURCE],
    );
    await this.replyJobs.queue(RESULT_MAIL_SOURCE, jobId, this.notifier.sender, transaction);
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
