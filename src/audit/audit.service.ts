import { createHmac } from 'node:crypto';
import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { currentRequestActor, type RequestActor } from '../common/request-actor';
import { AuditConfig } from '../config/config-slices';
import { AuditFilter, AuditRepository, AuditRow } from './audit.repository';
import type { AuditEventEntity } from './audit-event.entity';
import { outsideRequests } from '../common/outside-requests';

/** What the trail records. */
export const AUDIT_ACTIONS = [
  'job.submitted',
  'job.cancelled',
  'job.retried',
  'result.deleted',
  'catalog.changed',
  'package.installed',
  'package.removed',
  'apiKey.created',
  'apiKey.revoked',
  'admin.created',
  'application.changed',
  'authentication.failed',
  'signed.in',
  'signed.out',
  'mail.refused',
  'schedule.created',
  'schedule.changed',
  'schedule.paused',
  'schedule.resumed',
  'schedule.deleted',
  'environment.set',
  'environment.rolledBack',
  'environment.removed',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditRecord {
  action: AuditAction;
  applicationName?: string | null;
  jobId?: string | null;
  outcome?: 'success' | 'failure';
  details?: Record<string, unknown> | null;
}

/** Who acts outside of an HTTP request: a command line, a drop directory, a schedule. */
export type AuditActor = Pick<RequestActor, 'principal' | 'authMethod'>;

/** How work a schedule starts authenticated: it acts as the schedule, never as a person. */
export const SCHEDULE_AUTH_METHOD = 'schedule';

/** The actor of the jobs a schedule starts: `schedule:<its id>`. */
export function scheduleActor(scheduleId: string): AuditActor {
  return { principal: `schedule:${scheduleId}`, authMethod: SCHEDULE_AUTH_METHOD };
}

/** A schedule's principal names no person: kept as it is with AUDIT_PSEUDONYMIZE. */
const SCHEDULE_PRINCIPAL =
  /^schedule:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The fields of a row's details that name people (a key's principal, an application's user and
 * admin lists, a schedule's authors and e-mail recipients, a refused message's sender): with AUDIT_PSEUDONYMIZE their
 * values, at any depth, are stored as pseudonyms like the row's principal.
 */
const PERSON_FIELDS = new Set([
  'principal',
  'principals',
  'userPrincipals',
  'adminPrincipals',
  'createdBy',
  'updatedBy',
  'to',
  'cc',
  'from',
  'replyTo',
]);

/** Failed authentications are written as one row per client address per this period. */
const FAILURE_FLUSH_MS = 60_000;
const MAX_FAILURE_ADDRESSES = 10_000;

/**
 * The audit trail (docs/security.md#audit-trail). Callers hand `record` the transaction of the
 * change (its EntityManager), so the row commits with the change or not at all; who, how and
 * from where come from the request (request-actor.ts) unless an actor is given. With
 * AUDIT_PSEUDONYMIZE the principal is stored as a keyed hash, and filters hash it the same way.
 */
@Injectable()
export class AuditService implements OnApplicationShutdown {
  private readonly logger = new Logger('Audit');
  private readonly failures = new Map<string, number>();
  private flushTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly repository: AuditRepository,
    private readonly config: AuditConfig,
  ) {}

  /** The stored form of a principal: the name, or `h:` and its HMAC with AUDIT_PSEUDONYMIZE. */
  storedPrincipal(name: string | null): string | null {
    if (name === null || !this.config.auditPseudonymize || SCHEDULE_PRINCIPAL.test(name)) {
      return name;
    }
    const key = this.config.auditPseudonymKey ?? '';
    return `h:${createHmac('sha256', key).update(name, 'utf8').digest('hex')}`;
  }

  /** `details` with the values of PERSON_FIELDS pseudonymised (AUDIT_PSEUDONYMIZE), at any depth. */
  private storedDetails(value: unknown, field: string | null = null): unknown {
    if (!this.config.auditPseudonymize || value === null) {
      return value;
    }
    if (field !== null && PERSON_FIELDS.has(field)) {
      if (typeof value === 'string') {
        return this.storedPrincipal(value);
      }
      if (Array.isArray(value)) {
        return value.map((each: unknown) =>
          typeof each === 'string' ? this.storedPrincipal(each) : this.storedDetails(each),
        );
      }
    }
    if (Array.isArray(value)) {
      return value.map((each: unknown) => this.storedDetails(each));
    }
    if (typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value).map(([key, each]) => [key, this.storedDetails(each, key)]),
      );
    }
    return value;
  }

  /** The row `record` would write, for statements that write it themselves (job intake). */
  rowOf(record: AuditRecord, actor: AuditActor | null = null): AuditRow {
    const request = currentRequestActor();
    const who = actor ?? request;
    return {
      principal: this.storedPrincipal(who?.principal ?? null),
      authMethod: who?.authMethod ?? null,
      clientAddress: request?.clientAddress ?? null,
      requestId: request?.requestId ?? null,
      action: record.action,
      applicationName: record.applicationName ?? null,
      jobId: record.jobId ?? null,
      outcome: record.outcome ?? 'success',
      details: (this.storedDetails(record.details ?? null) as Record<string, unknown>) ?? null,
    };
  }

  /** Writes a row in `manager`'s transaction (the change's), or on its own without one. */
  async record(
    record: AuditRecord,
    manager?: EntityManager,
    actor: AuditActor | null = null,
  ): Promise<void> {
    await this.repository.insert([this.rowOf(record, actor)], manager);
  }

  /**
   * Counts a failed authentication from `address`; the counts are written once a minute, one row
   * per address (a row per failure would let a guesser fill the table and load the database).
   */
  authenticationFailed(address: string): void {
    if (this.failures.size >= MAX_FAILURE_ADDRESSES && !this.failures.has(address)) {
      return;
    }
    this.failures.set(address, (this.failures.get(address) ?? 0) + 1);
    if (this.flushTimer === null) {
      this.flushTimer = outsideRequests(() =>
        setTimeout(() => void this.flushFailures(), FAILURE_FLUSH_MS),
      );
      this.flushTimer.unref();
    }
  }

  /** Writes the counted failures now (also at shutdown). */
  async flushFailures(): Promise<void> {
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    const counted = [...this.failures];
    this.failures.clear();
    const rows = counted.map(([address, count]) => ({
      ...this.rowOf(
        { action: 'authentication.failed', outcome: 'failure', details: { count } },
        {
          principal: null,
          authMethod: null,
        },
      ),
      clientAddress: address.slice(0, 64),
      requestId: null,
    }));
    try {
      await this.repository.insert(rows);
    } catch (error) {
      this.logger.warn(
        `could not write ${rows.length} failed-authentication row(s): ${(error as Error).message}`,
      );
    }
  }

  /** Newest first, after writing this node's pending failure counts (so the answer has them). */
  async list(filter: AuditFilter): Promise<AuditEventEntity[]> {
    if (this.failures.size > 0) {
      await this.flushFailures();
    }
    return this.repository.list({ ...filter, principal: this.storedPrincipal(filter.principal) });
  }

  deleteExpired(days: number): Promise<number> {
    return this.repository.deleteExpired(days);
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.failures.size > 0) {
      await this.flushFailures();
    }
  }
}
