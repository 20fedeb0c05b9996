import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateCoreTables1795341869415 implements MigrationInterface {
  name = 'CreateCoreTables1795341869415';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "catalog_file" ("application_name" character varying(64) NOT NULL, "section" character varying(32) NOT NULL, "name" character varying(255) NOT NULL, "content" bytea NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_dc11de0b88b3fee898d4c52e3bd" PRIMARY KEY ("application_name", "section", "name"))',
    );
    await queryRunner.query(
      'CREATE TABLE "job" ("id" uuid NOT NULL, "application_name" character varying(64) NOT NULL, "kind" character varying(16) NOT NULL, "state" character varying(16) NOT NULL, "priority" integer NOT NULL DEFAULT \'0\', "meta" jsonb NOT NULL, "source" character varying(16) NOT NULL, "submitted_at" TIMESTAMP WITH TIME ZONE NOT NULL, "run_after" TIMESTAMP WITH TIME ZONE NOT NULL, "started_at" TIMESTAMP WITH TIME ZONE, "finished_at" TIMESTAMP WITH TIME ZONE, "attempts" integer NOT NULL DEFAULT \'0\', "lease_owner" character varying(128), "lease_expires_at" TIMESTAMP WITH TIME ZONE, "last_error" text, CONSTRAINT "PK_98ab1c14ff8d1cf80d18703b92f" PRIMARY KEY ("id"))',
    );
    await queryRunner.query(
      'CREATE INDEX "job_lease_idx" ON "job" ("lease_expires_at") WHERE state = \'RUNNING\'',
    );
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("priority", "submitted_at") WHERE state = \'QUEUED\'',
    );
    await queryRunner.query(
      'CREATE TABLE "job_file" ("id" BIGSERIAL NOT NULL, "job_id" uuid NOT NULL, "name" character varying(255) NOT NULL, "content" bytea NOT NULL, "size" bigint NOT NULL, CONSTRAINT "PK_4426b8020b996793a6c1b1110aa" PRIMARY KEY ("id"))',
    );
    await queryRunner.query(
      'CREATE UNIQUE INDEX "job_file_job_name_uq" ON "job_file" ("job_id", "name") ',
    );
    await queryRunner.query(
      'CREATE TABLE "result" ("job_id" uuid NOT NULL, "application_name" character varying(64) NOT NULL, "result_time" TIMESTAMP WITH TIME ZONE NOT NULL, "success" boolean NOT NULL, "type" character varying(16) NOT NULL, "content_type" character varying(128) NOT NULL, "data" bytea NOT NULL, "size" bigint NOT NULL, "sha256" character varying(64) NOT NULL, CONSTRAINT "PK_3532f793f01ef1e405a2bcd99fa" PRIMARY KEY ("job_id"))',
    );
    await queryRunner.query('CREATE INDEX "result_time_idx" ON "result" ("result_time") ');
    await queryRunner.query(
      'CREATE INDEX "result_app_time_idx" ON "result" ("application_name", "result_time", "job_id") ',
    );
    await queryRunner.query(
      'ALTER TABLE "job_file" ADD CONSTRAINT "FK_2563771e6c73683698cca5cd475" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'ALTER TABLE "result" ADD CONSTRAINT "FK_3532f793f01ef1e405a2bcd99fa" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "result" DROP CONSTRAINT "FK_3532f793f01ef1e405a2bcd99fa"',
    );
    await queryRunner.query(
      'ALTER TABLE "job_file" DROP CONSTRAINT "FK_2563771e6c73683698cca5cd475"',
    );
    await queryRunner.query('DROP INDEX "public"."result_app_time_idx"');
    await queryRunner.query('DROP INDEX "public"."result_time_idx"');
    await queryRunner.query('DROP TABLE "result"');
    await queryRunner.query('DROP INDEX "public"."job_file_job_name_uq"');
    await queryRunner.query('DROP TABLE "job_file"');
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query('DROP INDEX "public"."job_lease_idx"');
    await queryRunner.query('DROP TABLE "job"');
    await queryRunner.query('DROP TABLE "catalog_file"');
  }
}
