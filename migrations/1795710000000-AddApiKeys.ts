import { MigrationInterface, QueryRunner } from 'typeorm';

/** api_key: API keys made at run time (the admin API, `svc keys`), with a hash of their secret. */
export class AddApiKeys1795710000000 implements MigrationInterface {
  name = 'AddApiKeys1795710000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "api_key" ("id" character varying(64) NOT NULL, "principal" character varying(128) NOT NULL, "roles" jsonb NOT NULL, "secret_hash" character varying(100) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL, "created_by" character varying(128), "expires_at" TIMESTAMP WITH TIME ZONE, "last_used_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_b1bd840641b8acbaad89c3d8d11" PRIMARY KEY ("id"))',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "api_key"');
  }
}
