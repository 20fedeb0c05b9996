import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import type { ResolvedPackage } from './environment-resolution';
import type { Lockfile } from './renv-lockfile';

/**
 * One environment an application asked for: its lockfile (what svc keeps of it, checked) and
 * what the lockfile resolved to against the allowed sources; then how its build went. What it
 * holds is never changed (a new lockfile is a new row, so the application's history is its
 * rows, newest first); only its build's outcome is added.
 */
@Entity({ name: 'r_environment' })
@Index('IDX_r_environment_application', ['applicationName', 'id'])
export class REnvironmentEntity {
  @PrimaryGeneratedColumn({ type: 'bigint' }) id!: string;

  @Column({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @Column({ type: 'jsonb' }) lockfile!: Lockfile;

  /** SHA-256 of `lockfile` (lockfileDigest). */
  @Column({ name: 'lockfile_sha256', type: 'char', length: 64 }) lockfileSha256!: string;

  @Column({ type: 'jsonb' }) resolved!: ResolvedPackage[];

  /** SHA-256 of the resolved contents (contentsDigest). */
  @Column({ name: 'contents_sha256', type: 'char', length: 64 }) contentsSha256!: string;

  @Column({ name: 'created_by', type: 'varchar', length: 256 }) createdBy!: string;

  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;

  /** When a worker first built it (then it can be put in force again without a build). */
  @Column({ name: 'built_at', type: 'timestamptz', nullable: true }) builtAt!: Date | null;

  /** Per package: whether the build took it from the cache (`cached`) or built it. */
  @Column({ name: 'build_report', type: 'jsonb', nullable: true })
  buildReport!: EnvironmentBuildReport | null;

  /** Why its build failed: the package and the end of R CMD INSTALL's log; null otherwise. */
  @Column({ name: 'build_error', type: 'text', nullable: true }) buildError!: string | null;
}

/** What one build did, per package. */
export interface EnvironmentBuildReport {
  /** The digest of the library: resolved contents, R x.y and platform. */
  librarySha256: string;
  rVersion: string;
  platform: string;
  packages: Array<{ name: string; version: string; cached: boolean }>;
  seconds: number;
}

/** Which environment an application asked for last: its row's id (the pointer a rollback moves). */
@Entity({ name: 'application_environment' })
export class ApplicationEnvironmentEntity {
  @PrimaryColumn({ name: 'application_name', type: 'varchar', length: 64 })
  applicationName!: string;

  @Column({ name: 'requested_id', type: 'bigint' }) requestedId!: string;

  /**
   * The environment its jobs run in: the requested one once a worker built it, an earlier one
   * until then or when its build failed; null: none yet (the node's library, as without one).
   */
  @Column({ name: 'active_id', type: 'bigint', nullable: true }) activeId!: string | null;

  @Column({ name: 'updated_at', type: 'timestamptz' }) updatedAt!: Date;
}
