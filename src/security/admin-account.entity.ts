import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A global admin made at run time (`svc admin create`), who signs in with HTTP Basic in every
 * AUTH_MODE as ADMIN_USER does. The password is generated (32 random bytes) and only its SHA-256
 * is kept: as for API keys made at run time, a slow hash adds nothing against guessing it.
 */
@Entity({ name: 'admin_account' })
export class AdminAccountEntity {
  @PrimaryColumn({
    name: 'name',
    type: 'varchar',
    length: 128,
    primaryKeyConstraintName: 'PK_admin_account',
  })
  name!: string;

  /** `sha256$…` (common/secret-hash.ts, fastSecretHash). */
  @Column({ name: 'password_hash', type: 'varchar', length: 200 }) passwordHash!: string;

  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
