import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A browser's session with the upload page (AUTH_MODE with oidc): a signed-in principal. (Rows
 * of earlier versions also held sign-ins under way, in `sign_in`; those now live in a sealed
 * cookie, src/upload/sign-in-state.ts, and new rows leave the column null.) The cookie holds a random id; the table holds only its SHA-256, so a copy of the
 * table signs no one in.
 */
@Entity({ name: 'web_session' })
// Expired rows are removed by expiry time.
@Index('web_session_expires_idx', ['expiresAt'])
export class WebSessionEntity {
  /** SHA-256 (hex) of the cookie's value. */
  @PrimaryColumn({
    name: 'id_hash',
    type: 'char',
    length: 64,
    primaryKeyConstraintName: 'PK_web_session',
  })
  idHash!: string;

  /** The signed-in principal; null while the sign-in is under way. */
  @Column({ name: 'principal', type: 'varchar', length: 256, nullable: true })
  principal!: string | null;

  @Column({ name: 'roles', type: 'jsonb' }) roles!: string[];

  /** The sign-in's PKCE code verifier, state and nonce (null once signed in). */
  @Column({ name: 'sign_in', type: 'jsonb', nullable: true })
  signIn!: { codeVerifier: string; state: string; nonce: string } | null;

  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' }) expiresAt!: Date;
}
