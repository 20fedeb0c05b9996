import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * audit_event: who did what, append-only. A trigger refuses UPDATE, DELETE and TRUNCATE unless
 * the transaction set `svc.audit_retention` (only AuditRepository.deleteExpired does, for
 * AUDIT_RETENTION_DAYS): a bug or a stray statement of the service cannot rewrite history. The
 * database's owner can still drop the trigger; that is the operator, whom the threat model trusts.
 */
export class AddAuditTrail1795712000000 implements MigrationInterface {
  name = 'AddAuditTrail1795712000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE "audit_event" ("id" BIGSERIAL NOT NULL, "time" TIMESTAMP WITH TIME ZONE NOT NULL, "principal" character varying(128), "auth_method" character varying(32), "client_address" character varying(64), "request_id" character varying(128), "action" character varying(64) NOT NULL, "application_name" character varying(64), "job_id" uuid, "outcome" character varying(16) NOT NULL, "details" jsonb, CONSTRAINT "PK_481efbe8b0a403efe3f47a6528f" PRIMARY KEY ("id"))',
    );
    await queryRunner.query('CREATE INDEX "audit_event_time_idx" ON "audit_event" ("time")');
    await queryRunner.query(
      `CREATE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF TG_OP = 'DELETE' AND current_setting('svc.audit_retention', true) = 'on' THEN
           RETURN OLD;
         END IF;
         RAISE EXCEPTION 'audit_event is append-only: % refused', TG_OP;
       END $$`,
    );
    await queryRunner.query(
      'CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON "audit_event" FOR EACH ROW EXECUTE FUNCTION audit_event_append_only()',
    );
    await queryRunner.query(
      'CREATE TRIGGER audit_event_no_truncate BEFORE TRUNCATE ON "audit_event" FOR EACH STATEMENT EXECUTE FUNCTION audit_event_append_only()',
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE "audit_event"');
    await queryRunner.query('DROP FUNCTION audit_event_append_only()');
  }
}
