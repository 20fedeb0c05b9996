import { MigrationInterface, QueryRunner } from 'typeorm';

/** The last progress a job's R code reported with svc_progress; NULL until it reports one. */
export class AddJobProgress1795560000000 implements MigrationInterface {
  name = 'AddJobProgress1795560000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" ADD "progress_fraction" double precision');
    await queryRunner.query('ALTER TABLE "job" ADD "progress_message" character varying(500)');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "progress_message"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "progress_fraction"');
  }
}
