import { MigrationInterface, QueryRunner } from 'typeorm';

/** application_settings: an application's rights and settings changed at run time, versioned. */
export class AddApplicationSettings1795711000000 implements MigrationInterface {
  name = 'AddApplicationSettings1795711000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "application_settings" ("application_name" character varying(64) NOT NULL, "entry" jsonb NOT NULL, "version" integer NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL, "updated_by" character varying(128), CONSTRAINT "PK_a5f40dd764ac353788feff1272f" PRIMARY KEY ("application_name"))',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "application_settings"');
  }
}
