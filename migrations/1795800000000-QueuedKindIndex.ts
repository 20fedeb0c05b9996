import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Whether any R job of some kinds is queued and due, in one index descent per kind however many
 * are queued: asked by a submission that could start at once in a free slot of its node
 * (docs/queue.md "Starting where it is submitted"). Partial, like the claim's index: it holds
 * only the queued R jobs.
 */
export class QueuedKindIndex1795800000000 implements MigrationInterface {
  name = 'QueuedKindIndex1795800000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "job_queued_kind_idx" ON "job" ("kind", "run_after") WHERE state = 'QUEUED' AND kind IN ('script', 'xml', 'json')`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX "public"."job_queued_kind_idx"');
  }
}
