import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { auditRowSql } from '../audit/audit.repository';
import { notificationPrefix } from '../storage/database-events.service';
import { CatalogFileEntity, CatalogSection } from './catalog-file.entity';
import { CATALOG_CHANGED_CHANNEL, CatalogChanges } from './catalog-changes';

/**
 * The per-application catalog (SPEC §8), stored in the database so every node sees one copy.
 * Every change notifies CATALOG_CHANGED_CHANNEL in the same statement, so nodes that cache
 * catalog content (warm R sessions hold an application's functions) learn of it at once,
 * whoever made the change (the admin API on any node, `catalog:load`). In the service the
 * change is also reported in-process (CatalogChanges); a command-line tool has no
 * CatalogChanges and notifies with no node id, so every node hears it.
 */
@Injectable()
export class CatalogService {
  private readonly storedListeners: Array<(applicationName: string) => void> = [];

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Optional() private readonly changes?: CatalogChanges,
  ) {}

  /** Before the payload of each change notified: this node's id, or none (a command). */
  private get sender(): string {
    return this.changes?.prefix ?? notificationPrefix('');
  }

  /** Calls `listener` with the application of each file this process stores from now on. */
  onFileStored(listener: (applicationName: string) => void): void {
    this.storedListeners.push(listener);
  }

  async getFile(
    applicationName: string,
    section: CatalogSection,
    name: string,
  ): Promise<Buffer | null> {
    const file = await this.dataSource
      .getRepository(CatalogFileEntity)
      .findOne({ where: { applicationName, section, name }, select: { content: true } });
    return file?.content ?? null;
  }

  /**
   * Inserts or replaces a file; returns true when it was new. `audit`: the row recording it
   * (auditRowJson), written by the same statement.
   */
  async putFile(
    applicationName: string,
    section: CatalogSection,
    name: string,
    content: Buffer,
    audit: string | null = null,
  ): Promise<boolean> {
    const rows = await this.dataSource.query<Array<{ inserted: boolean }>>(
      `WITH upserted AS (
         INSERT INTO catalog_file (application_name, section, name, content, updated_at)
         VALUES ($1, $2, $3, $4, now())
         ON CONFLICT (application_name, section, name) DO UPDATE SET content = EXCLUDED.content, updated_at = now()
         RETURNING (xmax = 0) AS inserted
       ),
       audited AS (${auditRowSql('$6', 'upserted', '$1', 'NULL::uuid')})
       SELECT inserted, pg_notify('${CATALOG_CHANGED_CHANNEL}', $5::text || $1 || '/' || $2) FROM upserted`,
      [applicationName, section, name, content, this.sender, audit],
    );
    this.changes?.changed(applicationName, section);
    this.storedListeners.forEach((listener) => listener(applicationName));
    return rows[0]?.inserted ?? false;
  }

  /** Deletes a file; returns false when there was none. `audit`: as for putFile, only when deleted. */
  async deleteFile(
    applicationName: string,
    section: CatalogSection,
    name: string,
    audit: string | null = null,
  ): Promise<boolean> {
    const rows = await this.dataSource.query<Array<{ deleted: boolean }>>(
      `WITH deleted AS (
         DELETE FROM catalog_file WHERE application_name = $1 AND section = $2 AND name = $3
         RETURNING 1
       ),
       audited AS (${auditRowSql('$5', 'deleted', '$1', 'NULL::uuid')})
       SELECT true AS deleted, pg_notify('${CATALOG_CHANGED_CHANNEL}', $4::text || $1 || '/' || $2) FROM deleted`,
      [applicationName, section, name, this.sender, audit],
    );
    if (rows.length > 0) {
      this.changes?.changed(applicationName, section);
    }
    return rows.length > 0;
  }

  async listFiles(
    applicationName: string,
  ): Promise<Array<{ section: CatalogSection; name: string }>> {
    return this.dataSource.getRepository(CatalogFileEntity).find({
      where: { applicationName },
      select: { section: true, name: true },
      order: { section: 'ASC', name: 'ASC' },
    });
  }

  /** Applications that have at least one catalog file, by name. */
  async listApplications(): Promise<string[]> {
    const rows = await this.dataSource.query<Array<{ application_name: string }>>(
      'SELECT DISTINCT application_name FROM catalog_file ORDER BY application_name',
    );
    return rows.map((row) => row.application_name);
  }

  /**
   * Per application with files in `section`: a fingerprint that changes with any change to them
   * (a file stored, replaced or deleted), for nodes that cannot LISTEN for the notification.
   */
  async sectionFingerprints(section: CatalogSection): Promise<Map<string, string>> {
    const rows = await this.dataSource.query<Array<{ application_name: string; print: string }>>(
      `SELECT application_name, count(*) || '/' || max(updated_at) AS print
         FROM catalog_file WHERE section = $1 GROUP BY application_name`,
      [section],
    );
    return new Map(rows.map((row) => [row.application_name, row.print]));
  }

  async countFiles(): Promise<number> {
    return this.dataSource.getRepository(CatalogFileEntity).count();
  }
}
