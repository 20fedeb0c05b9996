import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * An R source package of an application, as an admin uploaded it (PUT /admin/packages/{name}).
 * Every worker node installs it into its own copy of the application's library; what each
 * node made of it is in RPackageNodeEntity.
 */
@Entity({ name: 'r_package' })
export class RPackageEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  /** DESCRIPTION's Package field, which is also the name in the path. */
  @PrimaryColumn({ type: 'varchar', length: 128 }) name!: string;

  /** DESCRIPTION's Version field. */
  @Column({ type: 'varchar', length: 64 }) version!: string;

  /** SHA-256 of the archive (hex): names this upload on every node. */
  @Column({ type: 'char', length: 64 }) sha256!: string;

  /** The source package, a .tar.gz as uploaded. */
  @Column({ type: 'bytea' }) archive!: Buffer;

  /** The principal that uploaded it (anonymous when AUTH_MODE=none). */
  @Column({ name: 'installed_by', type: 'varchar', length: 255 }) installedBy!: string;

  @Column({ name: 'installed_at', type: 'timestamptz' }) installedAt!: Date;
}
