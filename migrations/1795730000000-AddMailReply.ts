import { MigrationInterface, QueryRunner } from 'typeorm';

/** mail_reply: messages taken from mailboxes, the job each became and the reply it is owed. */
export class AddMailReply1795730000000 implements MigrationInterface {
  name = 'AddMailReply1795730000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "mail_reply" ("source" character varying(64) NOT NULL, "source_key" character varying(255) NOT NULL, "application_name" character varying(64) NOT NULL, "job_id" uuid NOT NULL, "state" character varying(16) NOT NULL, "received_at" TIMESTAMP WITH TIME ZONE NOT NULL, "rejection" text, "reply_to" text, "reply_cc" text, "reply_subject" text, "reply_from" character varying(320) NOT NULL, "in_reply_to" text, "attach_max_bytes" bigint NOT NULL, "attempts" integer NOT NULL DEFAULT '0', "next_attempt_at" TIMESTAMP WITH TIME ZONE, "first_attempt_at" TIMESTAMP WITH TIME ZONE, "last_error" text, "replied_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "mail_reply_pk" PRIMARY KEY ("source", "source_key"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "mail_reply_due_idx" ON "mail_reply" ("next_attempt_at") WHERE state = 'pending'`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX "public"."mail_reply_due_idx"');
    await queryRunner.query('DROP TABLE "mail_reply"');
  }
}
