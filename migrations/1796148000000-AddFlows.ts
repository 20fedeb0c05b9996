import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Flows (docs/flows.md): the queue's job_need and job_wait (a job waiting for other jobs, and the
 * reruns of a failed run it has), and the flows module's flow and flow_step.
 */
export class AddFlows1796148000000 implements MigrationInterface {
  name = 'AddFlows1796148000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "job_need" ("job_id" uuid NOT NULL, "needed_job_id" uuid NOT NULL, "name" character varying(64) NOT NULL, "required" boolean NOT NULL, "counted" boolean NOT NULL DEFAULT false, CONSTRAINT "PK_b232a75aa8e6763596b8704c6f6" PRIMARY KEY ("job_id", "needed_job_id"))',
    );
    await queryRunner.query('CREATE INDEX "job_need_needed_idx" ON "job_need" ("needed_job_id") ');
    await queryRunner.query(
      'CREATE TABLE "job_wait" ("job_id" uuid NOT NULL, "needs_left" integer NOT NULL, "retries_left" integer NOT NULL, CONSTRAINT "PK_a74f5d2b52d8ad3940f98ae81c6" PRIMARY KEY ("job_id"))',
    );
    await queryRunner.query(
      'CREATE TABLE "flow" ("id" uuid NOT NULL, "application_name" character varying(64) NOT NULL, "submitted_at" TIMESTAMP WITH TIME ZONE NOT NULL, "submitted_by" character varying(300), "cancelled_at" TIMESTAMP WITH TIME ZONE, "cancelled_by" character varying(256), CONSTRAINT "PK_6c2ad4a3e86394cd9bb7a80a228" PRIMARY KEY ("id"))',
    );
    await queryRunner.query(
      'CREATE TABLE "flow_step" ("flow_id" uuid NOT NULL, "name" character varying(64) NOT NULL, "position" integer NOT NULL, "needs" jsonb NOT NULL, "on_failure" character varying(16) NOT NULL, "retries" integer NOT NULL, "job_id" uuid, CONSTRAINT "PK_ef4f350dd13af1935000b1672c8" PRIMARY KEY ("flow_id", "name"))',
    );
    await queryRunner.query('CREATE UNIQUE INDEX "flow_step_job_uq" ON "flow_step" ("job_id") ');
    await queryRunner.query(
      'ALTER TABLE "job_need" ADD CONSTRAINT "job_need_job_fk" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'ALTER TABLE "job_need" ADD CONSTRAINT "job_need_needed_fk" FOREIGN KEY ("needed_job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'ALTER TABLE "job_wait" ADD CONSTRAINT "job_wait_job_fk" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'ALTER TABLE "flow_step" ADD CONSTRAINT "flow_step_flow_fk" FOREIGN KEY ("flow_id") REFERENCES "flow"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'ALTER TABLE "flow_step" ADD CONSTRAINT "flow_step_job_fk" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE SET NULL ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "flow_step" DROP CONSTRAINT "flow_step_job_fk"');
    await queryRunner.query('ALTER TABLE "flow_step" DROP CONSTRAINT "flow_step_flow_fk"');
    await queryRunner.query('ALTER TABLE "job_wait" DROP CONSTRAINT "job_wait_job_fk"');
    await queryRunner.query('ALTER TABLE "job_need" DROP CONSTRAINT "job_need_needed_fk"');
    await queryRunner.query('ALTER TABLE "job_need" DROP CONSTRAINT "job_need_job_fk"');
    await queryRunner.query('DROP INDEX "public"."flow_step_job_uq"');
    await queryRunner.query('DROP TABLE "flow_step"');
    await queryRunner.query('DROP TABLE "flow"');
    await queryRunner.query('DROP TABLE "job_wait"');
    await queryRunner.query('DROP INDEX "public"."job_need_needed_idx"');
    await queryRunner.query('DROP TABLE "job_need"');
  }
}
