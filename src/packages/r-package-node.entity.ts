import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';
import { RPackageEntity } from './r-package.entity';

export const PACKAGE_NODE_STATES = ['installed', 'failed', 'unsupported'] as const;
export type PackageNodeState = (typeof PACKAGE_NODE_STATES)[number];

/**
 * What one worker node made of one upload of a package: installed, failed (R's output says
 * why; the node keeps the version it had), or unsupported (its engine cannot install packages).
 * Goes with the package (ON DELETE CASCADE).
 */
@Entity({ name: 'r_package_node' })
@ForeignKey(() => RPackageEntity, ['applicationName', 'packageName'], ['applicationName', 'name'], {
  onDelete: 'CASCADE',
})
export class RPackageNodeEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @PrimaryColumn({ name: 'package_name', type: 'varchar', length: 128 }) packageName!: string;

  /** The worker's node id (host:pid:random, as in its job leases). */
  @PrimaryColumn({ name: 'node_id', type: 'varchar', length: 255 }) nodeId!: string;

  /** The upload this row is about (RPackageEntity.sha256 at the time). */
  @Column({ type: 'char', length: 64 }) sha256!: string;

  @Column({ type: 'varchar', length: 16 }) state!: PackageNodeState;

  /** R's output when the install failed, or why the node cannot install. */
  @Column({ type: 'text', nullable: true }) output!: string | null;

  @Column({ name: 'reported_at', type: 'timestamptz' }) reportedAt!: Date;
}
