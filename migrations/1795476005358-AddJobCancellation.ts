import { MigrationInterface, QueryRunner } from 'typeorm';

/** Who cancelled a job and when (DELETE /jobs/{app}/{jobId}); NULL for a job that was not cancelled. */
export class AddJobCancellation1795476005358 implements MigrationInterface {
  name = 'AddJobCancellation1795476005358';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" ADD "cancelled_at" TIMESTAMP WITH TIME ZONE');
    await queryRunner.query('ALTER TABLE "job" ADD "cancelled_by" character varying(128)');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "cancelled_by"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "cancelled_at"');
  }
}
