import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A function call's R function on its job (the exported function, or svcXmlService /
 * svcJsonService), set at intake, for the console's job list. Jobs from before stay null.
 */
export class AddJobFunctionName1795900000000 implements MigrationInterface {
  name = 'AddJobFunctionName1795900000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "job" ADD "function_name" character varying(255)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "job" DROP COLUMN "function_name"`);
  }
}
