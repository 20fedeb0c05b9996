/**
 * Leases: the statements on a running job's lease: heartbeats that extend it, the retry and the
 * release that hand a job back, and the supervisor's pass over expired leases (lost runs and
 * dead letters).
 */
import { DataSource } from 'typeorm';
import { ExpiredJob, JobKind, ResultData } from './queue.types';
import { rowsOf } from '../storage/query-rows';
import { completeInOne } from './queue-completion';
import { rJob } from './queue-reads';

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

/**
 * The delivery job (a callback's, a mail reply's) of `kind` whose attempt ends or is retried:
 * `$1`, if `$2` still holds its lease. The WHERE of those statements.
 */
export function heldDeliveryJob(kind: JobKind): string {
  return `id = $1 AND lease_owner = $2 AND state = 'RUNNING' AND kind = '${kind}'`;
}

/** The CTE `ended`: the delivery job's row deleted (its attempt was its last), `returning` its columns. */
export function deliveryEnded(kind: JobKind, returning: string): string {
  return `ended AS (DELETE FROM job WHERE ${heldDeliveryJob(kind)} RETURNING ${returning})`;
}

/** The SET of a delivery job's retry: queued again, at `runAfter`, with `error` as last_error. */
export function deliveryRetried(error: string, runAfter: string): string {
  return `state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL, last_error = ${error}, run_after = ${runAfter}`;
}

/** Extends the leases `owner` still holds; returns the ids it still holds. */
export async function heartbeat(
  dataSource: DataSource,
  owner: string,
  jobIds: string[],
  leaseSeconds: number,
): Promise<string[]> {
  if (jobIds.length === 0) {
    return [];
  }
  const raw: unknown = await dataSource.query(
    `UPDATE job SET lease_expires_at = now() + make_interval(secs => $3)
      WHERE id = ANY($2::uuid[]) AND lease_owner = $1 AND state = 'RUNNING'
      RETURNING id`,
    [owner, jobIds, leaseSeconds],
  );
  return rowsOf<{ id: string }>(raw).map((row) => row.id);
}

/** Puts a job back in the queue after an infrastructure failure, not before `delayMs`. */
export async function retryLater(
  dataSource: DataSource,
  jobId: string,
  owner: string,
  error: string,
  delayMs: number,
): Promise<boolean> {
  const raw: unknown = await dataSource.query(
    `UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL, last_error = $3,
            run_after = now() + make_interval(secs => $4)
      WHERE id = $1 AND lease_owner = $2 AND state = 'RUNNING'
      RETURNING id`,
    [jobId, owner, error, delayMs / 1000],
  );
  return rowsOf(raw).length > 0;
}

/** Graceful shutdown: hands unfinished jobs back without counting the attempt. */
export async function release(
  dataSource: DataSource,
  owner: string,
  jobIds: string[],
): Promise<number> {
  if (jobIds.length === 0) {
    return 0;
  }
  const raw: unknown = await dataSource.query(
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
export async function recoverExpiredLeases(
  dataSource: DataSource,
  sender: string,
  maxAttempts: number,
  lostRunDelaySeconds: number,
  deadLetter: (job: ExpiredJob) => ResultData,
): Promise<{ requeued: number; exhausted: ExpiredJob[] }> {
  return dataSource.transaction(async (manager) => {
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
            AND lost_runs + 1 < $2 AND lease_owner <> 'supervisor' AND ${rJob()}
          RETURNING id`,
        [maxAttempts, LOST_RUNS_LIMIT, LEASE_EXPIRED_ERROR, lostRunDelaySeconds],
      ),
    ).length;
    // A delivery job (a callback, an e-mail reply) whose node died mid-attempt is due again at
    // once, the attempt not counted (as before they were jobs): its lease was the attempt's claim.
    const deliveries = rowsOf(
      await manager.query(
        `UPDATE job SET state = 'QUEUED', lease_owner = NULL, lease_expires_at = NULL,
                run_after = now(), lost_runs = lost_runs + 1, last_error = $1
          WHERE state = 'RUNNING' AND lease_expires_at < now() AND NOT ${rJob()}
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
          WHERE state = 'RUNNING' AND lease_expires_at < now() AND ${rJob()}
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
      if (await completeInOne(sender, manager, job.id, SUPERVISOR, deadLetter(job))) {
        ended.push(job);
      }
    }
    return { requeued: requeued + deliveries, exhausted: ended };
  });
}
