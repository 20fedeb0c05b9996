import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the operator console reads: who submitted each job (`job.submitted_by`, the principal
 * with its kind; null for jobs the service made or an anonymous caller sent), the R jobs newest
 * first for the admin list (one partial index, which the list's filters and the overview's
 * window read too), and the worker nodes' heartbeats (`worker_node`, one row per running
 * worker, deleted when it stops).
 */
export class ConsoleJobsAndWorkers1795790000000 implements MigrationInterface {
  name = 'ConsoleJobsAndWorkers1795790000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" ADD "submitted_by" varchar(300)');
    await queryRunner.query(
      'CREATE INDEX "job_admin_list_idx" ON "job" ("submitted_at" DESC, "id" DESC) WHERE kind IN (\'script\', \'xml\', \'json\')',
    );
    await queryRunner.query(
      `CREATE TABLE "worker_node" (
         "node_id" varchar(128) NOT NULL,
         "role" varchar(16) NOT NULL,
         "r_engine" varchar(16) NOT NULL,
         "slots" integer NOT NULL,
         "busy" integer NOT NULL,
         "heartbeat_at" timestamptz NOT NULL,
         CONSTRAINT "worker_node_pk" PRIMARY KEY ("node_id"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "worker_node"');
    await queryRunner.query('DROP INDEX "public"."job_admin_list_idx"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "submitted_by"');
  }
}
