import { MigrationInterface, QueryRunner } from 'typeorm';

/** web_session: the upload page's sign-ins under way and signed-in browsers (AUTH_MODE oidc). */
export class AddWebSession1795700000000 implements MigrationInterface {
  name = 'AddWebSession1795700000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "web_session" ("id_hash" character(64) NOT NULL, "principal" character varying(256), "roles" jsonb NOT NULL, "sign_in" jsonb, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL, "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_web_session" PRIMARY KEY ("id_hash"))`,
    );
    await queryRunner.query(
      'CREATE INDEX "web_session_expires_idx" ON "web_session" ("expires_at")',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX "public"."web_session_expires_idx"');
    await queryRunner.query('DROP TABLE "web_session"');
  }
}
