import { MigrationInterface, QueryRunner } from 'typeorm';

/** How many times a node running the job stopped responding: the second time, it is dead-lettered. */
export class AddJobLostRuns1795650000000 implements MigrationInterface {
  name = 'AddJobLostRuns1795650000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" ADD "lost_runs" integer NOT NULL DEFAULT 0');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "lost_runs"');
  }
}
