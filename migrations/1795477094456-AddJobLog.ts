import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddJobLog1795477094456 implements MigrationInterface {
  name = 'AddJobLog1795477094456';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "job_log_line" ("job_id" uuid NOT NULL, "seq" integer NOT NULL, "stream" character varying(8) NOT NULL, "logged_at" TIMESTAMP WITH TIME ZONE NOT NULL, "line" text NOT NULL, CONSTRAINT "PK_770f9a203c9d3a7d0c680f13b2b" PRIMARY KEY ("job_id", "seq"))',
    );
    await queryRunner.query(
      'ALTER TABLE "job_log_line" ADD CONSTRAINT "FK_e4a7d4610d79cc5f4259078a240" FOREIGN KEY ("job_id") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "job_log_line" DROP CONSTRAINT "FK_e4a7d4610d79cc5f4259078a240"',
    );
    await queryRunner.query('DROP TABLE "job_log_line"');
  }
}
