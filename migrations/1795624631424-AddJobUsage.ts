import { MigrationInterface, QueryRunner } from 'typeorm';

/** job_usage: what each finished job used, kept apart from results for the usage statistics. */
export class AddJobUsage1795624631424 implements MigrationInterface {
  name = 'AddJobUsage1795624631424';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "job_usage" ("job_id" uuid NOT NULL, "application_name" character varying(64) NOT NULL, "kind" character varying(16) NOT NULL, "outcome" character varying(16) NOT NULL, "submitted_at" TIMESTAMP WITH TIME ZONE NOT NULL, "started_at" TIMESTAMP WITH TIME ZONE, "finished_at" TIMESTAMP WITH TIME ZONE NOT NULL, "r_cpu_ms" integer, "bytes_in" bigint NOT NULL, "bytes_out" bigint NOT NULL, CONSTRAINT "PK_3ee0b39249eef46e44f9401de79" PRIMARY KEY ("job_id"))',
    );
    await queryRunner.query(
      'CREATE INDEX "IDX_job_usage_application_submitted" ON "job_usage" ("application_name", "submitted_at") ',
    );
    await queryRunner.query(
      'CREATE INDEX "IDX_job_usage_application_finished" ON "job_usage" ("application_name", "finished_at") ',
    );
    await queryRunner.query(
      'CREATE INDEX "IDX_job_usage_finished" ON "job_usage" ("finished_at") ',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX "public"."IDX_job_usage_finished"');
    await queryRunner.query('DROP INDEX "public"."IDX_job_usage_application_finished"');
    await queryRunner.query('DROP INDEX "public"."IDX_job_usage_application_submitted"');
    await queryRunner.query('DROP TABLE "job_usage"');
  }
}
