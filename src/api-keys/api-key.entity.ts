import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * An API key made at run time (admin API or `svc keys create`). Only a SHA-256 of its secret is
 * kept: the secret is 32 random bytes, so a fast hash is as good as a slow one against guessing,
 * and every node can check a key without paying scrypt. Revoking deletes the row.
 */
@Entity({ name: 'api_key' })
export class ApiKeyEntity {
  /** The part before the dot of `<keyId>.<secret>`. */
  @PrimaryColumn({ type: 'varchar', length: 64 }) id!: string;

  @Column({ type: 'varchar', length: 128 }) principal!: string;

  @Column({ type: 'jsonb' }) roles!: string[];

  /** `sha256$<base64>` of the secret. */
  @Column({ name: 'secret_hash', type: 'varchar', length: 100 }) secretHash!: string;

  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;

  /** Who made it (a principal), or null for the command line. */
  @Column({ name: 'created_by', type: 'varchar', length: 256, nullable: true })
  createdBy!: string | null;

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true }) expiresAt!: Date | null;

  /** Updated at most once a minute per key and node, not on every request. */
  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt!: Date | null;
}
