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
 * The queue's SQL is in this file, but for the callback jobs' claim, retry and end
 * (callback-jobs.repository.ts). Each hot-path operation is one statement. The job table's other
 * statements, those that other modules call, are in job-records.repository.ts.
 */
import { auditRowPerJobSql } from '../audit/audit.repository';
import { readFile, stat } from 'node:fs/promises';
import { Injectable, OnModuleDestroy, Optional } from '@nestjs/common';
import type { PoolClient, QueryConfig } from 'pg';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import {
  ClaimedJob,
  ExpiredJob,
  JobFileContent,
  JobFileInput,
  JobFilePath,
  JobKind,
  JobState as JobStateName,
  NewJobRow,
  R_JOB_KINDS,
  ResultData,
} from './queue.types';
import {
  BLOB_INLINE_MAX_BYTES,
  filePieces,
  JOB_FILE_CHUNKS,
  RESULT_CHUNKS,
  writeChunks,
} from '../storage/blob-chunks';
import { notificationPrefix } from '../storage/database-events.service';
import { NodeIdentity } from '../storage/node-identity';
import { rowsOf } from '../storage/query-rows';
import { DatabaseConfig } from '../config/config-slices';
import { ClaimConnection } from './claim-connection';
import type { ClaimPolicies } from '../config/application-settings';
import { activeTraceCarrier, inSpan, TraceCarrier, tracingEnabled } from '../tracing/tracing';

/*
 * The statements below send their notifications themselves (delivered at commit), each payload
 * after this node's prefix (`<node id> `, see DatabaseEvents): this node delivers them in-process
 * (QueueNotifier) and ignores their echo.
 */
/**
 * A job whose running node died or froze this many times is dead-lettered whatever attempts it
 * has left: two, since one can be the node's own fault, and every further run could take down
 * another node.
 */
export const LOST_RUNS_LIMIT = 2;

/** last_error, and the dead letter's reason, for a job that reached LOST_RUNS_LIMIT. */
export const LOST_RUNS_ERROR =
  'the job was stopped after the nodes running it stopped responding twice; ' +
  'it may crash or freeze the service';

/** last_error after any other expired lease. */
const LEASE_EXPIRED_ERROR = 'the worker running it stopped responding (lease expired)';
/** The lease owner of a job the supervisor is ending with a dead letter, within its transaction. */
const SUPERVISOR = 'supervisor';

/** Payload: the queued job's kind (script, xml, json), so a worker claims only for slots that can take it. */
export const JOB_QUEUED_CHANNEL = 'svc_job_queued';
/** Payload: the job id, once its result is stored (sent by the statement that stores it). */
export const RESULT_READY_CHANNEL = 'svc_result_ready';
/** Payload: the ids of the jobs one claim started, comma-separated (sent by the claim). */
export const JOB_STARTED_CHANNEL = 'svc_job_started';
/** A job's callback was queued (its result stored): wakes the workers' callback slots. */
export const CALLBACK_QUEUED_CHANNEL = 'svc_callback_queued';

/**
 * The usage record of a job that has just ended (table job_usage), written by the statement that
 * stores its result from the `done` row it updated: `$outcome`, `$cpu` and `$bytesOut` are
 * replaced by the statement's parameters. Its input bytes are read in the same snapshot as the
 * DELETE of its files, so they are still there.
 */
function usageInsert(outcome: string, cpu: string, bytesOut: string): string {
  return `INSERT INTO job_usage (job_id, application_name, kind, outcome, submitted_at, started_at,
                                 finished_at, r_cpu_ms, bytes_in, bytes_out)
         SELECT done.id, done.application_name, done.kind, ${outcome}, done.submitted_at,
                done.started_at, done.finished_at, ${cpu},
                (SELECT coalesce(sum(size), 0) FROM job_file WHERE job_file.job_id = done.id), ${bytesOut}
           FROM done
         ON CONFLICT (job_id) DO NOTHING`;
}

/** What the UPDATE that ends a job returns for its usage record and its callback. */
const DONE_COLUMNS =
  'id, application_name, kind, submitted_at, started_at, finished_at, callback_url, ' +
  'callback_links_base, traceparent, tracestate';

/**
 * Data-modifying CTEs for the statements that end a job: queue the callback of the job the
 * `done` CTE returned (with its callback_url), so the callback commits with the result: its
 * job_callback row (what job status shows) and its callback job (kind `callback`, due now),
 * which the workers claim, lease and retry like any job (CallbackJobsRepository). The callback's notice
 * (callbackQueuedNotice), in the statement's result, wakes the workers' callback slots: only for
 * a job that has a callback, so the others cost them no look.
 */
const QUEUE_CALLBACK_CTE = `callback_queued AS (
         INSERT INTO job_callback (job_id, url, state, attempts, created_at)
         SELECT done.id, done.callback_url, 'pending', 0, now() FROM done
          WHERE done.callback_url IS NOT NULL
         ON CONFLICT (job_id) DO NOTHING
         RETURNING job_id),
       callback_job AS (
         INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after,
                          attempts, callback_url, callback_links_base, traceparent, tracestate, callback_of)
         SELECT gen_random_uuid(), done.application_name, 'callback', 'QUEUED', 0, '{}', 'callback', now(), now(),
                0, done.callback_url, done.callback_links_base, done.traceparent, done.tracestate, done.id
           FROM done JOIN callback_queued c ON c.job_id = done.id)`;

/**
 * The filter that keeps callback jobs out of what shows or counts as a job (and lets the
 * statements on queued jobs use job_claim_idx, whose predicate has it).
 */
const NOT_CALLBACK = "kind <> 'callback'";

/** `svc_callback_queued` for each row callback_queued inserted; `channel` and `sender` placeholders. */
function callbackQueuedNotice(channel: string, sender: string): string {
  return `(SELECT count(pg_notify(${channel}, ${sender}::text || c.job_id::text)) FROM callback_queued c)`;
}

interface ClaimRow {
  id: string;
  application_name: string;
  kind: JobKind;
  meta: Record<string, string>;
  submitted_at: Date;
  attempts: number;
  source: string;
  has_callback: boolean;
  traceparent: string | null;
  tracestate: string | null;
  /** NULL when the job has no files (array_agg over no rows). */
  file_names: string[] | null;
  file_contents: Buffer[] | null;
  /** Per file: its id when it is in pieces, else NULL (bigint: a string). */
  file_chunked_ids: Array<string | null> | null;
  file_sizes: string[] | null;
}

function isContent(file: JobFileInput): file is JobFileContent {
  return 'content' in file;
}

/** How `QueueRepository.enqueue` stores a job: in an outer transaction, under a queue limit. */
export interface EnqueueOptions {
  /** The transaction to store the job in (committed by its owner); else one of its own. */
  transaction?: EntityManager;
  /** The application's maxQueuedJobs: the job is stored only while fewer are queued. */
  maxQueued?: number | null;
}

/** A file on disk small enough to be inline is read here, so that it takes the fast path. */
async function inlineIfSmall(file: JobFileInput): Promise<JobFileInput> {
  if (isContent(file) || (await stat(file.path)).size > BLOB_INLINE_MAX_BYTES) {
    return file;
  }
  return { name: file.name, content: await readFile(file.path) };
}

/** The longest tracestate stored; a longer one (W3C allows dropping it) is not. */
const TRACESTATE_MAX_LENGTH = 512;

/** The job row, its inline files and the wake-up notification, in one statement. */
async function insertJob(
  manager: EntityManager,
  job: NewJobRow,
  files: JobFileContent[],
  sender: string,
  trace: TraceCarrier | null,
): Promise<void> {
  const tracestate =
    trace?.tracestate && trace.tracestate.length <= TRACESTATE_MAX_LENGTH ? trace.tracestate : null;
  await manager.query(
    `WITH new_job AS (
       INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, attempts,
                        callback_url, callback_links_base, traceparent, tracestate)
       VALUES ($1, $2, $3, 'QUEUED', $15, $4, $5, $6, $6, 0, $10, $11, $13, $14)
       RETURNING id, application_name),
     new_audit AS (${auditRowPerJobSql('$16', 'new_job')}),
     new_files AS (
       INSERT INTO job_file (job_id, name, content, size)
       SELECT new_job.id, f.name, f.content, octet_length(f.content)
         FROM new_job, unnest($7::varchar[], $8::bytea[]) AS f(name, content))
     SELECT pg_notify($9, $12::text || $3) FROM new_job`,
    [
      job.id,
      job.applicationName,
      job.kind,
      JSON.stringify(job.meta),
      job.source,
      job.submittedAt,
      files.map((f) => f.name),
      files.map((f) => f.content),
      JOB_QUEUED_CHANNEL,
      job.callback?.url ?? null,
      job.callback?.linksBase ?? null,
      sender,
      trace?.traceparent ?? null,
      tracestate,
      job.priority ?? 0,
      job.audit ?? null,
    ],
  );
}

async function insertChunkedFile(
  manager: EntityManager,
  jobId: string,
  file: JobFilePath,
): Promise<void> {
  const raw: unknown = await manager.query(
    `INSERT INTO job_file (job_id, name, content, size, chunked)
     VALUES ($1, $2, ''::bytea, 0, true) RETURNING id`,
    [jobId, file.name],
  );
  const fileId = rowsOf<{ id: string }>(raw)[0].id;
  const { size } = await writeChunks(manager, JOB_FILE_CHUNKS, fileId, filePieces(file.path));
  await manager.query('UPDATE job_file SET size = $2 WHERE id = $1', [fileId, size]);
}

/**
 * The backlog: jobs queued plus jobs running, all applications, as `backlog`. Workers are scaled
 * on it (the KEDA ScaledObject of deploy/kubernetes runs this text; /metrics serves it as
 * svc_queue_backlog): ceil(backlog / SCRIPT_SLOTS) workers keep every job in a slot. Two counts
 * rather than `state IN (...)`, which the planner answers with a pass over the whole table: each
 * count reads only its own partial index (job_claim_idx on QUEUED, job_lease_idx on RUNNING).
 */
export const QUEUE_BACKLOG_SQL =
  "SELECT (SELECT count(*) FROM job WHERE state = 'QUEUED' AND kind <> 'callback') + (SELECT count(*) FROM job WHERE state = 'RUNNING' AND kind <> 'callback') AS backlog";

/** No application with a weight or a running cap of its own. */
const NO_CLAIM_POLICIES: ClaimPolicies = { applications: [], weights: [], maxRunning: [] };

/**
 * The claim (QueueRepository.claim). $1 owner, $2 the first pool's free slots, $3 lease seconds,
 * $4 the dedicated slot's application or NULL, $5 JOB_STARTED_CHANNEL, $6 the first pool's
 * kinds, $7 the second pool's kinds, $8 its free slots, $9 the sender, $10-$12 the applications
 * with a weight or a cap of their own, their weights and caps (NULL: none).
 */
export const CLAIM_SQL = `WITH RECURSIVE queued_apps(application_name) AS (
         -- The lower bound lets the generic plan (ClaimConnection) start its descent at a
         -- dedicated slot's application instead of filtering every application before it.
         (SELECT application_name FROM job
           WHERE state = 'QUEUED' AND kind <> 'callback' AND application_name >= coalesce($4::varchar, '')
             AND ($4::varchar IS NULL OR application_name = $4::varchar)
           ORDER BY application_name LIMIT 1)
         UNION ALL
         SELECT (SELECT j.application_name FROM job j
                  WHERE j.state = 'QUEUED' AND j.kind <> 'callback' AND j.application_name > q.application_name
                    AND $4::varchar IS NULL
                  ORDER BY j.application_name LIMIT 1)
           FROM queued_apps q WHERE q.application_name IS NOT NULL),
       policy AS (
         SELECT * FROM unnest($10::varchar[], $11::float8[], $12::int[]) AS p(application_name, weight, max_running)),
       running AS (
         SELECT application_name, count(*)::int AS n FROM job
          WHERE state = 'RUNNING' AND kind <> 'callback' GROUP BY application_name),
       apps AS (
         SELECT q.application_name, coalesce(p.weight, 1) AS weight, coalesce(r.n, 0) AS running,
                least($2::int + $8::int, coalesce(p.max_running - coalesce(r.n, 0), $2::int + $8::int)) AS room
           FROM queued_apps q
           LEFT JOIN policy p ON p.application_name = q.application_name
           LEFT JOIN running r ON r.application_name = q.application_name
          WHERE q.application_name IS NOT NULL),
       -- Only the $2::int + $8::int applications whose next turn comes first can get one of the slots.
       picked_apps AS (
         SELECT * FROM apps WHERE room > 0
          ORDER BY (running + 1) / weight, application_name
          LIMIT $2::int + $8::int),
       -- Each picked application's first jobs of each kind (one index descent per kind), locked,
       -- at most its room under maxRunningJobs; its n-th job's share is (running + n) / weight.
       candidates AS (
         SELECT c.id, c.pool, c.priority, c.submitted_at,
                (a.running + row_number() OVER (PARTITION BY a.application_name
                                                ORDER BY c.priority DESC, c.submitted_at)) / a.weight AS share
           FROM picked_apps a
           CROSS JOIN LATERAL (
             SELECT k.id, k.pool, k.priority, k.submitted_at
               FROM (SELECT kind, CASE WHEN kind = ANY($6::varchar[]) THEN 1 ELSE 2 END AS pool
                       FROM unnest($6::varchar[] || $7::varchar[]) AS kind) wanted
               CROSS JOIN LATERAL (
                 SELECT j.id, wanted.pool, j.priority, j.submitted_at FROM job j
                  WHERE j.state = 'QUEUED' AND j.kind <> 'callback' AND j.application_name = a.application_name
                    AND j.kind = wanted.kind AND j.run_after <= now()
                  ORDER BY j.priority DESC, j.submitted_at
                  LIMIT CASE WHEN wanted.pool = 1 THEN $2 ELSE $8 END
                  FOR UPDATE SKIP LOCKED) k
              ORDER BY k.priority DESC, k.submitted_at
              LIMIT a.room) c),
       -- Each pool its free slots' worth, lowest shares first.
       next AS (
         SELECT id FROM (
           SELECT id, pool, row_number() OVER (PARTITION BY pool ORDER BY share, priority DESC, submitted_at) AS pick
             FROM candidates) ranked
          WHERE pick <= CASE WHEN pool = 1 THEN $2 ELSE $8 END
          LIMIT $2::int + $8::int),
       claimed AS (
         UPDATE job SET state = 'RUNNING', attempts = job.attempts + 1, started_at = now(),
                lease_owner = $1, lease_expires_at = now() + make_interval(secs => $3)
          -- By primary key whatever the plan's estimate of how many (a generic plan's LIMIT
          -- is unknown, and a join would read the whole table).
          WHERE job.id = ANY (ARRAY(SELECT id FROM next))
         RETURNING job.id, job.application_name, job.kind, job.meta, job.priority, job.submitted_at, job.attempts, job.source,
                   job.callback_url IS NOT NULL AS has_callback, job.traceparent, job.tracestate)
       SELECT claimed.*, files.names AS file_names, files.contents AS file_contents,
              files.chunked_ids AS file_chunked_ids, files.sizes AS file_sizes,
              -- Evaluated once, and only when a job was claimed: clients waiting for a change
              -- of state learn of the start (JOB_STARTED_CHANNEL).
              (SELECT pg_notify($5, $9::text || string_agg(id::text, ',')) FROM claimed) AS notified
         FROM claimed
         CROSS JOIN LATERAL (
           SELECT array_agg(f.name ORDER BY f.id) AS names, array_agg(f.content ORDER BY f.id) AS contents,
                  array_agg(CASE WHEN f.chunked THEN f.id END ORDER BY f.id) AS chunked_ids,
                  array_agg(f.size ORDER BY f.id) AS sizes
             FROM job_file f WHERE f.job_id = claimed.id) AS files
        ORDER BY claimed.priority DESC, claimed.submitted_at`;

/** The claim on `client`; with a capped application, behind the capped claims' advisory lock. */
async function runClaim(
  client: PoolClient,
  statement: QueryConfig,
  capped: boolean,
): Promise<ClaimRow[]> {
  if (!capped) {
    return (await client.query<ClaimRow>(statement)).rows;
  }
  await client.query('BEGIN');
  try {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('svc.claim.capped'))`);
    const rows = (await client.query<ClaimRow>(statement)).rows;
    await client.query('COMMIT');
    return rows;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

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
   * and stores the job only below the limit (docs/queue.md#maxqueuedjobs). Returns null when the
   * job was stored, else the jobs queued that refused it. Every statement runs on `transaction`
   * when given: nothing here waits for a second connection (the embedded database has one).
   */
  async enqueue(job: NewJobRow, options: EnqueueOptions = {}): Promise<number | null> {
    const { transaction, maxQueued = null } = options;
    if (!tracingEnabled()) {
      return this.store(job, null, transaction, maxQueued);
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
      () => this.store(job, activeTraceCarrier(), transaction, maxQueued),
    );
  }

  private async store(
    job: NewJobRow,
    trace: TraceCarrier | null,
    transaction: EntityManager | undefined,
    maxQueued: number | null,
  ): Promise<number | null> {
    const files = await Promise.all(job.files.map(inlineIfSmall));
    const inline = files.filter(isContent);
    if (maxQueued === null && inline.length === files.length) {
      await insertJob(transaction ?? this.dataSource.manager, job, inline, this.sender, trace);
      return null;
    }
    const storeAll = async (manager: EntityManager): Promise<number | null> => {
      if (maxQueued !== null) {
        // Held to the transaction's end: a second node's admission waits here, then counts
        // this job (READ COMMITTED: its count is a statement after the wait).
        await manager.query(`SELECT pg_advisory_xact_lock(hashtext('svc.queued:' || $1))`, [
          job.applicationName,
        ]);
        const queued = await this.queuedJobsOf(job.applicationName, maxQueued, manager);
        if (queued >= maxQueued) {
          return queued;
        }
      }
      // The notification the statement sends is delivered on commit, after the large files.
      await insertJob(manager, job, inline, this.sender, trace);
      for (const file of files) {
        if (!isContent(file)) {
          await insertChunkedFile(manager, job.id, file);
        }
      }
      return null;
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
      source: row.source,
      hasCallback: row.has_callback,
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

  /** Extends the leases `owner` still holds; returns the ids it still holds. */
  async heartbeat(owner: string, jobIds: string[], leaseSeconds: number): Promise<string[]> {
    if (jobIds.length === 0) {
      return [];
    }
    const raw: unknown = await this.dataSource.query(
      `UPDATE job SET lease_expires_at = now() + make_interval(secs => $3)
        WHERE id = ANY($2::uuid[]) AND lease_owner = $1 AND state = 'RUNNING'
        RETURNING id`,
      [owner, jobIds, leaseSeconds],
    );
    return rowsOf<{ id: string }>(raw).map((row) => row.id);
  }

  /**
   * Stores the job's one result, marks the job DONE, deletes its input files and notifies
   * `svc_result_ready` (delivered at commit) in ONE statement, if `owner` (when given) still
   * holds the lease: atomic without an explicit transaction, one round trip instead of five.
   * All parts see the same snapshot; the result and file CTEs act only on the row the guarded
   * UPDATE returned, so a lost lease writes nothing. Returns false in that case.
   */
  async complete(jobId: string, owner: string | null, result: ResultData): Promise<boolean> {
    if (result.dataFile) {
      return this.completeChunked(jobId, owner, result, result.dataFile);
    }
    return this.completeInOne(this.dataSource, jobId, owner, result);
  }

  /** complete()'s one statement, on `runner`: the data source, or a transaction's manager. */
  private async completeInOne(
    runner: DataSource | EntityManager,
    jobId: string,
    owner: string | null,
    result: ResultData,
  ): Promise<boolean> {
    const raw: unknown = await runner.query(
      `WITH done AS (
         UPDATE job SET state = 'DONE', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
          WHERE id = $1 AND state <> 'DONE' AND ($2::varchar IS NULL OR lease_owner = $2::varchar)
          RETURNING ${DONE_COLUMNS}),
       stored AS (
         INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256)
         SELECT done.id, done.application_name, now(), $3, $4, $5, $6, $7, $8 FROM done
         ON CONFLICT (job_id) DO NOTHING),
       usage AS (
         ${usageInsert("CASE WHEN $3::boolean THEN 'succeeded' ELSE 'failed' END", '$10::int', '$7')}),
       ${QUEUE_CALLBACK_CTE},
       -- The input files are not needed once the job has its result.
       inputs_removed AS (
         DELETE FROM job_file WHERE job_id IN (SELECT id FROM done))
       SELECT pg_notify($9, $11::text || done.id::text), ${callbackQueuedNotice('$12', '$11')} FROM done`,
      [
        jobId,
        owner,
        result.success,
        result.type,
        result.contentType,
        result.data,
        result.data.length,
        result.sha256,
        RESULT_READY_CHANNEL,
        result.rCpuMs === undefined ? null : Math.round(result.rCpuMs),
        this.sender,
        CALLBACK_QUEUED_CHANNEL,
      ],
    );
    return rowsOf(raw).length > 0;
  }

  /**
   * complete() for a result too large to hold in memory: the same steps in one transaction, the
   * data streamed from its file into result_chunk piece by piece (src/storage/blob-chunks.ts).
   * Nothing is visible, and no notification sent, before everything is stored.
   */
  private async completeChunked(
    jobId: string,
    owner: string | null,
    result: ResultData,
    dataFile: { path: string; size: number },
  ): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const done = rowsOf<{ id: string; application_name: string }>(
        await manager.query(
          `UPDATE job SET state = 'DONE', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
            WHERE id = $1 AND state <> 'DONE' AND ($2::varchar IS NULL OR lease_owner = $2::varchar)
            RETURNING ${DONE_COLUMNS}`,
          [jobId, owner],
        ),
      );
      if (done.length === 0) {
        return false;
      }
      const inserted = rowsOf(
        await manager.query(
          `INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256, chunked)
           VALUES ($1, $2, now(), $3, $4, $5, ''::bytea, $6, $7, true)
           ON CONFLICT (job_id) DO NOTHING RETURNING job_id`,
          [
            jobId,
            done[0].application_name,
            result.success,
            result.type,
            result.contentType,
            dataFile.size,
            result.sha256,
          ],
        ),
      );
      if (inserted.length > 0) {
        const written = await writeChunks(manager, RESULT_CHUNKS, jobId, filePieces(dataFile.path));
        if (written.size !== dataFile.size || written.sha256 !== result.sha256) {
          throw new Error(`the result file of job ${jobId} changed while it was stored`);
        }
      }
      await manager.query(
        `WITH done AS (SELECT ${DONE_COLUMNS} FROM job WHERE id = $1),
         usage AS (
           ${usageInsert("CASE WHEN $2::boolean THEN 'succeeded' ELSE 'failed' END", '$3::int', '$4::bigint')}),
         ${QUEUE_CALLBACK_CTE}
         SELECT ${callbackQueuedNotice('$5', '$6')}`,
        [
          jobId,
          result.success,
          result.rCpuMs === undefined ? null : Math.round(result.rCpuMs),
          dataFile.size,
          CALLBACK_QUEUED_CHANNEL,
          this.sender,
        ],
      );
      await manager.query('DELETE FROM job_file WHERE job_id = $1', [jobId]);
      await manager.query('SELECT pg_notify($1, $2)', [RESULT_READY_CHANNEL, this.sender + jobId]);
      return true;
    });
  }

  /**
   * Cancels a job of `applicationName` that has not finished, in ONE statement: the job becomes
   * DONE with `result` (the cancellation text) and `cancelled_at`/`cancelled_by` set, its input
   * files go, and `svc_result_ready` is sent. The node running it learns of it from that
   * notification (or, failing it, from its next heartbeat, which no longer finds the job
   * RUNNING) and stops R. The row lock (FOR UPDATE) orders it with a worker's complete(): the
   * later of the two sees DONE and changes nothing. Returns the state the job was in, or null
   * for an unknown job; 'DONE' means it had finished already and nothing changed.
   */
  async cancel(
    applicationName: string,
    jobId: string,
    cancelledBy: string,
    cancelledAt: Date,
    result: ResultData,
    audit: string | null = null,
  ): Promise<JobStateName | null> {
    const raw: unknown = await this.dataSource.query(
      `WITH target AS (
         SELECT id, state FROM job WHERE id = $1 AND application_name = $2 AND ${NOT_CALLBACK} FOR UPDATE),
       done AS (
         UPDATE job SET state = 'DONE', finished_at = $4, lease_owner = NULL, lease_expires_at = NULL,
                cancelled_at = $4, cancelled_by = $3
           FROM target WHERE job.id = target.id AND target.state <> 'DONE'
          RETURNING job.id, job.application_name, job.kind, job.submitted_at, job.started_at,
                    job.finished_at, job.callback_url, job.callback_links_base, job.traceparent,
                    job.tracestate),
       stored AS (
         INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256)
         SELECT done.id, done.application_name, $4, $5, $6, $7, $8, $9, $10 FROM done
         ON CONFLICT (job_id) DO NOTHING),
       usage AS (
         ${usageInsert("'cancelled'", 'NULL', '$9')}),
       ${QUEUE_CALLBACK_CTE},
       inputs_removed AS (
         DELETE FROM job_file WHERE job_id IN (SELECT id FROM done)),
       audited AS (${auditRowPerJobSql('$14', 'done')})
       SELECT target.state, (SELECT pg_notify($11, $12::text || done.id::text) FROM done) AS notified,
              ${callbackQueuedNotice('$13', '$12')} AS callbacks_queued FROM target`,
      [
        jobId,
        applicationName,
        cancelledBy,
        cancelledAt,
        result.success,
        result.type,
        result.contentType,
        result.data,
        result.data.length,
        result.sha256,
        RESULT_READY_CHANNEL,
        this.sender,
        CALLBACK_QUEUED_CHANNEL,
        audit,
      ],
    );
    return rowsOf<{ state: JobStateName }>(raw)[0]?.state ?? null;
  }

  /** Puts a job back in the queue after an infrastructure failure, not before `delayMs`. */
  async retryLater(jobId: string, owner: string, error: string, delayMs: number): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL, last_error = $3,
              run_after = now() + make_interval(secs => $4)
        WHERE id = $1 AND lease_owner = $2 AND state = 'RUNNING'
        RETURNING id`,
      [jobId, owner, error, delayMs / 1000],
    );
    return rowsOf(raw).length > 0;
  }

  /** Graceful shutdown: hands unfinished jobs back without counting the attempt. */
  async release(owner: string, jobIds: string[]): Promise<number> {
    if (jobIds.length === 0) {
      return 0;
    }
    const raw: unknown = await this.dataSource.query(
      `UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL, run_after = now(),
              attempts = GREATEST(job.attempts - 1, 0)
        WHERE id = ANY($2::uuid[]) AND lease_owner = $1 AND state = 'RUNNING'
        RETURNING id`,
      [owner, jobIds],
    );
    return rowsOf(raw).length;
  }

  /**
   * Supervisor pass, run by one node at a time (advisory lock): jobs whose lease expired have
   * lost a run (counted in lost_runs). They go back to the queue, not claimable for
   * `lostRunDelaySeconds`, so the node that restarts (or any other) runs other jobs first and is
   * not frozen again before it serves anything. Those out of attempts, or at LOST_RUNS_LIMIT
   * lost runs, end with the dead-letter result `deadLetter` makes of them, stored by complete()'s
   * statement in the same transaction: a job is never left out of attempts without its result.
   * Returned are the jobs so ended. A job an older version's supervisor took for a dead letter
   * and did not end (its node died in between) is ended the same way, its lost runs and reason
   * unchanged: the job did not run then.
   */
  async recoverExpiredLeases(
    maxAttempts: number,
    lostRunDelaySeconds: number,
    deadLetter: (job: ExpiredJob) => ResultData,
  ): Promise<{ requeued: number; exhausted: ExpiredJob[] }> {
    return this.dataSource.transaction(async (manager) => {
      const lock = await manager.query<Array<{ locked: boolean }>>(
        `SELECT pg_try_advisory_xact_lock(hashtext('svc.supervisor')) AS locked`,
      );
      if (!lock[0]?.locked) {
        return { requeued: 0, exhausted: [] };
      }
      // SET and WHERE see the row as it was: lost_runs + 1 is the count with this lost run.
      const requeued = rowsOf(
        await manager.query(
          `UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL,
                  run_after = now() + make_interval(secs => $4), lost_runs = lost_runs + 1,
                  last_error = $3
            WHERE state = 'RUNNING' AND lease_expires_at < now() AND attempts < $1
              AND lost_runs + 1 < $2 AND lease_owner <> 'supervisor' AND ${NOT_CALLBACK}
            RETURNING id`,
          [maxAttempts, LOST_RUNS_LIMIT, LEASE_EXPIRED_ERROR, lostRunDelaySeconds],
        ),
      ).length;
      // A callback job whose node died mid-attempt is due again at once, the attempt not
      // counted (as before callbacks were jobs): its lease was the attempt's claim.
      const callbacks = rowsOf(
        await manager.query(
          `UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL,
                  run_after = now(), lost_runs = lost_runs + 1, last_error = $1
            WHERE state = 'RUNNING' AND lease_expires_at < now() AND kind = 'callback'
            RETURNING id`,
          [LEASE_EXPIRED_ERROR],
        ),
      ).length;
      const exhausted = rowsOf<{
        id: string;
        application_name: string;
        submitted_at: Date;
        attempts: number;
        last_error: string | null;
      }>(
        await manager.query(
          `UPDATE job SET lease_owner = 'supervisor', lease_expires_at = now() + interval '1 minute',
                  lost_runs = CASE WHEN lease_owner = 'supervisor' THEN lost_runs ELSE lost_runs + 1 END,
                  last_error = CASE WHEN lease_owner = 'supervisor' THEN last_error
                                    WHEN lost_runs + 1 >= $2 THEN $4 ELSE $3 END
            WHERE state = 'RUNNING' AND lease_expires_at < now() AND ${NOT_CALLBACK}
              AND (attempts >= $1 OR lost_runs + 1 >= $2 OR lease_owner = 'supervisor')
            RETURNING id, application_name, submitted_at, attempts, last_error`,
          [maxAttempts, LOST_RUNS_LIMIT, LEASE_EXPIRED_ERROR, LOST_RUNS_ERROR],
        ),
      );
      const ended: ExpiredJob[] = [];
      for (const row of exhausted) {
        const job: ExpiredJob = {
          id: row.id,
          applicationName: row.application_name,
          submittedAt: new Date(row.submitted_at),
          attempts: row.attempts,
          lastError: row.last_error,
        };
        if (await this.completeInOne(manager, job.id, SUPERVISOR, deadLetter(job))) {
          ended.push(job);
        }
      }
      return { requeued: requeued + callbacks, exhausted: ended };
    });
  }

  /** Deletes usage records of jobs that finished more than `days` ago, at most 10000 per call. */
  async deleteExpiredUsage(days: number): Promise<number> {
    const raw: unknown = await this.dataSource.query(
      `DELETE FROM job_usage WHERE job_id IN (
         SELECT job_id FROM job_usage WHERE finished_at < now() - make_interval(days => $1)
          LIMIT 10000)
       RETURNING job_id`,
      [days],
    );
    return rowsOf(raw).length;
  }

  /**
   * Deletes results (and their jobs, logs and everything else stored with them) past their
   * application's retention: `hours` per application where given, else `defaultHours`; 0 keeps
   * results until deleted. At most 1000 per call (the supervisor calls it again on its next pass).
   */
  async deleteExpiredResults(
    defaultHours: number,
    hoursByApplication: Record<string, number> = {},
  ): Promise<number> {
    const applications = Object.keys(hoursByApplication);
    const raw: unknown = await this.dataSource.query(
      `WITH rule AS (
         SELECT * FROM unnest($2::varchar[], $3::int[]) AS r(application_name, hours))
       DELETE FROM job WHERE id IN (
         SELECT result.job_id FROM result
           JOIN job ON job.id = result.job_id
           LEFT JOIN rule ON rule.application_name = job.application_name
          WHERE COALESCE(rule.hours, $1) > 0
            AND result.result_time < now() - make_interval(hours => COALESCE(rule.hours, $1))
          LIMIT 1000)
       RETURNING id`,
      [defaultHours, applications, applications.map((app) => hoursByApplication[app])],
    );
    return rowsOf(raw).length;
  }

  /** Jobs queued plus running (QUEUE_BACKLOG_SQL), for metrics. */
  async queueBacklog(): Promise<number> {
    const rows =
      await this.dataSource.query<Array<{ backlog: string | number }>>(QUEUE_BACKLOG_SQL);
    return Number(rows[0]?.backlog ?? 0);
  }

  /**
   * Jobs of `applicationName` queued, counted up to `atMost` (its maxQueuedJobs): job_claim_idx
   * leads with the application, so the count reads at most that many index entries. On
   * `runner` when given (a transaction's manager).
   */
  async queuedJobsOf(
    applicationName: string,
    atMost: number,
    runner: DataSource | EntityManager = this.dataSource,
  ): Promise<number> {
    const rows = await runner.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM (
         SELECT 1 FROM job WHERE state = 'QUEUED' AND ${NOT_CALLBACK} AND application_name = $1 LIMIT $2) queued`,
      [applicationName, atMost],
    );
    return rows[0]?.n ?? 0;
  }

  /**
   * Jobs queued and running per application, for metrics and the statistics: two grouped counts,
   * each over its own partial index (job_claim_idx leads with the application).
   */
  async jobsPerApplication(): Promise<
    Array<{ applicationName: string; state: 'QUEUED' | 'RUNNING'; jobs: number }>
  > {
    const rows = await this.dataSource.query<
      Array<{ application_name: string; state: 'QUEUED' | 'RUNNING'; jobs: number }>
    >(
      `SELECT application_name, 'QUEUED' AS state, count(*)::int AS jobs FROM job
        WHERE state = 'QUEUED' AND ${NOT_CALLBACK} GROUP BY application_name
       UNION ALL
       SELECT application_name, 'RUNNING' AS state, count(*)::int AS jobs FROM job
        WHERE state = 'RUNNING' AND ${NOT_CALLBACK} GROUP BY application_name`,
    );
    return rows.map((row) => ({
      applicationName: row.application_name,
      state: row.state,
      jobs: row.jobs,
    }));
  }

  /** Jobs waiting to run, for metrics and tests. */
  async queueDepth(): Promise<number> {
    const rows = await this.dataSource.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM job WHERE state = 'QUEUED' AND ${NOT_CALLBACK}`,
    );
    return rows[0]?.n ?? 0;
  }
}
