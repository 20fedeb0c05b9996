import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { auditRowSql } from '../audit/audit.repository';
import type { ResolvedPackage } from './environment-resolution';
import type { Lockfile } from './renv-lockfile';

/** One environment of an application's history. */
export interface StoredEnvironment {
  id: string;
  applicationName: string;
  lockfile: Lockfile;
  lockfileSha256: string;
  resolved: ResolvedPackage[];
  contentsSha256: string;
  createdBy: string;
  createdAt: Date;
}

/** A new environment, before it has an id. */
export type NewEnvironment = Omit<StoredEnvironment, 'id' | 'createdAt'>;

interface EnvironmentRow {
  id: string;
  application_name: string;
  lockfile: Lockfile;
  lockfile_sha256: string;
  resolved: ResolvedPackage[];
  contents_sha256: string;
  created_by: string;
  created_at: Date;
}

const COLUMNS =
  'e.id, e.application_name, e.lockfile, e.lockfile_sha256, e.resolved, e.contents_sha256, e.created_by, e.created_at';

function environmentOf(row: EnvironmentRow): StoredEnvironment {
  return {
    id: String(row.id),
    applicationName: row.application_name,
    lockfile: row.lockfile,
    lockfileSha256: row.lockfile_sha256,
    resolved: row.resolved,
    contentsSha256: row.contents_sha256,
    createdBy: row.created_by,
    createdAt: row.created_at,
  };
}

/**
 * Every statement on r_environment and application_environment. Each change is one statement
 * that also writes its audit row (auditRowSql), so a change and its record commit together.
 */
@Injectable()
export class EnvironmentRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Stores a new environment, makes it the one its application asks for, and removes the
   * application's oldest environments beyond `keep` (never the one asked for: the new one).
   */
  async add(environment: NewEnvironment, keep: number, audit: string | null): Promise<string> {
    const rows = await this.dataSource.query<Array<{ id: string }>>(
      `WITH added AS (
         INSERT INTO r_environment (application_name, lockfile, lockfile_sha256, resolved, contents_sha256, created_by, created_at)
         VALUES ($1, $2::jsonb, $3, $4::jsonb, $5, $6, now())
         RETURNING id, application_name
       ),
       requested AS (
         INSERT INTO application_environment (application_name, requested_id, updated_at)
         SELECT application_name, id, now() FROM added
         ON CONFLICT (application_name) DO UPDATE SET requested_id = EXCLUDED.requested_id,
           updated_at = now()
       ),
       pruned AS (
         DELETE FROM r_environment WHERE application_name = $1 AND id NOT IN (
           SELECT id FROM r_environment WHERE application_name = $1 ORDER BY id DESC LIMIT $7::int - 1)
       ),
       audited AS (${auditRowSql('$8', 'added', '$1', 'NULL::uuid')})
       SELECT id FROM added`,
      [
        environment.applicationName,
        JSON.stringify(environment.lockfile),
        environment.lockfileSha256,
        JSON.stringify(environment.resolved),
        environment.contentsSha256,
        environment.createdBy,
        keep,
        audit,
      ],
    );
    return String(rows[0].id);
  }

  /** The environment the application asks for now; null when it has none. */
  async requested(applicationName: string): Promise<StoredEnvironment | null> {
    const rows = await this.dataSource.query<EnvironmentRow[]>(
      `SELECT ${COLUMNS} FROM application_environment a
         JOIN r_environment e ON e.id = a.requested_id
        WHERE a.application_name = $1`,
      [applicationName],
    );
    return rows.length > 0 ? environmentOf(rows[0]) : null;
  }

  /** The application's environments, newest first. */
  async history(applicationName: string): Promise<StoredEnvironment[]> {
    const rows = await this.dataSource.query<EnvironmentRow[]>(
      `SELECT ${COLUMNS} FROM r_environment e WHERE e.application_name = $1 ORDER BY e.id DESC`,
      [applicationName],
    );
    return rows.map(environmentOf);
  }

  /**
   * Makes an earlier environment of the application the one it asks for; false when the
   * application has no environment of that id.
   */
  async request(applicationName: string, id: string, audit: string | null): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `WITH chosen AS (
         SELECT id, application_name FROM r_environment WHERE application_name = $1 AND id = $2::bigint
       ),
       requested AS (
         INSERT INTO application_environment (application_name, requested_id, updated_at)
         SELECT application_name, id, now() FROM chosen
         ON CONFLICT (application_name) DO UPDATE SET requested_id = EXCLUDED.requested_id,
           updated_at = now()
       ),
       audited AS (${auditRowSql('$3', 'chosen', '$1', 'NULL::uuid')})
       SELECT 1 FROM chosen`,
      [applicationName, id, audit],
    );
    return rows.length > 0;
  }

  /**
   * The application asks for no environment any more (its jobs use the node's library again);
   * its history stays. False when it asked for none.
   */
  async clear(applicationName: string, audit: string | null): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `WITH cleared AS (
         DELETE FROM application_environment WHERE application_name = $1 RETURNING application_name
       ),
       audited AS (${auditRowSql('$2', 'cleared', '$1', 'NULL::uuid')})
       SELECT 1 FROM cleared`,
      [applicationName, audit],
    );
    return rows.length > 0;
  }
}
