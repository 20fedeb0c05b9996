import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Job callbacks: the URL a job names (with the base its links are written under) on the job,
 * and one delivery row per callback, made when the job's result is stored and deleted with it.
 */
export class AddJobCallbacks1795623279370 implements MigrationInterface {
  name = 'AddJobCallbacks1795623279370';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "job_callback" ("job_id" uuid NOT NULL, "url" character varying(2048) NOT NULL, "state" character varying(16) NOT NULL, "attempts" integer NOT NULL DEFAULT \'0\', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL, "next_attempt_at" TIMESTAMP WITH TIME ZONE NOT NULL, "last_attempt_at" TIMESTAMP WITH TIME ZONE, "last_http_status" integer, "last_error" text, "delivered_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_a9cd784886053c07241ebebe84b" PRIMARY KEY ("job_id"))',
    );
    await queryRunner.query(
      'CREATE INDEX "job_callback_due_idx" ON "job_callback" ("next_attempt_at") WHERE state = \'pending\'',
    );
    await queryRunner.query('ALTER TABLE "job" ADD "callback_url" character varying(2048)');
    await queryRunner.query('ALTER TABLE "job" ADD "callback_links_base" character varying(2048)');
    await queryRunner.query(
      'ALTER TABLE "job_callback" ADD CONSTRAINT "job_callback_job_fk" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job_callback" DROP CONSTRAINT "job_callback_job_fk"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "callback_links_base"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "callback_url"');
    await queryRunner.query('DROP INDEX "public"."job_callback_due_idx"');
    await queryRunner.query('DROP TABLE "job_callback"');
  }
}
