import { Column, Entity, PrimaryColumn } from 'typeorm';

/** What a stored entry holds: the application's parts of the three configuration variables. */
export interface StoredApplicationEntry {
  /** As an APPLICATION_SECURITY entry. */
  security: Record<string, unknown>;
  /** As an APPLICATION_SETTINGS entry (callbackSecret included; never answered). */
  settings: Record<string, unknown>;
  /** As an APPLICATION_SLOTS entry; null: none. */
  slots: number | null;
}

/**
 * An application's rights and settings as changed at run time (PUT /admin/applications/{app}):
 * they replace the configured ones for that application on every node. `version` grows by one
 * with each change (the ETag), so a change made meanwhile is detected (412).
 */
@Entity({ name: 'application_settings' })
export class ApplicationSettingsEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @Column({ type: 'jsonb' }) entry!: StoredApplicationEntry;

  @Column({ type: 'integer' }) version!: number;

  @Column({ name: 'updated_at', type: 'timestamptz' }) updatedAt!: Date;

  @Column({ name: 'updated_by', type: 'varchar', length: 256, nullable: true })
  updatedBy!: string | null;
}
