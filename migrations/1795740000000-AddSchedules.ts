import { MigrationInterface, QueryRunner } from 'typeorm';

/** schedule and schedule_run: scheduled jobs, and the key that fires each planned time once. */
export class AddSchedules1795740000000 implements MigrationInterface {
  name = 'AddSchedules1795740000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "schedule" ("id" uuid NOT NULL, "application_name" character varying(64) NOT NULL, "name" character varying(200) NOT NULL, "cron" character varying(200) NOT NULL, "time_zone" character varying(64) NOT NULL, "job_kind" character varying(16) NOT NULL, "r_script" character varying(255), "meta" jsonb NOT NULL, "payload" text, "catch_up" character varying(16) NOT NULL, "callback_url" character varying(2048), "callback_links_base" character varying(2048), "paused" boolean NOT NULL DEFAULT false, "covered_until" TIMESTAMP WITH TIME ZONE NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL, "last_planned_at" TIMESTAMP WITH TIME ZONE, "last_run_at" TIMESTAMP WITH TIME ZONE, "last_job_id" uuid, "last_error" text, CONSTRAINT "PK_1c05e42aec7371641193e180046" PRIMARY KEY ("id"))',
    );
    await queryRunner.query(
      'CREATE INDEX "schedule_application_idx" ON "schedule" ("application_name") ',
    );
    await queryRunner.query(
      'CREATE TABLE "schedule_run" ("schedule_id" uuid NOT NULL, "planned_at" TIMESTAMP WITH TIME ZONE NOT NULL, "job_id" uuid, "fired_at" TIMESTAMP WITH TIME ZONE NOT NULL, "node" character varying(255) NOT NULL, "error" text, CONSTRAINT "PK_11b7aff8bb957db5ef24ff1528f" PRIMARY KEY ("schedule_id", "planned_at"))',
    );
    await queryRunner.query(
      'CREATE INDEX "schedule_run_fired_idx" ON "schedule_run" ("fired_at") ',
    );
    await queryRunner.query(
      'ALTER TABLE "schedule_run" ADD CONSTRAINT "schedule_run_schedule_fk" FOREIGN KEY ("schedule_id") REFERENCES "schedule"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "schedule_run" DROP CONSTRAINT "schedule_run_schedule_fk"',
    );
    await queryRunner.query('DROP INDEX "public"."schedule_run_fired_idx"');
    await queryRunner.query('DROP TABLE "schedule_run"');
    await queryRunner.query('DROP INDEX "public"."schedule_application_idx"');
    await queryRunner.query('DROP TABLE "schedule"');
  }
}
