import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Callbacks are delivered as jobs of kind `callback` on the queue (claimed, leased, retried by
 * run_after), not by a loop of their own over job_callback, which keeps what job status shows.
 * Each pending callback gets its callback job, due when its next attempt was; the claim index
 * leaves callback jobs out, and they get one of their own.
 */
export class CallbackJobs1795760000000 implements MigrationInterface {
  name = 'CallbackJobs1795760000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "job" ADD "callback_of" uuid');
    await queryRunner.query(
      'ALTER TABLE "job" ADD CONSTRAINT "job_callback_of_fk" FOREIGN KEY ("callback_of") REFERENCES "job"("id") ON DELETE CASCADE ON UPDATE NO ACTION',
    );
    await queryRunner.query(
      'CREATE INDEX "job_callback_of_idx" ON "job" ("callback_of") WHERE callback_of IS NOT NULL',
    );
    await queryRunner.query(
      'CREATE INDEX "job_callback_claim_idx" ON "job" ("run_after") WHERE state = \'QUEUED\' AND kind = \'callback\'',
    );
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("application_name", "kind", "priority" DESC, "submitted_at") WHERE state = \'QUEUED\' AND kind <> \'callback\'',
    );
    await queryRunner.query(
      `INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after,
                        attempts, callback_url, callback_links_base, traceparent, tracestate, callback_of)
       SELECT gen_random_uuid(), j.application_name, 'callback', 'QUEUED', 0, '{}', 'callback',
              c.created_at, c.next_attempt_at, 0, c.url, j.callback_links_base, j.traceparent,
              j.tracestate, c.job_id
         FROM job_callback c JOIN job j ON j.id = c.job_id
        WHERE c.state = 'pending'`,
    );
    await queryRunner.query('DROP INDEX "public"."job_callback_due_idx"');
    await queryRunner.query('ALTER TABLE "job_callback" DROP COLUMN "next_attempt_at"');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "job_callback" ADD "next_attempt_at" TIMESTAMP WITH TIME ZONE',
    );
    // A pending callback is due when its callback job was (at once when one was running).
    await queryRunner.query(
      `UPDATE job_callback c
          SET next_attempt_at = coalesce(
                (SELECT CASE WHEN j.state = 'QUEUED' THEN j.run_after ELSE now() END
                   FROM job j WHERE j.callback_of = c.job_id LIMIT 1), now())`,
    );
    await queryRunner.query(
      'ALTER TABLE "job_callback" ALTER COLUMN "next_attempt_at" SET NOT NULL',
    );
    await queryRunner.query(
      'CREATE INDEX "job_callback_due_idx" ON "job_callback" ("next_attempt_at") WHERE state = \'pending\'',
    );
    await queryRunner.query(`DELETE FROM job WHERE kind = 'callback'`);
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("application_name", "kind", "priority" DESC, "submitted_at") WHERE state = \'QUEUED\'',
    );
    await queryRunner.query('DROP INDEX "public"."job_callback_claim_idx"');
    await queryRunner.query('DROP INDEX "public"."job_callback_of_idx"');
    await queryRunner.query('ALTER TABLE "job" DROP CONSTRAINT "job_callback_of_fk"');
    await queryRunner.query('ALTER TABLE "job" DROP COLUMN "callback_of"');
  }
}
