import { MigrationInterface, QueryRunner } from 'typeorm';

/** schedule.email: where a schedule's results are sent by e-mail (to, cc, subject), or null. */
export class AddScheduleEmail1795750000000 implements MigrationInterface {
  name = 'AddScheduleEmail1795750000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "schedule" ADD "email" jsonb`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "schedule" DROP COLUMN "email"`);
  }
}
