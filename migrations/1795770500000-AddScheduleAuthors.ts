import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who made and last changed a schedule (the principal with its kind, `user:alice`, up to 256 characters as every record of who did something; null for a
 * schedule made before this column, or by nobody authenticated), and the W3C trace context of
 * the request that made it: each run starts a trace of its own, linked to that one.
 */
export class AddScheduleAuthors1795770500000 implements MigrationInterface {
  name = 'AddScheduleAuthors1795770500000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "schedule" ADD "created_by" character varying(256)');
    await queryRunner.query('ALTER TABLE "schedule" ADD "updated_by" character varying(256)');
    await queryRunner.query('ALTER TABLE "schedule" ADD "traceparent" character varying(55)');
    await queryRunner.query('ALTER TABLE "schedule" ADD "tracestate" character varying(512)');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "schedule" DROP COLUMN "tracestate"');
    await queryRunner.query('ALTER TABLE "schedule" DROP COLUMN "traceparent"');
    await queryRunner.query('ALTER TABLE "schedule" DROP COLUMN "updated_by"');
    await queryRunner.query('ALTER TABLE "schedule" DROP COLUMN "created_by"');
  }
}
