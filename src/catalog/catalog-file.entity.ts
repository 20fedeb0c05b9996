import { Column, Entity, PrimaryColumn } from 'typeorm';

export const CATALOG_SECTIONS = [
  'R_SCRIPTS',
  'SWEAVE_FILES',
  'JOB_CONFIGURATIONS',
  'R_FUNCTIONS',
  'EMAIL_REPLIES',
] as const;
export type CatalogSection = (typeof CATALOG_SECTIONS)[number];

/** A file of an application's catalog, shared by every node through the database. */
@Entity({ name: 'catalog_file' })
export class CatalogFileEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @PrimaryColumn({ type: 'varchar', length: 32 }) section!: CatalogSection;

  @PrimaryColumn({ type: 'varchar', length: 255 }) name!: string;

  @Column({ type: 'bytea' }) content!: Buffer;

  @Column({ name: 'updated_at', type: 'timestamptz' }) updatedAt!: Date;
}
