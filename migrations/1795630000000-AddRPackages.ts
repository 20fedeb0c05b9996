import { MigrationInterface, QueryRunner } from 'typeorm';

/** r_package: R source packages uploaded through the admin API; r_package_node: each node's install. */
export class AddRPackages1795630000000 implements MigrationInterface {
  name = 'AddRPackages1795630000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "r_package" ("application_name" character varying(64) NOT NULL, "name" character varying(128) NOT NULL, "version" character varying(64) NOT NULL, "sha256" character(64) NOT NULL, "archive" bytea NOT NULL, "installed_by" character varying(255) NOT NULL, "installed_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_63b37ce0fcc94213994d18bdde7" PRIMARY KEY ("application_name", "name"))',
    );
    await queryRunner.query(
      'CREATE TABLE "r_package_node" ("application_name" character varying(64) NOT NULL, "package_name" character varying(128) NOT NULL, "node_id" character varying(255) NOT NULL, "sha256" character(64) NOT NULL, "state" character varying(16) NOT NULL, "output" text, "reported_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "PK_cb189268fd66da507b81fea71b3" PRIMARY KEY ("application_name", "package_name", "node_id"))',
    );
    await queryRunner.query(
      'ALTER TABLE "r_package_node" ADD CONSTRAINT "FK_4904dfde803677c2e44c61dc26b" FOREIGN KEY ("application_name", "package_name") REFERENCES "r_package"("application_name","name") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "r_package_node" DROP CONSTRAINT "FK_4904dfde803677c2e44c61dc26b"',
    );
    await queryRunner.query('DROP TABLE "r_package_node"');
    await queryRunner.query('DROP TABLE "r_package"');
  }
}
