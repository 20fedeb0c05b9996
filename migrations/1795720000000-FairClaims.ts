import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Fair claims and submission rates: the claim index leads with the application (the claim takes
 * each application's first queued jobs, src/queue/queue.repository.ts), and a token bucket per
 * application and per principal, shared by all API nodes.
 */
export class FairClaims1795720000000 implements MigrationInterface {
  name = 'FairClaims1795720000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("application_name", "kind", "priority" DESC, "submitted_at") WHERE state = \'QUEUED\'',
    );
    await queryRunner.query(
      'CREATE TABLE "submission_bucket" ("bucket" character varying(200) NOT NULL, ' +
        '"tokens" double precision NOT NULL, "refilled_at" TIMESTAMP WITH TIME ZONE NOT NULL, ' +
        '"granted" boolean NOT NULL, CONSTRAINT "PK_submission_bucket" PRIMARY KEY ("bucket"))',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "submission_bucket"');
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("priority", "submitted_at") WHERE state = \'QUEUED\'',
    );
  }
}
