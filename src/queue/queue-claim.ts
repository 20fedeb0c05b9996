/**
 * Claim: the statement by which worker slots take queued jobs in fair turn under a lease
 * (QueueRepository.claim), and how it runs behind the capped claims' advisory lock.
 */
import type { PoolClient, QueryConfig } from 'pg';
import type { ClaimPolicies } from '../config/application-settings';
import { JobKind } from './queue.types';
import { rJob } from './queue-reads';

export interface ClaimRow {
  id: string;
  application_name: string;
  kind: JobKind;
  meta: Record<string, string>;
  submitted_at: Date;
  attempts: number;
  source: string;
  has_callback: boolean;
  has_job_wait: boolean;
  traceparent: string | null;
  tracestate: string | null;
  /** NULL when the job has no files (array_agg over no rows). */
  file_names: string[] | null;
  file_contents: Buffer[] | null;
  /** Per file: its id when it is in pieces, else NULL (bigint: a string). */
  file_chunked_ids: Array<string | null> | null;
  file_sizes: string[] | null;
}

/** No application with a weight or a running cap of its own. */
export const NO_CLAIM_POLICIES: ClaimPolicies = { applications: [], weights: [], maxRunning: [] };

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
           WHERE state = 'QUEUED' AND ${rJob()} AND application_name >= coalesce($4::varchar, '')
             AND ($4::varchar IS NULL OR application_name = $4::varchar)
           ORDER BY application_name LIMIT 1)
         UNION ALL
         SELECT (SELECT j.application_name FROM job j
                  WHERE j.state = 'QUEUED' AND ${rJob('j.kind')} AND j.application_name > q.application_name
                    AND $4::varchar IS NULL
                  ORDER BY j.application_name LIMIT 1)
           FROM queued_apps q WHERE q.application_name IS NOT NULL),
       policy AS (
         SELECT * FROM unnest($10::varchar[], $11::float8[], $12::int[]) AS p(application_name, weight, max_running)),
       running AS (
         SELECT application_name, count(*)::int AS n FROM job
          WHERE state = 'RUNNING' AND ${rJob()} GROUP BY application_name),
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
                  WHERE j.state = 'QUEUED' AND ${rJob('j.kind')} AND j.application_name = a.application_name
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
                   job.callback_url IS NOT NULL AS has_callback, job.traceparent, job.tracestate,
                   -- A job of a flow reads its needs' results, or may run again (queue-needs.ts):
                   -- one probe of job_wait's key.
                   EXISTS (SELECT 1 FROM job_wait w WHERE w.job_id = job.id) AS has_job_wait)
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
export async function runClaim(
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
