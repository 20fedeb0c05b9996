import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { rowsOf } from '../storage/query-rows';
import type { AuditEventEntity } from './audit-event.entity';

/** A row as written: the id and time are the database's. */
export type AuditRow = Omit<AuditEventEntity, 'id' | 'time'>;

/** What GET /admin/audit filters by; null: any. */
export interface AuditFilter {
  from: Date | null;
  to: Date | null;
  principal: string | null;
  applicationName: string | null;
  action: string | null;
  limit: number;
  offset: number;
}

const COLUMNS =
  'principal, auth_method, client_address, request_id, action, application_name, job_id, outcome, details';

/**
 * An INSERT for a CTE that writes one audit row per row of `source` (a CTE of the same
 * statement: the job inserted, cancelled…), from the JSON of an AuditRow in parameter
 * `jsonParameter` (auditRowJson); none when that parameter is null or `source` is empty. The
 * application and job id are SQL expressions over `source`. For statements that record in the
 * same statement, atomic with the change and without another round trip (job intake).
 */
export function auditRowSql(
  jsonParameter: string,
  source: string,
  application: string,
  jobId: string,
): string {
  return `INSERT INTO audit_event (time, ${COLUMNS})
    SELECT now(), a.principal, a.auth_method, a.client_address, a.request_id, a.action,
           ${application}, ${jobId}, a.outcome, a.details
      FROM ${source}, jsonb_to_record(${jsonParameter}::jsonb) AS a(principal varchar, auth_method varchar,
           client_address varchar, request_id varchar, action varchar, outcome varchar, details jsonb)
     WHERE ${jsonParameter}::jsonb IS NOT NULL`;
}

/** auditRowSql for a CTE of jobs (`id`, `application_name`). */
export function auditRowPerJobSql(jsonParameter: string, source: string): string {
  return auditRowSql(jsonParameter, source, `${source}.application_name`, `${source}.id`);
}

/** The JSON auditRowSql reads. */
export function auditRowJson(row: AuditRow): string {
  return JSON.stringify({
    principal: row.principal,
    auth_method: row.authMethod,
    client_address: row.clientAddress,
    request_id: row.requestId,
    action: row.action,
    outcome: row.outcome,
    details: row.details,
  });
}

/** Every statement on `audit_event`: insert, list, and the retention's delete. */
@Injectable()
export class AuditRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Writes rows in `manager`'s transaction: they commit, or vanish, with the change they record. */
  async insert(rows: AuditRow[], manager: EntityManager = this.dataSource.manager): Promise<void> {
    if (rows.length === 0) {
      return;
    }
    const values = rows.map(
      (_, i) => `(now(), ${Array.from({ length: 9 }, (__, j) => `$${i * 9 + j + 1}`).join(', ')})`,
    );
    await manager.query(
      `INSERT INTO audit_event (time, ${COLUMNS}) VALUES ${values.join(', ')}`,
      rows.flatMap((row) => [
        row.principal,
        row.authMethod,
        row.clientAddress,
        row.requestId,
        row.action,
        row.applicationName,
        row.jobId,
        row.outcome,
        row.details === null ? null : JSON.stringify(row.details),
      ]),
    );
  }

  /** Newest first; one more than `limit` tells whether there are more. */
  async list(filter: AuditFilter): Promise<AuditEventEntity[]> {
    return this.dataSource.query<AuditEventEntity[]>(
      `SELECT id, time, principal, auth_method AS "authMethod", client_address AS "clientAddress",
              request_id AS "requestId", action, application_name AS "applicationName",
              job_id AS "jobId", outcome, details
         FROM audit_event
        WHERE ($1::timestamptz IS NULL OR time >= $1)
          AND ($2::timestamptz IS NULL OR time < $2)
          AND ($3::varchar IS NULL OR principal = $3)
          AND ($4::varchar IS NULL OR application_name = $4)
          AND ($5::varchar IS NULL OR action = $5)
        ORDER BY time DESC, id DESC
        LIMIT $6 OFFSET $7`,
      [
        filter.from,
        filter.to,
        filter.principal,
        filter.applicationName,
        filter.action,
        filter.limit + 1,
        filter.offset,
      ],
    );
  }

  /**
   * Deletes rows older than `days` (at most 10,000 per call; the supervisor calls again on its
   * next pass). The only deletion the table's trigger lets through: it is marked for this
   * transaction only.
   */
  async deleteExpired(days: number): Promise<number> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query("SELECT set_config('svc.audit_retention', 'on', true)");
      const raw: unknown = await manager.query(
        `DELETE FROM audit_event WHERE id IN (
           SELECT id FROM audit_event WHERE time < now() - make_interval(days => $1) LIMIT 10000)
         RETURNING id`,
        [days],
      );
      return rowsOf(raw).length;
    });
  }
}
