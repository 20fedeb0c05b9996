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
