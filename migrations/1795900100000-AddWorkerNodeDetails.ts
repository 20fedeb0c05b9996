import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a worker's heartbeat tells the console besides its slots: the service's version it runs,
 * when its process started and its resident memory. Null in rows written by an older node.
 */
export class AddWorkerNodeDetails1795900100000 implements MigrationInterface {
  name = 'AddWorkerNodeDetails1795900100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "worker_node" ADD "version" character varying(64), ADD "started_at" TIMESTAMP WITH TIME ZONE, ADD "memory_bytes" bigint`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "worker_node" DROP COLUMN "memory_bytes", DROP COLUMN "started_at", DROP COLUMN "version"`,
    );
  }
}
