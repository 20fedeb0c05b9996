import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * Where a mail_reply row is in its life: `received` (a message recorded, its job not yet stored),
 * `pending` (a reply is owed: sent once the job has a result, or at once for a refused message),
 * `sent`, `failed` (given up, the admin told), `none` (no reply: no address to reply to).
 */
export const MailReplyState = Object.freeze({
  RECEIVED: 'received',
  PENDING: 'pending',
  SENT: 'sent',
  FAILED: 'failed',
  NONE: 'none',
} as const);
export type MailReplyState = (typeof MailReplyState)[keyof typeof MailReplyState];

/**
 * A message taken from a mailbox (docs/operations.md#jobs-by-e-mail) and the reply it is owed,
 * or a job's result another module asked to send by e-mail (MailReplyService.sendResult).
 * The key is the account and the message's id in the mailbox (IMAP UIDVALIDITY:UID, POP3 UIDL):
 * recorded, with the job id the message will get, before its job is submitted; so every node
 * that sees the message again finds the record and submits under the same job id (a second
 * insert of the job fails on its primary key) or only removes the message.
 */
@Entity({ name: 'mail_reply' })
// The mail-reply jobs' claim finds each job's reply by it.
@Index('mail_reply_job_idx', ['replyJobId'], { where: 'reply_job_id IS NOT NULL' })
export class MailReplyEntity {
  /** The account's name, or `job` for a result sent at another module's request. */
  @PrimaryColumn({ type: 'varchar', length: 64, primaryKeyConstraintName: 'mail_reply_pk' })
  source!: string;

  @PrimaryColumn({
    name: 'source_key',
    type: 'varchar',
    length: 255,
    primaryKeyConstraintName: 'mail_reply_pk',
  })
  sourceKey!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 }) applicationName!: string;

  /** The job the message becomes (chosen before it is stored); a refused message's is never stored. */
  @Column({ name: 'job_id', type: 'uuid' }) jobId!: string;

  @Column({ type: 'varchar', length: 16 }) state!: MailReplyState;

  @Column({ name: 'received_at', type: 'timestamptz' }) receivedAt!: Date;

  /** Why the message is not a job: the reply says it. */
  @Column({ type: 'text', nullable: true }) rejection!: string | null;

  @Column({ name: 'reply_to', type: 'text', nullable: true }) replyTo!: string | null;
  @Column({ name: 'reply_cc', type: 'text', nullable: true }) replyCc!: string | null;
  @Column({ name: 'reply_subject', type: 'text', nullable: true }) replySubject!: string | null;
  @Column({ name: 'reply_from', type: 'varchar', length: 320 }) replyFrom!: string;
  /** The Message-ID replied to (In-Reply-To), when the message had one. */
  @Column({ name: 'in_reply_to', type: 'text', nullable: true }) inReplyTo!: string | null;
  /** Results larger than this are linked, not attached. */
  @Column({ name: 'attach_max_bytes', type: 'bigint' }) attachMaxBytes!: string;

  @Column({ type: 'int', default: 0 }) attempts!: number;
  /**
   * The job (kind `mail_reply`) that sends the reply while it is owed (docs/queue.md): queued
   * with the reply, run by a worker once it can go, gone when it is sent or given up.
   */
  @Column({ name: 'reply_job_id', type: 'uuid', nullable: true }) replyJobId!: string | null;
  /** The retry period (CALLBACK_RETRY_SECONDS) counts from here. */
  @Column({ name: 'first_attempt_at', type: 'timestamptz', nullable: true })
  firstAttemptAt!: Date | null;
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError!: string | null;
  @Column({ name: 'replied_at', type: 'timestamptz', nullable: true }) repliedAt!: Date | null;
}
