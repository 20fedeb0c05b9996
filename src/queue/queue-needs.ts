/**
 * Jobs that wait for other jobs (a flow's steps, src/flows/): the rows that say so, stored with
 * the waiting job; the CTEs that the statements ending a job add, which release or cancel the
 * jobs waiting for it in that same statement; and what a released job reads of its needs.
 *
 * A waiting job is an ordinary QUEUED job that is not due (run_after 'infinity'): the claim, the
 * queue limits and a cancel treat it as any queued job, and no other state is needed. Releasing
 * it is making it due, by the statement that ends the last job it needs: job_wait.needs_left is
 * counted down under its row lock, so of two needed jobs that end together on two nodes exactly
 * one sees zero (READ COMMITTED re-reads a row another transaction updated before it updates it).
 * A node that dies while storing a result rolls the count back with the result: the job runs
 * again, and its result's statement releases the dependant then. No loop polls for any of it.
 */
import type { EntityManager } from 'typeorm';
import { JOB_QUEUED_CHANNEL, RESULT_READY_CHANNEL } from './queue-channels';
import { rowsOf } from '../storage/query-rows';
import { copyChunksToFile, readChunks, RESULT_CHUNKS } from '../storage/blob-chunks';

/** The run_after of a job that waits for others: never due until released. */
export const WAITING_RUN_AFTER = 'infinity';

/**
 * CTEs for a statement whose CTE `done` returns the jobs it ended (`id`): `succeeded` is the SQL
 * of whether they succeeded. The jobs waiting for them are counted down (the need succeeded, or
 * may fail: it is not `required`) and released at zero (`released`); those for which a failed
 * `required` need was required, and theirs in turn, are cancelled (`needs_cancelled`) with a
 * result that says which job they needed.
 */
export function waitingJobsCtes(succeeded: string): string {
  return `ended_edges AS (
       UPDATE job_need n SET counted = true
         FROM done WHERE n.needed_job_id = done.id AND NOT n.counted
       RETURNING n.job_id, n.required),
     doomed(job_id) AS (
       SELECT e.job_id FROM ended_edges e WHERE NOT (${succeeded}) AND e.required
       UNION
       SELECT n.job_id FROM job_need n JOIN doomed d ON n.needed_job_id = d.job_id WHERE n.required),
     ended_needs AS (
       SELECT e.job_id FROM ended_edges e WHERE (${succeeded}) OR NOT e.required
       UNION ALL
       SELECT n.job_id FROM job_need n JOIN doomed d ON n.needed_job_id = d.job_id WHERE NOT n.required),
     counted AS (
       UPDATE job_wait w SET needs_left = w.needs_left - e.ended
         FROM (SELECT job_id, count(*)::int AS ended FROM ended_needs
                WHERE job_id NOT IN (SELECT job_id FROM doomed) GROUP BY job_id) e
        WHERE w.job_id = e.job_id
       RETURNING w.job_id, w.needs_left),
     released AS (
       UPDATE job SET run_after = now()
         FROM counted c WHERE job.id = c.job_id AND c.needs_left <= 0 AND job.state = 'QUEUED'
       RETURNING job.id, job.kind),
     needs_cancelled AS (
       UPDATE job SET state = 'DONE', finished_at = now(), cancelled_at = now(), cancelled_by = 'svc:needs'
        WHERE job.id IN (SELECT job_id FROM doomed) AND job.state = 'QUEUED'
       RETURNING job.id, job.application_name),
     needs_cancelled_results AS (
       INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256)
       SELECT c.id, c.application_name, now(), false, 'txt', 'text/plain; charset=utf-8', t.data,
              octet_length(t.data), encode(sha256(t.data), 'hex')
         FROM needs_cancelled c
        CROSS JOIN LATERAL (
          SELECT convert_to(format(E'Job %s of application %s was cancelled: a job it needs (%s) did not succeed.\\n',
                                   c.id, c.application_name,
                                   (SELECT string_agg(n.name, ', ' ORDER BY n.name) FROM job_need n
                                     WHERE n.job_id = c.id AND n.required
                                       AND (n.needed_job_id IN (SELECT id FROM done)
                                            OR n.needed_job_id IN (SELECT job_id FROM doomed)))),
                            'UTF8') AS data) t
       ON CONFLICT (job_id) DO NOTHING)`;
}

/**
 * The notifications of waitingJobsCtes' changes, an expression for the statement's SELECT list:
 * a released job wakes the workers as a new one does; a cancelled one, its waiters. Sent without
 * a sender, so that the node whose statement it was hears them too (it ignores its own
 * notifications, and has no other way to learn which jobs the statement released).
 */
export function waitingJobsNotices(): string {
  return `((SELECT count(pg_notify('${JOB_QUEUED_CHANNEL}', r.kind)) FROM released r)
          + (SELECT count(pg_notify('${RESULT_READY_CHANNEL}', c.id::text)) FROM needs_cancelled c))`;
}

/**
 * The job_need rows and the job_wait row of a new job, stored by the statement that stores it
 * (insertJob's CTE `new_job`): from the parameter `$first` on, the needed ids, their names,
 * whether each is required, and the reruns it has.
 */
export function newJobNeedsCtes(first: number): string {
  const [neededIds, names, required, retries] = [0, 1, 2, 3].map((i) => `$${first + i}`);
  return `new_needs AS (
       INSERT INTO job_need (job_id, needed_job_id, name, required)
       SELECT new_job.id, n.needed, n.name, n.required
         FROM new_job, unnest(${neededIds}::uuid[], ${names}::varchar[], ${required}::boolean[]) AS n(needed, name, required)),
     new_wait AS (
       INSERT INTO job_wait (job_id, needs_left, retries_left)
       SELECT new_job.id, cardinality(${neededIds}::uuid[]), ${retries}::int FROM new_job
        WHERE cardinality(${neededIds}::uuid[]) > 0 OR ${retries}::int > 0)`;
}

/** What a job that waited reads of a job it needs: its value, or why it has none. */
export interface NeededResult {
  name: string;
  /** Whether the needed job succeeded (false: failed or cancelled; its data is its error). */
  succeeded: boolean;
  type: string | null;
  /** The bytes of a result stored inline (at most BLOB_INLINE_MAX_BYTES); null when in pieces. */
  data: Buffer | null;
  /** A large result's pieces (result_chunk): read with readNeededResult or copyNeededResult. */
  pieces: ResultPieces | null;
}

/** Where a large result's bytes are: its job's result_chunk rows. */
export interface ResultPieces {
  jobId: string;
  size: number;
}

/**
 * The results of the jobs `jobId` needs, in the order of their names: a small result's bytes, a
 * large one's place, so that it is streamed where it goes and never held whole.
 */
export async function neededResults(
  manager: EntityManager,
  jobId: string,
): Promise<NeededResult[]> {
  const rows = rowsOf<{
    name: string;
    job_id: string;
    success: boolean | null;
    type: string | null;
    data: Buffer | null;
    chunked: boolean | null;
    size: string | null;
    cancelled: boolean;
  }>(
    await manager.query(
      `SELECT n.name, n.needed_job_id AS job_id, r.success, r.type, r.data, r.chunked, r.size,
              j.cancelled_at IS NOT NULL AS cancelled
         FROM job_need n JOIN job j ON j.id = n.needed_job_id
         LEFT JOIN result r ON r.job_id = n.needed_job_id
        WHERE n.job_id = $1 ORDER BY n.name`,
      [jobId],
    ),
  );
  return rows.map((row) => ({
    name: row.name,
    succeeded: row.success === true && !row.cancelled,
    type: row.type,
    data: row.chunked === true ? null : (row.data ?? Buffer.alloc(0)),
    pieces: row.chunked === true ? { jobId: row.job_id, size: Number(row.size) } : null,
  }));
}

/** A large needed result whole, in memory: a function step's JSON value, spliced into its call. */
export async function readNeededResult(
  manager: EntityManager,
  pieces: ResultPieces,
): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of readChunks(manager, RESULT_CHUNKS, pieces.jobId, pieces.size)) {
    parts.push(part as Buffer);
  }
  return Buffer.concat(parts);
}

/** A large needed result written to a new file at `path`, one piece in memory at a time. */
export function copyNeededResult(
  manager: EntityManager,
  pieces: ResultPieces,
  path: string,
): Promise<void> {
  return copyChunksToFile(manager, RESULT_CHUNKS, pieces.jobId, pieces.size, path);
}

/**
 * Puts a failed run of a job that has reruns left back in the queue, due after `delayMs`, if
 * `owner` still holds it, counting one rerun off: one statement. False: no rerun left (or the
 * lease was lost), and the failure is the job's result.
 */
export async function rerunFailed(
  manager: EntityManager,
  jobId: string,
  owner: string,
  delayMs: number,
): Promise<boolean> {
  const raw: unknown = await manager.query(
    `WITH rerun AS (
       UPDATE job_wait SET retries_left = retries_left - 1
        WHERE job_id = $1 AND retries_left > 0
          AND EXISTS (SELECT 1 FROM job WHERE id = $1 AND lease_owner = $2 AND state = 'RUNNING')
       RETURNING job_id)
     UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL,
            last_error = 'the run failed; run again (the step has retries)',
            run_after = now() + make_interval(secs => $3)
       FROM rerun WHERE job.id = rerun.job_id
     RETURNING job.id`,
    [jobId, owner, delayMs / 1000],
  );
  return rowsOf(raw).length > 0;
}
