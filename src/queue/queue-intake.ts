/**
 * Intake: the statements that store a new job with its files (QueueRepository.enqueue), inline
 * in one statement or, for large files on disk, streamed into pieces in one transaction.
 */
import { auditRowPerJobSql } from '../audit/audit.repository';
import { readFile, stat } from 'node:fs/promises';
import { EntityManager } from 'typeorm';
import { ClaimedJob, JobFileContent, JobFileInput, JobFilePath, NewJobRow } from './queue.types';
import {
  BLOB_INLINE_MAX_BYTES,
  filePieces,
  JOB_FILE_CHUNKS,
  writeChunks,
} from '../storage/blob-chunks';
import { rowsOf } from '../storage/query-rows';
import { TraceCarrier } from '../tracing/tracing';
import { JOB_QUEUED_CHANNEL, JOB_STARTED_CHANNEL } from './queue-channels';
import type { HeldSlot } from './direct-starts';
import { rJob } from './queue-reads';
import { newJobNeedsCtes, WAITING_RUN_AFTER } from './queue-needs';

export function isContent(file: JobFileInput): file is JobFileContent {
  return 'content' in file;
}

/** How `QueueRepository.enqueue` stores a job: in an outer transaction, under a queue limit. */
export interface EnqueueOptions {
  /** The transaction to store the job in (committed by its owner); else one of its own. */
  transaction?: EntityManager;
  /** The application's maxQueuedJobs: the job is stored only while fewer are queued. */
  maxQueued?: number | null;
  /**
   * Start it in a free slot of this node's worker when nothing queued goes first (DirectStarts):
   * for a job stored in its own statement, whose commit is the statement's.
   */
  startHere?: boolean;
}

/** A job stored (queued, or started in a slot of this node), or refused under maxQueuedJobs. */
export type EnqueueOutcome =
  { stored: true; startedHere: boolean } | { stored: false; queued: number };

/** A file on disk small enough to be inline is read here, so that it takes the fast path. */
export async function inlineIfSmall(file: JobFileInput): Promise<JobFileInput> {
  if (isContent(file) || (await stat(file.path)).size > BLOB_INLINE_MAX_BYTES) {
    return file;
  }
  return { name: file.name, content: await readFile(file.path) };
}

/** The longest tracestate stored; a longer one (W3C allows dropping it) is not. */
const TRACESTATE_MAX_LENGTH = 512;

function storedTracestate(trace: TraceCarrier | null): string | null {
  return trace?.tracestate && trace.tracestate.length <= TRACESTATE_MAX_LENGTH
    ? trace.tracestate
    : null;
}

/**
 * The job row, its inline files and its notification, in one statement. With `held` (a free
 * slot of this node's worker), the job is stored RUNNING under the slot's lease, its first
 * attempt begun, when no job of the slot's kinds is queued and due: the claim would have taken
 * this one next, since nothing else waits. It then notifies JOB_STARTED_CHANNEL, as a claim does;
 * otherwise it is QUEUED and notifies JOB_QUEUED_CHANNEL. Returns the job's meta as stored when
 * it was started (a claim returns it so: jsonb orders its keys), else null.
 */
export async function insertJob(
  manager: EntityManager,
  job: NewJobRow,
  files: JobFileContent[],
  sender: string,
  trace: TraceCarrier | null,
  held: HeldSlot | null = null,
): Promise<Record<string, string> | null> {
  const needs = job.needs ?? [];
  const waitsForJobs = needs.length > 0;
  // A job of a flow: its needs and reruns stored with it (queue-needs.ts). It never starts here.
  const waits = waitsForJobs || (job.retries ?? 0) > 0;
  if (waitsForJobs && held) {
    throw new Error(`job ${job.id} waits for other jobs: it cannot start at once`);
  }
  // The needs' parameters follow the held slot's, when there are those, and the function's name.
  const needsAt = held ? 23 : 19;
  // Without a held slot (a node without a worker, every slot busy) the statement is the plain
  // insert: nothing to ask, nothing more to plan.
  const ifStarted = (value: string, otherwise: string): string =>
    held ? `CASE WHEN s.yes THEN ${value} ELSE ${otherwise} END` : otherwise;
  const raw: unknown = await manager.query(
    `WITH start_here AS (
       SELECT ${
         held
           ? // One descent of job_queued_kind_idx per kind.
             `NOT EXISTS (
                SELECT 1 FROM job
                 WHERE state = 'QUEUED' AND ${rJob()} AND kind = ANY ($20::varchar[]) AND run_after <= now())`
           : 'false'
       } AS yes),
     new_job AS (
       INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, attempts,
                        callback_url, callback_links_base, traceparent, tracestate, submitted_by,
                        started_at, lease_owner, lease_expires_at, function_name)
       SELECT $1, $2, $3, ${ifStarted("'RUNNING'", "'QUEUED'")}, $15, $4, $5, $6,
              ${waitsForJobs ? `'${WAITING_RUN_AFTER}'::timestamptz` : '$6'}, ${ifStarted('1', '0')},
              $10, $11, $13, $14, $17, ${ifStarted('now()', 'NULL')}, ${ifStarted('$18::varchar', 'NULL')},
              ${ifStarted('now() + make_interval(secs => $19::int)', 'NULL')},
              $${held ? 22 : 18}::varchar
         FROM start_here s
       RETURNING id, application_name, state, meta, run_after),
     new_audit AS (${auditRowPerJobSql('$16', 'new_job')}),
     new_files AS (
       INSERT INTO job_file (job_id, name, content, size)
       SELECT new_job.id, f.name, f.content, octet_length(f.content)
         FROM new_job, unnest($7::varchar[], $8::bytea[]) AS f(name, content))${
           waits ? `,\n     ${newJobNeedsCtes(needsAt)}` : ''
         }
     SELECT new_job.state, new_job.meta,
            ${
              held
                ? `CASE WHEN new_job.state = 'RUNNING' THEN pg_notify($21, $12::text || new_job.id::text)
                        ELSE pg_notify($9, $12::text || $3) END`
                : // A job that waits for others wakes nobody: it is not due until released.
                  `CASE WHEN new_job.run_after <> '${WAITING_RUN_AFTER}' THEN pg_notify($9, $12::text || $3) END`
            } AS notified
       FROM new_job`,
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
      storedTracestate(trace),
      job.priority ?? 0,
      job.audit ?? null,
      job.submittedBy ?? null,
      ...(held ? [held.owner, held.leaseSeconds, held.kinds, JOB_STARTED_CHANNEL] : []),
      job.functionName ?? null,
      ...(waits
        ? [
            needs.map((need) => need.jobId),
            needs.map((need) => need.name),
            needs.map((need) => need.required),
            job.retries ?? 0,
          ]
        : []),
    ],
  );
  const stored = rowsOf<{ state: string; meta: Record<string, string> }>(raw)[0];
  return stored?.state === 'RUNNING' ? stored.meta : null;
}

/**
 * The job as a claim would have returned it, for a job insertJob started in a held slot: its
 * meta as stored, the rest as given (the files in their order, as the claim orders them).
 */
export function startedJob(
  job: NewJobRow,
  storedMeta: Record<string, string>,
  files: JobFileContent[],
  trace: TraceCarrier | null,
): ClaimedJob {
  return {
    id: job.id,
    applicationName: job.applicationName,
    kind: job.kind,
    meta: storedMeta,
    submittedAt: job.submittedAt,
    attempts: 1,
    source: job.source,
    hasCallback: Boolean(job.callback?.url),
    trace: trace ? { traceparent: trace.traceparent, tracestate: storedTracestate(trace) } : null,
    files: files.map((file) => ({ name: file.name, content: file.content, chunked: null })),
  };
}

export async function insertChunkedFile(
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
