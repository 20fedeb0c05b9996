/**
 * Glossary
 * - claim: one worker slot takes a queued job and marks it RUNNING under a lease: the next
 *   application in fair turn (its share), within it the highest priority, then the oldest;
 *   `FOR UPDATE SKIP LOCKED` lets many workers claim at once without waiting on each other.
 * - share: (an application's running jobs + n) / its weight for the n-th job it could start;
 *   the lowest shares are claimed first, so applications hold slots in proportion to weight.
 * - cap: an application's maxRunningJobs across the cluster; capped claims are serialised by
 *   an advisory lock so that two nodes cannot both take the last place.
 * - lease: the time until which a RUNNING job belongs to its worker; heartbeats extend it.
 * - expired lease: the worker died or lost the database; the supervisor puts the job back
 *   (QUEUED) or, when its attempts are used up, ends it with a dead-letter result.
 * - lost run: a run whose lease expired (the node died or froze while running it), counted in
 *   job.lost_runs. A job that did it LOST_RUNS_LIMIT times is dead-lettered: it may be what
 *   crashes or freezes the nodes (a poison job).
 * - attempt: one claim of a job. R errors end a job on its first attempt; only infrastructure
 *   failures (R could not be started, the worker vanished) lead to another.
 *
 * QueueRepository is the queue's one entry point; its SQL is in files by what the statements are
 * for: queue-intake.ts (a new job), queue-claim.ts (the claim), queue-leases.ts (heartbeats,
 * retries, the supervisor's pass), queue-completion.ts (ending a job), queue-reads.ts (counts),
 * queue-retention.ts (deleting old data), queue-channels.ts (the notifications they send); the
 * callback jobs' claim, retry and end are in callback-jobs.repository.ts. Each hot-path operation
 * is one statement. The job table's other statements, those that other modules call, are in
 * job-records.repository.ts.
 */
import { Injectable, OnModuleDestroy, Optional } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import {
  ClaimedJob,
  ExpiredJob,
  JobKind,
  JobState as JobStateName,
  jobSourceOf,
  NewJobRow,
  R_JOB_KINDS,
  ResultData,
} from './queue.types';
import { notificationPrefix } from '../storage/database-events.service';
import { NodeIdentity } from '../storage/node-identity';
import { DatabaseConfig } from '../config/config-slices';
import { ClaimConnection } from './claim-connection';
import type { ClaimPolicies } from '../config/application-settings';
import { activeTraceCarrier, inSpan, TraceCarrier, tracingEnabled } from '../tracing/tracing';
import { JOB_STARTED_CHANNEL } from './queue-channels';
import {
  EnqueueOptions,
  EnqueueOutcome,
  inlineIfSmall,
  insertChunkedFile,
  insertJob,
  isContent,
  startedJob,
} from './queue-intake';
import { DirectStarts } from './direct-starts';
import { CLAIM_SQL, ClaimRow, NO_CLAIM_POLICIES, runClaim } from './queue-claim';
import { cancel, complete } from './queue-completion';
import {
  copyNeededResult,
  NeededResult,
  neededResults,
  readNeededResult,
  rerunFailed,
} from './queue-needs';
import { writeFile } from 'node:fs/promises';
import { heartbeat, recoverExpiredLeases, release, retryLater } from './queue-leases';
import { deleteExpiredResults, deleteExpiredUsage } from './queue-retention';
import {
  jobsPerApplication,
  queueBacklog,
  queueDepth,
  queuedJobsOf,
  queueRoomOf,
} from './queue-reads';

@Injectable()
export class QueueRepository implements OnModuleDestroy {
  /** Before each payload this node notifies. */
  private readonly sender: string;

  /**
   * Where the node reaches PostgreSQL directly: the claim's own connection, on which the claim is
   * a named prepared statement planned once (ClaimConnection). Through PgBouncer's transaction
   * pooling or on the embedded database, whose connections share sessions: null, and the claim
   * is sent unnamed on a pooled connection, planned on each call.
   */
  private readonly claimConnection: ClaimConnection | null;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    node: NodeIdentity,
    @Optional() config?: DatabaseConfig,
    @Optional() private readonly directStarts?: DirectStarts,
  ) {
    this.sender = notificationPrefix(node.id);
    this.claimConnection =
      config?.databaseUrl && config.databasePooler === 'none'
        ? new ClaimConnection(config.databaseUrl)
        : null;
  }

  async onModuleDestroy(): Promise<void> {
    await this.claimConnection?.close();
  }

  /**
   * Stores a new job, its files and the wake-up notification atomically: all or nothing, and
   * the notification is delivered on commit, so no worker wakes before the job and all its
   * files are visible. Files in memory, and files on disk up to BLOB_INLINE_MAX_BYTES, are
   * stored inline in ONE statement (no explicit transaction: one round trip instead of five,
   * which is most of a submission's database time). Larger files on disk are streamed into
   * job_file_chunk in one transaction (src/storage/blob-chunks.ts), so a failed upload leaves
   * nothing behind. With `transaction`, everything is stored in that outer transaction instead
   * (a scheduled job with its schedule_run key): its notification is delivered at its commit.
   *
   * With `maxQueued` (the application's maxQueuedJobs), admission and insert are one decision
   * across nodes: the transaction takes the application's advisory lock, counts the jobs queued
   * and stores the job only below the limit (docs/queue.md#maxqueuedjobs); a refusal gives the
   * jobs queued that refused it. Every statement runs on `transaction` when given: nothing here
   * waits for a second connection (the embedded database has one).
   *
   * With `startHere`, a job stored by its own statement may start at once in a free slot of this
   * node's worker (DirectStarts, insertJob): then `startedHere`, and no claim is needed.
   */
  async enqueue(job: NewJobRow, options: EnqueueOptions = {}): Promise<EnqueueOutcome> {
    if (!tracingEnabled()) {
      return this.store(job, null, options);
    }
    // The job's span: a child of the submitting request's (REST, form, SOAP), or a new trace
    // (a drop directory). Stored with the job, its context is the parent of the job's run.
    return inSpan(
      'svc.job.enqueue',
      {
        attributes: {
          'svc.job.id': job.id,
          'svc.application': job.applicationName,
          'svc.job.kind': job.kind,
          'svc.job.source': job.source,
        },
      },
      () => this.store(job, activeTraceCarrier(), options),
    );
  }

  private async store(
    job: NewJobRow,
    trace: TraceCarrier | null,
    { transaction, maxQueued = null, startHere = false }: EnqueueOptions,
  ): Promise<EnqueueOutcome> {
    const files = await Promise.all(job.files.map(inlineIfSmall));
    const inline = files.filter(isContent);
    if (maxQueued === null && inline.length === files.length) {
      // Only a job committed by its own statement can start at once (an outer transaction
      // commits later, or not at all).
      const held =
        startHere && transaction === undefined
          ? (this.directStarts?.hold(job.id, job.applicationName, job.kind) ?? null)
          : null;
      let startedMeta: Record<string, string> | null = null;
      try {
        startedMeta = await insertJob(
          transaction ?? this.dataSource.manager,
          job,
          inline,
          this.sender,
          trace,
          held,
        );
      } finally {
        if (held && startedMeta) {
          held.start(startedJob(job, startedMeta, inline, trace));
        } else {
          held?.release();
        }
      }
      return { stored: true, startedHere: startedMeta !== null };
    }
    const storeAll = async (manager: EntityManager): Promise<EnqueueOutcome> => {
      if (maxQueued !== null) {
        const { room, queued } = await queueRoomOf(manager, job.applicationName, maxQueued);
        if (!room) {
          return { stored: false, queued };
        }
      }
      // The notification the statement sends is delivered on commit, after the large files.
      await insertJob(manager, job, inline, this.sender, trace);
      for (const file of files) {
        if (!isContent(file)) {
          await insertChunkedFile(manager, job.id, file);
        }
      }
      return { stored: true, startedHere: false };
    };
    return transaction ? storeAll(transaction) : this.dataSource.transaction(storeAll);
  }

  /**
   * Claims up to `limit` jobs for `owner`, with their input files (one round trip less per job
   * than fetching them after). With `applicationName`, only that application's jobs (a
   * dedicated slot).
   *
   * Fair share: when several applications have jobs queued, the free slots go to them in turn,
   * weighted: the n-th job an application could start now has the share (running + n) / weight,
   * and the claim takes the lowest shares (ties: priority, then submission). Within one
   * application, jobs start by priority (highest first), then in submission order. The queued
   * applications are found by a skip scan of job_claim_idx (application_name, kind, priority
   * DESC, submitted_at) WHERE state = 'QUEUED' (one index descent per application), the first
   * jobs of the few applications whose turn comes first by one descent per kind, and the
   * running counts by one pass over the running jobs (job_lease_idx): docs/queue.md has the
   * plans with 100,000 queued jobs over 100 applications and over one.
   *
   * An application with maxRunningJobs never gets a job beyond it. Two nodes claiming at once
   * would each count the other's claim as not yet running, so when any application has a cap
   * the claim runs in a transaction that first takes an advisory lock shared by all capped
   * claims: the statement's snapshot, taken after the lock, sees every job claimed before.
   */
  async claim(
    owner: string,
    limit: number,
    leaseSeconds: number,
    applicationName: string | null,
    kinds: readonly JobKind[] | null = null,
    more: { kinds: readonly JobKind[]; limit: number } | null = null,
    policies: ClaimPolicies = NO_CLAIM_POLICIES,
  ): Promise<ClaimedJob[]> {
    // `more`: a second pool's jobs of other kinds claimed by the same statement (a worker's
    // script and function-call slots), one round trip where two would mostly find nothing.
    const parameters = [
      owner,
      limit,
      leaseSeconds,
      applicationName,
      JOB_STARTED_CHANNEL,
      kinds ?? R_JOB_KINDS,
      more?.kinds ?? [],
      more?.limit ?? 0,
      this.sender,
      policies.applications,
      policies.weights,
      policies.maxRunning,
    ];
    const capped = policies.applications.filter(
      (app, i) =>
        policies.maxRunning[i] !== null && (applicationName === null || app === applicationName),
    );
    const raw = await this.claimRows(parameters, capped.length > 0);
    return raw.map((row) => ({
      id: row.id,
      applicationName: row.application_name,
      kind: row.kind,
      meta: row.meta,
      submittedAt: new Date(row.submitted_at),
      attempts: row.attempts,
      source: jobSourceOf(row.source),
      hasCallback: row.has_callback,
      hasJobWait: row.has_job_wait,
      trace: row.traceparent ? { traceparent: row.traceparent, tracestate: row.tracestate } : null,
      files: (row.file_names ?? []).map((name, i) => {
        const chunkedId = (row.file_chunked_ids ?? [])[i] ?? null;
        return {
          name,
          content: (row.file_contents ?? [])[i],
          chunked:
            chunkedId === null
              ? null
              : { fileId: chunkedId, size: Number((row.file_sizes ?? [])[i]) },
        };
      }),
    }));
  }

  /**
   * Runs CLAIM_SQL: on the claim's own connection as a named prepared statement with its generic
   * plan, or unnamed on a pooled connection (see claimConnection). With a capped application, in
   * a transaction behind the capped claims' advisory lock.
   */
  private async claimRows(parameters: unknown[], capped: boolean): Promise<ClaimRow[]> {
    if (this.claimConnection) {
      const client = await this.claimConnection.connect();
      let failure: Error | undefined;
      try {
        return await runClaim(
          client,
          { name: 'svc_claim', text: CLAIM_SQL, values: parameters },
          capped,
        );
      } catch (error) {
        failure = error as Error;
        throw error;
      } finally {
        // After a failure the connection may be broken: the next claim opens another.
        client.release(failure);
      }
    }
    const runner = this.dataSource.createQueryRunner();
    try {
      const client = (await runner.connect()) as PoolClient;
      return await runClaim(client, { text: CLAIM_SQL, values: parameters }, capped);
    } finally {
      await runner.release();
    }
  }

  /** Extends the leases `owner` still holds; returns the ids it still holds (queue-leases.ts). */
  heartbeat(owner: string, jobIds: string[], leaseSeconds: number): Promise<string[]> {
    return heartbeat(this.dataSource, owner, jobIds, leaseSeconds);
  }

  /** Stores the job's one result and ends it, if `owner` still holds it (queue-completion.ts). */
  complete(jobId: string, owner: string | null, result: ResultData): Promise<boolean> {
    return complete(this.dataSource, this.sender, jobId, owner, result);
  }

  /** Cancels a job that has not finished; returns the state it was in (queue-completion.ts). */
  cancel(
    applicationName: string,
    jobId: string,
    cancelledBy: string,
    cancelledAt: Date,
    result: ResultData,
    audit: string | null = null,
  ): Promise<JobStateName | null> {
    return cancel(
      this.dataSource,
      this.sender,
      applicationName,
      jobId,
      cancelledBy,
      cancelledAt,
      result,
      audit,
    );
  }

  /** Puts a job back in the queue, not before `delayMs` (queue-leases.ts). */
  retryLater(jobId: string, owner: string, error: string, delayMs: number): Promise<boolean> {
    return retryLater(this.dataSource, jobId, owner, error, delayMs);
  }

  /**
   * A failed run of a job with reruns left (a flow's step) back in the queue after `delayMs`, if
   * `owner` holds it; false when none is left (queue-needs.ts).
   */
  rerunFailed(jobId: string, owner: string, delayMs: number): Promise<boolean> {
    return rerunFailed(this.dataSource.manager, jobId, owner, delayMs);
  }

  /** The results of the jobs a job waited for, by their names (queue-needs.ts). */
  neededResults(jobId: string): Promise<NeededResult[]> {
    return neededResults(this.dataSource.manager, jobId);
  }

  /** A needed result's bytes, whole (queue-needs.ts). */
  async neededResultData(result: NeededResult): Promise<Buffer> {
    return result.pieces === null
      ? (result.data ?? Buffer.alloc(0))
      : readNeededResult(this.dataSource.manager, result.pieces);
  }

  /** A needed result's bytes written to a new file at `path`, streamed (queue-needs.ts). */
  async copyNeededResult(result: NeededResult, path: string): Promise<void> {
    if (result.pieces === null) {
      await writeFile(path, result.data ?? Buffer.alloc(0), { flag: 'wx', mode: 0o600 });
    } else {
      await copyNeededResult(this.dataSource.manager, result.pieces, path);
    }
  }

  /** Graceful shutdown: hands unfinished jobs back (queue-leases.ts). */
  release(owner: string, jobIds: string[]): Promise<number> {
    return release(this.dataSource, owner, jobIds);
  }

  /** The supervisor's pass over expired leases (queue-leases.ts). */
  recoverExpiredLeases(
    maxAttempts: number,
    lostRunDelaySeconds: number,
    deadLetter: (job: ExpiredJob) => ResultData,
  ): Promise<{ requeued: number; exhausted: ExpiredJob[] }> {
    return recoverExpiredLeases(
      this.dataSource,
      this.sender,
      maxAttempts,
      lostRunDelaySeconds,
      deadLetter,
    );
  }

  /** Deletes usage records older than `days` (queue-retention.ts). */
  deleteExpiredUsage(days: number): Promise<number> {
    return deleteExpiredUsage(this.dataSource, days);
  }

  /** Deletes results past their application's retention (queue-retention.ts). */
  deleteExpiredResults(
    defaultHours: number,
    hoursByApplication: Record<string, number> = {},
  ): Promise<number> {
    return deleteExpiredResults(this.dataSource, defaultHours, hoursByApplication);
  }

  /** Jobs queued plus running, for metrics (queue-reads.ts). */
  queueBacklog(): Promise<number> {
    return queueBacklog(this.dataSource);
  }

  /** Jobs of `applicationName` queued, counted up to `atMost` (queue-reads.ts). */
  queuedJobsOf(
    applicationName: string,
    atMost: number,
    runner: DataSource | EntityManager = this.dataSource,
  ): Promise<number> {
    return queuedJobsOf(this.dataSource, applicationName, atMost, runner);
  }

  /** Jobs queued and running per application (queue-reads.ts). */
  jobsPerApplication(): Promise<
    Array<{ applicationName: string; state: 'QUEUED' | 'RUNNING'; jobs: number }>
  > {
    return jobsPerApplication(this.dataSource);
  }

  /** Jobs waiting to run, for metrics and tests (queue-reads.ts). */
  queueDepth(): Promise<number> {
    return queueDepth(this.dataSource);
  }
}
