import { MigrationInterface, QueryRunner } from 'typeorm';

export class BlobChunks1795445354085 implements MigrationInterface {
  name = 'BlobChunks1795445354085';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "job_file_chunk" ("file_id" bigint NOT NULL, "seq" integer NOT NULL, "data" bytea NOT NULL, CONSTRAINT "PK_35e8a32317d2405cd1c5f8dc462" PRIMARY KEY ("file_id", "seq"))',
    );
    await queryRunner.query(
      'CREATE TABLE "result_chunk" ("job_id" uuid NOT NULL, "seq" integer NOT NULL, "data" bytea NOT NULL, CONSTRAINT "PK_6ba3137fcbe313701d07efae9ae" PRIMARY KEY ("job_id", "seq"))',
    );
    await queryRunner.query('ALTER TABLE "job_file" ADD "chunked" boolean NOT NULL DEFAULT false');
    await queryRunner.query('ALTER TABLE "result" ADD "chunked" boolean NOT NULL DEFAULT false');
    await queryRunner.query(
      'ALTER TABLE "job_file_chunk" ADD CONSTRAINT "FK_3a559d87be78b00719bad93273c" FOREIGN KEY ("file_id") REFERENCES "job_file"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'ALTER TABLE "result_chunk" ADD CONSTRAINT "FK_e157f128039ba797d91afd6ac3c" FOREIGN KEY ("job_id") REFERENCES "result"("job_id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "result_chunk" DROP CONSTRAINT "FK_e157f128039ba797d91afd6ac3c"',
    );
    await queryRunner.query(
      'ALTER TABLE "job_file_chunk" DROP CONSTRAINT "FK_3a559d87be78b00719bad93273c"',
    );
    await queryRunner.query('ALTER TABLE "result" DROP COLUMN "chunked"');
    await queryRunner.query('ALTER TABLE "job_file" DROP COLUMN "chunked"');
    await queryRunner.query('DROP TABLE "result_chunk"');
    await queryRunner.query('DROP TABLE "job_file_chunk"');
  }
}
