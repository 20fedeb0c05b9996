import { MigrationInterface, QueryRunner } from 'typeorm';

/** drop_file: files taken from drop directories, the job each became, its outbox result. */
export class AddDropFile1795634587042 implements MigrationInterface {
  name = 'AddDropFile1795634587042';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "drop_file" ("application_name" character varying(64) NOT NULL, "claim_id" character varying(64) NOT NULL, "file_name" character varying(255) NOT NULL, "job_id" uuid NOT NULL, "claimed_at" TIMESTAMP WITH TIME ZONE NOT NULL, "submitted_at" TIMESTAMP WITH TIME ZONE, "result_written_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_ccb8b5268e5bdb705f51ec50fcc" PRIMARY KEY ("application_name", "claim_id"))',
    );
    await queryRunner.query(
      'CREATE INDEX "drop_file_pending_idx" ON "drop_file" ("application_name") WHERE result_written_at IS NULL',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX "public"."drop_file_pending_idx"');
    await queryRunner.query('DROP TABLE "drop_file"');
  }
}
