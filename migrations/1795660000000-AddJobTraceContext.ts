import { MigrationInterface, QueryRunner } from 'typeorm';

/** The W3C trace context a job was submitted in, so its run and callback join that trace. */
export class AddJobTraceContext1795660000000 implements MigrationInterface {
  name = 'AddJobTraceContext1795660000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" ADD "traceparent" character varying(55)');
    await queryRunner.query('ALTER TABLE "job" ADD "tracestate" character varying(512)');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "tracestate"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "traceparent"');
  }
}
