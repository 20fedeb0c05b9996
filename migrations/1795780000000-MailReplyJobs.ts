import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * E-mail replies are sent by jobs of kind `mail_reply` on the queue (claimed, leased, retried by
 * run_after, put back by the supervisor), not by a poll loop of their own over mail_reply, which
 * keeps the message's record and what its reply says (the reply's job: `reply_job_id`). Each
 * pending reply gets its mail-reply job, due when its next attempt was. The jobs users see are
 * now named by their kinds, so the fair claim's index leaves out both kinds that are not R's;
 * the mail-reply jobs get a claim index of their own.
 */
export class MailReplyJobs1795780000000 implements MigrationInterface {
  name = 'MailReplyJobs1795780000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE "mail_reply" ADD "reply_job_id" uuid');
    await queryRunner.query(
      'CREATE INDEX "mail_reply_job_idx" ON "mail_reply" ("reply_job_id") WHERE reply_job_id IS NOT NULL',
    );
    await queryRunner.query(
      'CREATE INDEX "job_mail_reply_claim_idx" ON "job" ("run_after") WHERE state = \'QUEUED\' AND kind = \'mail_reply\'',
    );
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("application_name", "kind", "priority" DESC, "submitted_at") WHERE state = \'QUEUED\' AND kind IN (\'script\', \'xml\', \'json\')',
    );
    await queryRunner.query(
      `WITH owed AS (
         UPDATE mail_reply SET reply_job_id = gen_random_uuid()
          WHERE state = 'pending'
          RETURNING reply_job_id, application_name, coalesce(next_attempt_at, now()) AS due)
       INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at,
                        run_after, attempts)
       SELECT reply_job_id, application_name, 'mail_reply', 'QUEUED', 0, '{}', 'mail_reply', now(),
              due, 0
         FROM owed`,
    );
    await queryRunner.query('DROP INDEX "public"."mail_reply_due_idx"');
    await queryRunner.query('ALTER TABLE "mail_reply" DROP COLUMN "next_attempt_at"');
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE "mail_reply" ADD "next_attempt_at" TIMESTAMP WITH TIME ZONE',
    );
    // A pending reply is due when its job was (at once when one was running).
    await queryRunner.query(
      `UPDATE mail_reply m
          SET next_attempt_at = coalesce(
                (SELECT CASE WHEN j.state = 'QUEUED' THEN j.run_after ELSE now() END
                   FROM job j WHERE j.id = m.reply_job_id), now())
        WHERE m.state = 'pending'`,
    );
    await queryRunner.query(
      `CREATE INDEX "mail_reply_due_idx" ON "mail_reply" ("next_attempt_at") WHERE state = 'pending'`,
    );
    await queryRunner.query(`DELETE FROM job WHERE kind = 'mail_reply'`);
    await queryRunner.query('DROP INDEX "public"."job_claim_idx"');
    await queryRunner.query(
      'CREATE INDEX "job_claim_idx" ON "job" ("application_name", "kind", "priority" DESC, "submitted_at") WHERE state = \'QUEUED\' AND kind <> \'callback\'',
    );
    await queryRunner.query('DROP INDEX "public"."job_mail_reply_claim_idx"');
    await queryRunner.query('DROP INDEX "public"."mail_reply_job_idx"');
    await queryRunner.query('ALTER TABLE "mail_reply" DROP COLUMN "reply_job_id"');
  }
}
