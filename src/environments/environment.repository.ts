import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { auditRowSql } from '../audit/audit.repository';
import type { ResolvedPackage } from './environment-resolution';
import type { EnvironmentBuildReport } from './r-environment.entity';
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
  builtAt: Date | null;
  buildReport: EnvironmentBuildReport | null;
  buildError: string | null;
}

/** A new environment, before it has an id. */
export type NewEnvironment = Omit<
  StoredEnvironment,
  'id' | 'createdAt' | 'builtAt' | 'buildReport' | 'buildError'
>;

/** What a worker needs to run an application's job: what it asks for, what is in force. */
export interface ApplicationEnvironments {
  requested: StoredEnvironment;
  active: StoredEnvironment | null;
}

interface EnvironmentRow {
  id: string;
  application_name: string;
  lockfile: Lockfile;
  lockfile_sha256: string;
  resolved: ResolvedPackage[];
  contents_sha256: string;
  created_by: string;
  created_at: Date;
  built_at: Date | null;
  build_report: EnvironmentBuildReport | null;
  build_error: string | null;
}

const COLUMNS =
  'e.id, e.application_name, e.lockfile, e.lockfile_sha256, e.resolved, e.contents_sha256, e.created_by, e.created_at, e.built_at, e.build_report, e.build_error';

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
    builtAt: row.built_at,
    buildReport: row.build_report,
    buildError: row.build_error,
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

  /** What the application asks for and what its jobs run in; null when it asks for nothing. */
  async forJobs(applicationName: string): Promise<ApplicationEnvironments | null> {
    const rows = await this.dataSource.query<Array<EnvironmentRow & { active: boolean }>>(
      `SELECT ${COLUMNS}, e.id = a.active_id AS active FROM application_environment a
         JOIN r_environment e ON e.id IN (a.requested_id, a.active_id)
        WHERE a.application_name = $1`,
      [applicationName],
    );
    const requested = rows.find((row) => !row.active) ?? rows[0];
    if (requested === undefined) {
      return null;
    }
    const active = rows.find((row) => row.active);
    return {
      requested: environmentOf(requested),
      active: active ? environmentOf(active) : null,
    };
  }

  /** The ids of the environments in force (what retention keeps built). */
  async activeIds(): Promise<string[]> {
    const rows = await this.dataSource.query<Array<{ id: string }>>(
      'SELECT active_id AS id FROM application_environment WHERE active_id IS NOT NULL',
    );
    return rows.map((row) => String(row.id));
  }

  /**
   * Records a successful build and puts the environment in force for its application, if it is
   * still the one the application asks for (a newer lockfile or a rollback meanwhile wins). The
   * report kept is the first one that built something: a node that waited for another's build
   * finds everything in the cache, and may record that before the builder records its own.
   */
  async built(id: string, report: EnvironmentBuildReport): Promise<void> {
    await this.dataSource.query(
      `WITH marked AS (
         UPDATE r_environment SET built_at = COALESCE(built_at, now()),
           build_report = CASE
             WHEN build_report IS NULL THEN $2::jsonb
             WHEN NOT jsonb_path_exists(build_report, '$.packages[*] ? (@.cached == false)')
                  AND jsonb_path_exists($2::jsonb, '$.packages[*] ? (@.cached == false)')
               THEN $2::jsonb
             ELSE build_report END,
           build_error = NULL
          WHERE id = $1::bigint RETURNING id, application_name
       )
       UPDATE application_environment a SET active_id = m.id, updated_at = now()
         FROM marked m WHERE a.application_name = m.application_name AND a.requested_id = m.id`,
      [id, JSON.stringify(report)],
    );
  }

  /** Records why an environment's build failed: it is not built again until asked anew. */
  async buildFailed(id: string, error: string): Promise<void> {
    await this.dataSource.query(
      'UPDATE r_environment SET build_error = $2 WHERE id = $1::bigint AND built_at IS NULL',
      [id, error],
    );
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
         SELECT id, application_name, built_at IS NOT NULL AS built FROM r_environment
          WHERE application_name = $1 AND id = $2::bigint
       ),
       requested AS (
         INSERT INTO application_environment (application_name, requested_id, active_id, updated_at)
         SELECT application_name, id, CASE WHEN built THEN id END, now() FROM chosen
         ON CONFLICT (application_name) DO UPDATE SET requested_id = EXCLUDED.requested_id,
           active_id = COALESCE(EXCLUDED.active_id, application_environment.active_id),
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
