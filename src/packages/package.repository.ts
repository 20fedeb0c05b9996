import { Injectable, Optional } from '@nestjs/common';
import { auditRowJson, auditRowSql } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CATALOG_CHANGED_CHANNEL, CatalogChanges } from '../catalog/catalog-changes';
import type { PackageNodeState } from './r-package-node.entity';

/**
 * The section named in the catalog-changed notification of a package change: nodes install
 * or remove the application's packages when they see `<application>/R_PACKAGES`.
 */
export const PACKAGES_SECTION = 'R_PACKAGES';

/** One uploaded package, without its archive. */
export interface StoredPackage {
  applicationName: string;
  name: string;
  version: string;
  sha256: string;
  installedBy: string;
  installedAt: Date;
}

/** What one node reported about one package. */
export interface PackageNodeReport {
  applicationName: string;
  packageName: string;
  nodeId: string;
  sha256: string;
  state: PackageNodeState;
  output: string | null;
  reportedAt: Date;
}

interface PackageRow {
  application_name: string;
  name: string;
  version: string;
  sha256: string;
  installed_by: string;
  installed_at: Date;
}

interface NodeRow {
  application_name: string;
  package_name: string;
  node_id: string;
  sha256: string;
  state: PackageNodeState;
  output: string | null;
  reported_at: Date;
}

const PACKAGE_COLUMNS = 'application_name, name, version, sha256, installed_by, installed_at';

function packageOf(row: PackageRow): StoredPackage {
  return {
    applicationName: row.application_name,
    name: row.name,
    version: row.version,
    sha256: row.sha256,
    installedBy: row.installed_by,
    installedAt: row.installed_at,
  };
}

/**
 * Every statement on r_package and r_package_node. A change notifies the catalog channel in
 * the same statement (as CatalogService does), so every node learns of it at once, and this
 * node in-process.
 */
@Injectable()
export class PackageRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly changes: CatalogChanges,
    @Optional() private readonly audit?: AuditService,
  ) {}

  /** The audit row of a package change, written by the changing statement. */
  private auditRow(
    action: 'package.installed' | 'package.removed',
    applicationName: string,
    details: Record<string, unknown>,
  ): string | null {
    return this.audit ? auditRowJson(this.audit.rowOf({ action, applicationName, details })) : null;
  }

  /** Stores an upload (replacing the one of that name); returns true when the name was new. */
  async store(pkg: Omit<StoredPackage, 'installedAt'>, archive: Buffer): Promise<boolean> {
    const rows = await this.dataSource.query<Array<{ inserted: boolean }>>(
      `WITH upserted AS (
         INSERT INTO r_package (application_name, name, version, sha256, archive, installed_by, installed_at)
         VALUES ($1, $2, $3, $4, $5, $6, now())
         ON CONFLICT (application_name, name) DO UPDATE SET version = EXCLUDED.version,
           sha256 = EXCLUDED.sha256, archive = EXCLUDED.archive,
           installed_by = EXCLUDED.installed_by, installed_at = now()
         RETURNING (xmax = 0) AS inserted
       ),
       audited AS (${auditRowSql('$8', 'upserted', '$1', 'NULL::uuid')})
       SELECT inserted, pg_notify('${CATALOG_CHANGED_CHANNEL}', $7::text || $1 || '/${PACKAGES_SECTION}') FROM upserted`,
      [
        pkg.applicationName,
        pkg.name,
        pkg.version,
        pkg.sha256,
        archive,
        pkg.installedBy,
        this.changes.prefix,
        this.auditRow('package.installed', pkg.applicationName, {
          name: pkg.name,
          version: pkg.version,
          sha256: pkg.sha256,
        }),
      ],
    );
    this.changes.changed(pkg.applicationName, PACKAGES_SECTION);
    return rows[0]?.inserted ?? false;
  }

  /** Deletes a package and its node reports; returns false when there was none. */
  async remove(applicationName: string, name: string): Promise<boolean> {
    const rows = await this.dataSource.query<Array<{ deleted: boolean }>>(
      `WITH deleted AS (
         DELETE FROM r_package WHERE application_name = $1 AND name = $2 RETURNING 1
       ),
       audited AS (${auditRowSql('$4', 'deleted', '$1', 'NULL::uuid')})
       SELECT true AS deleted, pg_notify('${CATALOG_CHANGED_CHANNEL}', $3::text || $1 || '/${PACKAGES_SECTION}') FROM deleted`,
      [
        applicationName,
        name,
        this.changes.prefix,
        this.auditRow('package.removed', applicationName, { name }),
      ],
    );
    if (rows.length > 0) {
      this.changes.changed(applicationName, PACKAGES_SECTION);
    }
    return rows.length > 0;
  }

  /** The packages of one application, or of every application (null), by name. */
  async list(applicationName: string | null): Promise<StoredPackage[]> {
    const rows = await this.dataSource.query<PackageRow[]>(
      `SELECT ${PACKAGE_COLUMNS} FROM r_package
        WHERE $1::varchar IS NULL OR application_name = $1::varchar
        ORDER BY application_name, name`,
      [applicationName],
    );
    return rows.map(packageOf);
  }

  /** The archive of one upload; null when the package was replaced or deleted meanwhile. */
  async archive(applicationName: string, name: string, sha256: string): Promise<Buffer | null> {
    const rows = await this.dataSource.query<Array<{ archive: Buffer }>>(
      'SELECT archive FROM r_package WHERE application_name = $1 AND name = $2 AND sha256 = $3',
      [applicationName, name, sha256],
    );
    return rows[0]?.archive ?? null;
  }

  /** The node reports of one application's packages (all nodes), or of one node (all applications). */
  async reports(filter: {
    applicationName?: string;
    nodeId?: string;
  }): Promise<PackageNodeReport[]> {
    const rows = await this.dataSource.query<NodeRow[]>(
      `SELECT application_name, package_name, node_id, sha256, state, output, reported_at
         FROM r_package_node
        WHERE ($1::varchar IS NULL OR application_name = $1::varchar)
          AND ($2::varchar IS NULL OR node_id = $2::varchar)
        ORDER BY application_name, package_name, node_id`,
      [filter.applicationName ?? null, filter.nodeId ?? null],
    );
    return rows.map((row) => ({
      applicationName: row.application_name,
      packageName: row.package_name,
      nodeId: row.node_id,
      sha256: row.sha256,
      state: row.state,
      output: row.output,
      reportedAt: row.reported_at,
    }));
  }

  /** Records what a node made of an upload; nothing when the upload is gone or replaced. */
  async report(report: Omit<PackageNodeReport, 'reportedAt'>): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO r_package_node (application_name, package_name, node_id, sha256, state, output, reported_at)
       SELECT application_name, name, $3, sha256, $5, $6, now() FROM r_package
        WHERE application_name = $1 AND name = $2 AND sha256 = $4
       ON CONFLICT (application_name, package_name, node_id) DO UPDATE SET sha256 = EXCLUDED.sha256,
         state = EXCLUDED.state, output = EXCLUDED.output, reported_at = now()`,
      [
        report.applicationName,
        report.packageName,
        report.nodeId,
        report.sha256,
        report.state,
        report.output,
      ],
    );
  }

  /** A stopped node's reports go (graceful shutdown: its library goes with it). */
  async forgetNode(nodeId: string): Promise<void> {
    await this.dataSource.query('DELETE FROM r_package_node WHERE node_id = $1', [nodeId]);
  }
}
