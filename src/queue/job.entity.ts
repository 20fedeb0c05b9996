import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { jobSourceOf, type JobKind, type JobSource, type JobState } from './queue.types';

/**
 * A submitted job: its domain data (application, meta) and its delivery state (the queue
 * columns: state, lease, attempts). One row per job; the files are in job_file.
 */
@Entity({ name: 'job' })
// The claim takes each application's queued jobs by priority (highest first) then age: the partial
// index job_claim_idx on (application_name, kind, priority DESC,
// submitted_at) WHERE state = 'QUEUED' AND kind IN ('script', 'xml', 'json')
// (migrations FairClaims, CallbackJobs, MailReplyJobs; see queue-claim.ts). TypeORM cannot describe a
// descending column, so the migrations own it and the schema check leaves it alone.
@Index('job_claim_idx', { synchronize: false })
@Index('job_lease_idx', ['leaseExpiresAt'], { where: `state = 'RUNNING'` })
// The callback claim takes queued callback jobs by due time; they are not in job_claim_idx.
@Index('job_callback_claim_idx', ['runAfter'], { where: `state = 'QUEUED' AND kind = 'callback'` })
// The mail-reply claim takes queued mail-reply jobs by due time; they are not in job_claim_idx.
@Index('job_mail_reply_claim_idx', ['runAfter'], {
  where: `state = 'QUEUED' AND kind = 'mail_reply'`,
})
// The admin list reads R jobs newest first (submitted_at DESC, id DESC: migration
// ConsoleJobsAndWorkers), as do the console's overview and event stream; descending, so the
// migration owns it too.
@Index('job_admin_list_idx', { synchronize: false })
// A submission that could start at once in a free slot asks whether any R job of its slot's
// kinds is queued and due (queue-intake.ts; migration QueuedKindIndex).
@Index('job_queued_kind_idx', ['kind', 'runAfter'], {
  where: `state = 'QUEUED' AND kind IN ('script', 'xml', 'json')`,
})
// Deleting a job deletes its callback job (the foreign key's cascade looks them up here).
@Index('job_callback_of_idx', ['callbackOf'], { where: 'callback_of IS NOT NULL' })
export class JobEntity {
  @PrimaryColumn('uuid') id!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 }) applicationName!: string;

  @Column({ type: 'varchar', length: 16 }) kind!: JobKind;

  @Column({ type: 'varchar', length: 16 }) state!: JobState;

  @Column({ type: 'int', default: 0 }) priority!: number;

  /** Merged meta parameters (configuration.txt, then request): name -> value. */
  @Column({ type: 'jsonb' }) meta!: Record<string, string>;

  /** Where the job came from (checked as it is read). */
  @Column({
    type: 'varchar',
    length: 16,
    transformer: { to: (source: JobSource) => source, from: jobSourceOf },
  })
  source!: JobSource;

  @Column({ name: 'submitted_at', type: 'timestamptz' }) submittedAt!: Date;

  /**
   * Who submitted it: the caller's principal with its kind (user:alice); null for a job the
   * service made (a schedule's run, a drop directory's file, a mailbox's message) or an
   * anonymous caller's.
   */
  @Column({ name: 'submitted_by', type: 'varchar', length: 300, nullable: true })
  submittedBy!: string | null;

  /**
   * A function call's R function, set at intake: the exported function called, else the
   * application's svcXmlService or svcJsonService; null for a script job. Kept with the job (the
   * input file that names an exported call goes once the job succeeds), for the console's list.
   */
  @Column({ name: 'function_name', type: 'varchar', length: 255, nullable: true })
  functionName!: string | null;

  /** Not claimed before this time (retry back-off). */
  @Column({ name: 'run_after', type: 'timestamptz' }) runAfter!: Date;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true }) startedAt!: Date | null;

  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true }) finishedAt!: Date | null;

  @Column({ type: 'int', default: 0 }) attempts!: number;

  /**
   * How many times the node running it died or froze (its lease expired while RUNNING); at
   * LOST_RUNS_LIMIT the job is dead-lettered as a possible poison job (docs/queue.md).
   */
  @Column({ name: 'lost_runs', type: 'int', default: 0 }) lostRuns!: number;

  @Column({ name: 'lease_owner', type: 'varchar', length: 128, nullable: true }) leaseOwner!:
    string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt!: Date | null;

  /** Why the last attempt could not run (infrastructure failures only). */
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError!: string | null;

  /** Set when the job was cancelled (it is then DONE with the cancellation result). */
  @Column({ name: 'cancelled_at', type: 'timestamptz', nullable: true }) cancelledAt!: Date | null;

  /** Who cancelled it: the principal with its kind (user:alice), or "anonymous". */
  @Column({ name: 'cancelled_by', type: 'varchar', length: 256, nullable: true }) cancelledBy!:
    string | null;

  /** The last progress its R code reported with svc_progress (0 to 1), null before any. */
  @Column({ name: 'progress_fraction', type: 'double precision', nullable: true })
  progressFraction!: number | null;

  /** The message of that report ('' when it had none). */
  @Column({ name: 'progress_message', type: 'varchar', length: 500, nullable: true })
  progressMessage!: string | null;

  /** Where the result is POSTed when the job ends (docs/api.md#job-callbacks); null: nowhere. */
  @Column({ name: 'callback_url', type: 'varchar', length: 2048, nullable: true })
  callbackUrl!: string | null;

  /** The public base URL the job was submitted under: the links in the callback's body use it. */
  @Column({ name: 'callback_links_base', type: 'varchar', length: 2048, nullable: true })
  callbackLinksBase!: string | null;

  /**
   * The W3C trace context the job was submitted in (its `traceparent` and `tracestate`), so its
   * run and callback join that trace; null when tracing was off.
   */
  @Column({ type: 'varchar', length: 55, nullable: true }) traceparent!: string | null;

  @Column({ type: 'varchar', length: 512, nullable: true }) tracestate!: string | null;

  /** A callback job's job: the callback delivers that job's result, and is deleted with it. */
  @Column({ name: 'callback_of', type: 'uuid', nullable: true }) callbackOf!: string | null;

  @ManyToOne(() => JobEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'callback_of', foreignKeyConstraintName: 'job_callback_of_fk' })
  callbackOfJob?: JobEntity;
}
