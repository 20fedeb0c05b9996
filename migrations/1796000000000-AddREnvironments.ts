import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Applications' R environments (docs/environments.md): every lockfile an application was given,
 * with what it resolved to and how its build went (`r_environment`), and which one it asks for
 * and which one its jobs run in (`application_environment`).
 */
export class AddREnvironments1796000000000 implements MigrationInterface {
  name = 'AddREnvironments1796000000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "r_environment" ("id" BIGSERIAL NOT NULL, "application_name" character varying(64) NOT NULL, "lockfile" jsonb NOT NULL, "lockfile_sha256" character(64) NOT NULL, "resolved" jsonb NOT NULL, "contents_sha256" character(64) NOT NULL, "created_by" character varying(256) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL, "built_at" TIMESTAMP WITH TIME ZONE, "build_report" jsonb, "build_error" text, CONSTRAINT "PK_49cedc76d10e27eb34e252d64cc" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "IDX_r_environment_application" ON "r_environment" ("application_name", "id") `,
    );
    await queryRunner.query(
      `CREATE TABLE "application_environment" ("application_name" character varying(64) NOT NULL, "requested_id" bigint NOT NULL, "active_id" bigint, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_323a14ff45b4b7737cd15ee23b7" PRIMARY KEY ("application_name"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "application_environment"');
    await queryRunner.query('DROP INDEX "public"."IDX_r_environment_application"');
    await queryRunner.query('DROP TABLE "r_environment"');
  }
}
