/**
 * Intake: the statements that store a new job with its files (QueueRepository.enqueue), inline
 * in one statement or, for large files on disk, streamed into pieces in one transaction.
 */
import { auditRowPerJobSql } from '../audit/audit.repository';
import { readFile, stat } from 'node:fs/promises';
import { EntityManager } from 'typeorm';
import { JobFileContent, JobFileInput, JobFilePath, NewJobRow } from './queue.types';
import {
  BLOB_INLINE_MAX_BYTES,
  filePieces,
  JOB_FILE_CHUNKS,
  writeChunks,
} from '../storage/blob-chunks';
import { rowsOf } from '../storage/query-rows';
import { TraceCarrier } from '../tracing/tracing';
import { JOB_QUEUED_CHANNEL } from './queue-channels';

export function isContent(file: JobFileInput): file is JobFileContent {
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
export async function inlineIfSmall(file: JobFileInput): Promise<JobFileInput> {
  if (isContent(file) || (await stat(file.path)).size > BLOB_INLINE_MAX_BYTES) {
    return file;
  }
  return { name: file.name, content: await readFile(file.path) };
}

/** The longest tracestate stored; a longer one (W3C allows dropping it) is not. */
const TRACESTATE_MAX_LENGTH = 512;

/** The job row, its inline files and the wake-up notification, in one statement. */
export async function insertJob(
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
                        callback_url, callback_links_base, traceparent, tracestate, submitted_by)
       VALUES ($1, $2, $3, 'QUEUED', $15, $4, $5, $6, $6, 0, $10, $11, $13, $14, $17)
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
      job.submittedBy ?? null,
    ],
  );
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
