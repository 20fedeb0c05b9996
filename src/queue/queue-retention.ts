/**
 * Retention: the statements that delete what has been kept long enough (usage records, and
 * results with their jobs), a bounded batch per call.
 */
import { DataSource } from 'typeorm';
import { rowsOf } from '../storage/query-rows';

/** Deletes usage records of jobs that finished more than `days` ago, at most 10000 per call. */
export async function deleteExpiredUsage(dataSource: DataSource, days: number): Promise<number> {
  const raw: unknown = await dataSource.query(
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
 * Each part reads only results already due, oldest first, from an index: an application with a
 * rule of its own by (application_name, result_time), the others by result_time. A pass that
 * finds nothing due reads nothing, however many results are kept (docs/queue.md#large-tables).
 */
export async function deleteExpiredResults(
  dataSource: DataSource,
  defaultHours: number,
  hoursByApplication: Record<string, number> = {},
): Promise<number> {
  const applications = Object.keys(hoursByApplication);
  const raw: unknown = await dataSource.query(
    `WITH rule AS (
       SELECT * FROM unnest($2::varchar[], $3::int[]) AS r(application_name, hours))
     DELETE FROM job WHERE id IN (
       SELECT job_id FROM (
         (SELECT own.job_id FROM rule CROSS JOIN LATERAL (
            SELECT result.job_id FROM result
             WHERE result.application_name = rule.application_name AND rule.hours > 0
               AND result.result_time < now() - make_interval(hours => rule.hours)
             ORDER BY result.result_time LIMIT 1000) AS own)
         UNION ALL
         (SELECT result.job_id FROM result
           WHERE $1 > 0 AND result.result_time < now() - make_interval(hours => $1)
             AND result.application_name <> ALL ($2::varchar[])
           ORDER BY result.result_time LIMIT 1000)) AS due
        LIMIT 1000)
     RETURNING id`,
    [defaultHours, applications, applications.map((app) => hoursByApplication[app])],
  );
  return rowsOf(raw).length;
}
