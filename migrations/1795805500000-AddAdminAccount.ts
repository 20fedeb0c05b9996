import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Global admins made at run time (`svc admin create`), beside ADMIN_USER: a name and a hash of
 * its generated password (docs/security.md#an-admin-made-at-run-time).
 */
export class AddAdminAccount1795805500000 implements MigrationInterface {
  name = 'AddAdminAccount1795805500000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "admin_account" ("name" character varying(128) NOT NULL, "password_hash" character varying(200) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_admin_account" PRIMARY KEY ("name"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "admin_account"');
  }
}
