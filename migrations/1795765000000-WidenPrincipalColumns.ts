import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Columns that record who did something hold the principal with its kind (`user:alice`,
 * `oidc:<name>`, docs/security.md#who-a-caller-is): a name of 128 characters and its kind no
 * longer fit 128. Widening a varchar rewrites no rows.
 */
export class WidenPrincipalColumns1795765000000 implements MigrationInterface {
  name = 'WidenPrincipalColumns1795765000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    for (const [table, column] of COLUMNS) {
      await queryRunner.query(`ALTER TABLE "${table}" ALTER COLUMN "${column}" TYPE varchar(256)`);
    }
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const [table, column] of COLUMNS) {
      await queryRunner.query(
        `ALTER TABLE "${table}" ALTER COLUMN "${column}" TYPE varchar(128) USING left("${column}", 128)`,
      );
    }
  }
}

const COLUMNS = [
  ['audit_event', 'principal'],
  ['job', 'cancelled_by'],
  ['api_key', 'created_by'],
  ['application_settings', 'updated_by'],
] as const;
