import { Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { DatabaseEvents, notificationPrefix } from '../storage/database-events.service';
import { ApplicationSettingsEntity, StoredApplicationEntry } from './application-settings.entity';

/** Channel of the notification sent with every change; the payload is the application's name. */
export const APPLICATION_SETTINGS_CHANGED_CHANNEL = 'svc_application_settings_changed';

/**
 * Every statement on `application_settings`. A change notifies every node in the same statement
 * (delivered at commit), with this node's prefix, so this node ignores the echo.
 */
@Injectable()
export class ApplicationSettingsRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Optional() private readonly events?: DatabaseEvents,
  ) {}

  private get sender(): string {
    return this.events?.prefix ?? notificationPrefix('');
  }

  /** Runs `work` in one transaction: a change and its audit row commit together. */
  inTransaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(work);
  }

  all(): Promise<ApplicationSettingsEntity[]> {
    return this.dataSource.getRepository(ApplicationSettingsEntity).find();
  }

  find(applicationName: string): Promise<ApplicationSettingsEntity | null> {
    return this.dataSource
      .getRepository(ApplicationSettingsEntity)
      .findOne({ where: { applicationName } });
  }

  /**
   * Stores the entry if the stored version is still `expectedVersion` (0: none stored yet); the
   * new row, or null when someone changed it meanwhile. Two writers with the same expectation:
   * the second waits for the first's row lock (or key), then finds the version moved on.
   */
  async save(
    applicationName: string,
    entry: StoredApplicationEntry,
    expectedVersion: number,
    updatedBy: string | null,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<ApplicationSettingsEntity | null> {
    const saved =
      expectedVersion === 0
        ? `INSERT INTO application_settings (application_name, entry, version, updated_at, updated_by)
           VALUES ($1, $2::jsonb, 1, now(), $3)
           ON CONFLICT (application_name) DO NOTHING
           RETURNING *`
        : `UPDATE application_settings
           SET entry = $2::jsonb, version = version + 1, updated_at = now(), updated_by = $3
           WHERE application_name = $1 AND version = $5
           RETURNING *`;
    const parameters: unknown[] = [applicationName, JSON.stringify(entry), updatedBy, this.sender];
    if (expectedVersion !== 0) {
      parameters.push(expectedVersion);
    }
    const rows = await manager.query<
      Array<{ entry: StoredApplicationEntry; version: number; updatedAt: Date; updatedBy: string }>
    >(
      `WITH saved AS (${saved})
       SELECT entry, version, updated_at AS "updatedAt", updated_by AS "updatedBy",
              pg_notify('${APPLICATION_SETTINGS_CHANGED_CHANNEL}', $4::text || application_name) AS notified
       FROM saved`,
      parameters,
    );
    if (rows.length === 0) {
      return null;
    }
    const row = rows[0];
    return {
      applicationName,
      entry: row.entry,
      version: row.version,
      updatedAt: row.updatedAt,
      updatedBy: row.updatedBy,
    };
  }
}
