/**
 * Completion: the statements that end a job (its result stored, or its cancellation), with
 * its usage record, its callback queued and its input files deleted, and the notices they send.
 */
import { auditRowPerJobSql } from '../audit/audit.repository';
import { DataSource, EntityManager } from 'typeorm';
import { JobState as JobStateName, ResultData } from './queue.types';
import { filePieces, RESULT_CHUNKS, writeChunks } from '../storage/blob-chunks';
import { rowsOf } from '../storage/query-rows';
import { CALLBACK_QUEUED_CHANNEL, RESULT_READY_CHANNEL } from './queue-channels';
import { rJob } from './queue-reads';
import { waitingJobsCtes, waitingJobsNotices } from './queue-needs';

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

/** `svc_callback_queued` for each row callback_queued inserted; `channel` and `sender` placeholders. */
function callbackQueuedNotice(channel: string, sender: string): string {
  return `(SELECT count(pg_notify(${channel}, ${sender}::text || c.job_id::text)) FROM callback_queued c)`;
}

/**
 * Stores the job's one result, marks the job DONE, deletes its input files (a failed job keeps
 * them, so that an admin can retry it) and notifies
 * `svc_result_ready` (delivered at commit) in ONE statement, if `owner` (when given) still
 * holds the lease: atomic without an explicit transaction, one round trip instead of five.
 * All parts see the same snapshot; the result and file CTEs act only on the row the guarded
 * UPDATE returned, so a lost lease writes nothing. Returns false in that case.
 */
export async function complete(
  dataSource: DataSource,
  sender: string,
  jobId: string,
  owner: string | null,
  result: ResultData,
): Promise<boolean> {
  if (result.dataFile) {
    return completeChunked(dataSource, sender, jobId, owner, result, result.dataFile);
  }
  return completeInOne(sender, dataSource, jobId, owner, result);
}

/** complete()'s one statement, on `runner`: the data source, or a transaction's manager. */
export async function completeInOne(
  sender: string,
  runner: DataSource | EntityManager,
  jobId: string,
  owner: string | null,
  result: ResultData,
): Promise<boolean> {
  const raw: unknown = await runner.query(
    `WITH RECURSIVE done AS (
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
     -- The input files are not needed once the job has succeeded; a failed job keeps them for
     -- a retry (they go with the job, by the foreign key's cascade).
     inputs_removed AS (
       DELETE FROM job_file WHERE $3 AND job_id IN (SELECT id FROM done)),
     ${waitingJobsCtes('$3::boolean')}
     SELECT pg_notify($9, $11::text || done.id::text), ${callbackQueuedNotice('$12', '$11')},
            ${waitingJobsNotices()} FROM done`,
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
      sender,
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
export async function completeChunked(
  dataSource: DataSource,
  sender: string,
  jobId: string,
  owner: string | null,
  result: ResultData,
  dataFile: { path: string; size: number },
): Promise<boolean> {
  return dataSource.transaction(async (manager) => {
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
      `WITH RECURSIVE done AS (SELECT ${DONE_COLUMNS} FROM job WHERE id = $1),
       usage AS (
         ${usageInsert("CASE WHEN $2::boolean THEN 'succeeded' ELSE 'failed' END", '$3::int', '$4::bigint')}),
       ${QUEUE_CALLBACK_CTE},
       ${waitingJobsCtes('$2::boolean')}
       SELECT ${callbackQueuedNotice('$5', '$6')}, ${waitingJobsNotices()}`,
      [
        jobId,
        result.success,
        result.rCpuMs === undefined ? null : Math.round(result.rCpuMs),
        dataFile.size,
        CALLBACK_QUEUED_CHANNEL,
        sender,
      ],
    );
    if (result.success) {
      await manager.query('DELETE FROM job_file WHERE job_id = $1', [jobId]);
    }
    await manager.query('SELECT pg_notify($1, $2)', [RESULT_READY_CHANNEL, sender + jobId]);
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
export async function cancel(
  dataSource: DataSource,
  sender: string,
  applicationName: string,
  jobId: string,
  cancelledBy: string,
  cancelledAt: Date,
  result: ResultData,
  audit: string | null = null,
): Promise<JobStateName | null> {
  const raw: unknown = await dataSource.query(
    `WITH RECURSIVE target AS (
       SELECT id, state FROM job WHERE id = $1 AND application_name = $2 AND ${rJob()} FOR UPDATE),
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
     audited AS (${auditRowPerJobSql('$14', 'done')}),
     ${waitingJobsCtes('false')}
     SELECT target.state, (SELECT pg_notify($11, $12::text || done.id::text) FROM done) AS notified,
            ${callbackQueuedNotice('$13', '$12')} AS callbacks_queued,
            ${waitingJobsNotices()} AS waiting_jobs_notified FROM target`,
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
      sender,
      CALLBACK_QUEUED_CHANNEL,
      audit,
    ],
  );
  return rowsOf<{ state: JobStateName }>(raw)[0]?.state ?? null;
}
