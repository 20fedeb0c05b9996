import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AuditAction, AuditService } from '../audit/audit.service';
import { CallbackUrlPolicy } from '../callbacks/callback-url.policy';
import { CatalogService } from '../catalog/catalog.service';
import { KnownApplications } from '../catalog/known-applications';
import { ApiError } from '../common/api-error';
import { isJobId } from '../common/application-name';
import { REST_PREFIX, RestLinks } from '../common/public-uri';
import { currentRequestActor } from '../common/request-actor';
import { MailConfig } from '../config/config-slices';
import { activeTraceCarrier } from '../tracing/tracing';
import { scheduleDefinitionOf, ScheduleDefinition, ScheduledJob } from './schedule-definition';
import type { ScheduleDto } from './schedule.dto';
import { cronOf } from './schedule-plan';
import { ScheduleEmail, ScheduleEntity } from './schedule.entity';
import { ScheduleChangeRecorder, ScheduleRepository } from './schedule.repository';

/** A schedule as the admin API shows it (docs/api.md#schedules). */
export interface ScheduleView {
  id: string;
  application: string;
  name: string;
  cron: string;
  timeZone: string;
  job:
    | { rScript: string; meta: Record<string, string> }
    | { functionCall: 'json' | 'xml'; payload: string };
  catchUp: string;
  callbackUrl: string | null;
  email: ScheduleEmail | null;
  paused: boolean;
  /** The next planned time from now on; null while paused. */
  nextRunTime: string | null;
  /** The last run: its planned time, when it ran, its job (or why it made none). */
  lastRun: {
    plannedTime: string;
    time: string | null;
    jobId: string | null;
    jobUri: string | null;
    error: string | null;
  } | null;
  createdTime: string;
  updatedTime: string;
  /** The principal that made it; null: made before svc kept it. */
  createdBy: string | null;
  /** The principal that last changed it (made, replaced, paused or resumed it). */
  updatedBy: string | null;
  selfUri: string;
}

/** The longest tracestate kept with a schedule (the column's length); a longer one is dropped. */
const MAX_TRACESTATE_LENGTH = 512;

/** A schedule as an audit row's `before` or `after` holds it: the definition, not its clock. */
function auditedSchedule(schedule: ScheduleEntity | null): Record<string, unknown> | null {
  if (schedule === null) {
    return null;
  }
  return {
    name: schedule.name,
    cron: schedule.cron,
    timeZone: schedule.timeZone,
    // A function call's payload may be a megabyte: its size is enough to see that it changed.
    job:
      schedule.jobKind === 'script'
        ? { rScript: schedule.rScript, meta: schedule.meta }
        : {
            functionCall: schedule.jobKind,
            payloadBytes: Buffer.byteLength(schedule.payload ?? '', 'utf8'),
          },
    catchUp: schedule.catchUp,
    callbackUrl: schedule.callbackUrl,
    email: schedule.email,
    paused: schedule.paused,
    createdBy: schedule.createdBy,
    updatedBy: schedule.updatedBy,
  };
}

/** The name of the principal the current request acts for; null outside of one. */
function requestPrincipal(): string | null {
  return currentRequestActor()?.principal ?? null;
}

/** The callback_links_base column's length. */
const MAX_LINKS_BASE_LENGTH = 2048;

export function scheduleUri(base: string, id: string): string {
  return `${base}${REST_PREFIX}/admin/schedules/${id}`;
}

function jobView(schedule: ScheduleEntity): ScheduleView['job'] {
  return schedule.jobKind === 'script'
    ? { rScript: schedule.rScript ?? '', meta: schedule.meta }
    : { functionCall: schedule.jobKind as 'json' | 'xml', payload: schedule.payload ?? '' };
}

function missingSchedule(applicationName: string, id: string): ApiError {
  return ApiError.notFound(`Application ${applicationName} has no schedule ${id}.`);
}

/** The admin API's schedules: checks definitions against the catalog and callback rules. */
@Injectable()
export class SchedulesService {
  private readonly logger = new Logger('Schedules');

  constructor(
    private readonly schedules: ScheduleRepository,
    private readonly catalog: CatalogService,
    private readonly applications: KnownApplications,
    private readonly callbackUrls: CallbackUrlPolicy,
    private readonly config: MailConfig,
    private readonly audit: AuditService,
  ) {}

  /** Writes the change's audit row (`action`, the schedule before and after) in its transaction. */
  private recorder(action: AuditAction, applicationName: string): ScheduleChangeRecorder {
    return async (manager: EntityManager, before, after) => {
      await this.audit.record(
        {
          action,
          applicationName,
          details: {
            scheduleId: (after ?? before)?.id ?? null,
            before: auditedSchedule(before),
            after: auditedSchedule(after),
          },
        },
        manager,
      );
    };
  }

  async list(applicationName: string, base: string): Promise<ScheduleView[]> {
    const now = new Date();
    return (await this.schedules.list(applicationName)).map((s) => this.view(s, base, now));
  }

  async get(applicationName: string, id: string, base: string): Promise<ScheduleView> {
    return this.view(await this.existing(applicationName, id), base, new Date());
  }

  async create(applicationName: string, body: ScheduleDto, base: string): Promise<ScheduleView> {
    const definition = await this.checked(applicationName, body);
    const now = new Date();
    const author = requestPrincipal();
    const trace = activeTraceCarrier();
    const schedule = Object.assign(new ScheduleEntity(), {
      id: randomUUID(),
      applicationName,
      ...this.columnsOf(definition, base),
      // Its clock starts now: nothing planned before the schedule existed is missed.
      coveredUntil: now,
      createdAt: now,
      updatedAt: now,
      lastPlannedAt: null,
      lastRunAt: null,
      lastJobId: null,
      lastError: null,
      createdBy: author,
      updatedBy: author,
      traceparent: trace?.traceparent ?? null,
      tracestate:
        trace?.tracestate && trace.tracestate.length <= MAX_TRACESTATE_LENGTH
          ? trace.tracestate
          : null,
    });
    await this.schedules.insert(schedule, this.recorder('schedule.created', applicationName));
    this.logger.log(
      `created schedule ${schedule.id} "${schedule.name}" of ${applicationName}: ${schedule.cron} (${schedule.timeZone})`,
    );
    return this.view(schedule, base, now);
  }

  /** Replaces the definition; a changed cron or time zone starts the clock again at now. */
  async replace(
    applicationName: string,
    id: string,
    body: ScheduleDto,
    base: string,
  ): Promise<ScheduleView> {
    const schedule = await this.existing(applicationName, id);
    const definition = await this.checked(applicationName, body);
    const now = new Date();
    const timing = definition.cron !== schedule.cron || definition.timeZone !== schedule.timeZone;
    const resumed = schedule.paused && !definition.paused;
    const changed = await this.schedules.update(
      applicationName,
      id,
      {
        ...this.columnsOf(definition, base),
        updatedAt: now,
        updatedBy: requestPrincipal(),
        ...(timing || resumed ? { coveredUntil: now } : {}),
      },
      this.recorder('schedule.changed', applicationName),
    );
    if (!changed) {
      throw missingSchedule(applicationName, id);
    }
    this.logger.log(`replaced schedule ${id} of ${applicationName}`);
    return this.get(applicationName, id, base);
  }

  async remove(applicationName: string, id: string): Promise<void> {
    checkScheduleId(id);
    if (
      !(await this.schedules.delete(
        applicationName,
        id,
        this.recorder('schedule.deleted', applicationName),
      ))
    ) {
      throw missingSchedule(applicationName, id);
    }
    this.logger.log(`deleted schedule ${id} of ${applicationName}`);
  }

  async setPaused(
    applicationName: string,
    id: string,
    paused: boolean,
    base: string,
  ): Promise<ScheduleView> {
    checkScheduleId(id);
    const recorder = this.recorder(
      paused ? 'schedule.paused' : 'schedule.resumed',
      applicationName,
    );
    if (
      !(await this.schedules.setPaused(applicationName, id, paused, requestPrincipal(), recorder))
    ) {
      throw missingSchedule(applicationName, id);
    }
    this.logger.log(`${paused ? 'paused' : 'resumed'} schedule ${id} of ${applicationName}`);
    return this.get(applicationName, id, base);
  }

  private async existing(applicationName: string, id: string): Promise<ScheduleEntity> {
    checkScheduleId(id);
    const schedule = await this.schedules.find(applicationName, id);
    if (schedule === null) {
      throw missingSchedule(applicationName, id);
    }
    return schedule;
  }

  /** The definition, with what it names checked: the application, its script or functions, the callback. */
  private async checked(applicationName: string, body: ScheduleDto): Promise<ScheduleDefinition> {
    const definition = scheduleDefinitionOf(body, applicationName);
    const files = await this.catalog.listFiles(applicationName);
    if (files.length === 0 && !this.applications.has(applicationName)) {
      throw ApiError.notFound(
        `Application ${applicationName} is unknown: it has no catalog files and no settings.`,
      );
    }
    checkJob(applicationName, definition.job, files);
    if (definition.callbackUrl !== null) {
      definition.callbackUrl = await this.callbackUrls.check(
        applicationName,
        definition.callbackUrl,
        'callbackUrl',
      );
    }
    if (definition.email !== null) {
      this.checkCanSendMail();
    }
    return definition;
  }

  /** A schedule's `email` needs SMTP_URL and EMAIL_FROM: refused rather than never sent. */
  private checkCanSendMail(): void {
    const missing = [
      ...(this.config.smtpUrl === null ? ['SMTP_URL'] : []),
      ...(this.config.emailFrom === null ? ['EMAIL_FROM'] : []),
    ];
    if (missing.length > 0) {
      throw ApiError.badRequest(
        `email: this service sends no e-mail (${missing.join(' and ')} not configured); ` +
          'leave email out or ask the operator to configure it.',
      );
    }
  }

  private columnsOf(definition: ScheduleDefinition, base: string): Partial<ScheduleEntity> {
    const { job } = definition;
    if (definition.callbackUrl !== null && base.length > MAX_LINKS_BASE_LENGTH) {
      // The callbacks' links are written under it: it is stored with the schedule.
      throw ApiError.badRequest(
        `The request's base URL is longer than ${MAX_LINKS_BASE_LENGTH} characters (Host, X-Forwarded-Host).`,
      );
    }
    return {
      name: definition.name,
      cron: definition.cron,
      timeZone: definition.timeZone,
      jobKind: job.kind,
      rScript: job.kind === 'script' ? job.rScript : null,
      meta: job.kind === 'script' ? job.meta : {},
      payload: job.kind === 'script' ? null : job.payload,
      catchUp: definition.catchUp,
      callbackUrl: definition.callbackUrl,
      callbackLinksBase: definition.callbackUrl === null ? null : base,
      email: definition.email,
      paused: definition.paused,
    };
  }

  private view(schedule: ScheduleEntity, base: string, now: Date): ScheduleView {
    const from = schedule.coveredUntil > now ? schedule.coveredUntil : now;
    const next = schedule.paused ? null : cronOf(schedule.cron, schedule.timeZone).nextRun(from);
    const links = new RestLinks(base);
    return {
      id: schedule.id,
      application: schedule.applicationName,
      name: schedule.name,
      cron: schedule.cron,
      timeZone: schedule.timeZone,
      job: jobView(schedule),
      catchUp: schedule.catchUp,
      callbackUrl: schedule.callbackUrl,
      email: schedule.email,
      paused: schedule.paused,
      nextRunTime: next?.toISOString() ?? null,
      lastRun:
        schedule.lastPlannedAt === null
          ? null
          : {
              plannedTime: schedule.lastPlannedAt.toISOString(),
              time: schedule.lastRunAt?.toISOString() ?? null,
              jobId: schedule.lastJobId,
              jobUri:
                schedule.lastJobId === null
                  ? null
                  : links.jobStatus(schedule.applicationName, schedule.lastJobId),
              error: schedule.lastError,
            },
      createdTime: schedule.createdAt.toISOString(),
      updatedTime: schedule.updatedAt.toISOString(),
      createdBy: schedule.createdBy,
      updatedBy: schedule.updatedBy,
      selfUri: scheduleUri(base, schedule.id),
    };
  }
}

function checkScheduleId(id: string): void {
  if (!isJobId(id)) {
    throw ApiError.badRequest(`"${id.slice(0, 80)}" is not a schedule id (a UUID).`);
  }
}

/** The catalog has what the job needs: its script, or functions to call. */
function checkJob(
  applicationName: string,
  job: ScheduledJob,
  files: Array<{ section: string; name: string }>,
): void {
  if (job.kind === 'script') {
    if (!files.some((f) => f.section === 'R_SCRIPTS' && f.name === job.rScript)) {
      throw ApiError.badRequest(
        `job.rScript: application ${applicationName} has no catalog script R_SCRIPTS/${job.rScript}.`,
      );
    }
    return;
  }
  if (!files.some((f) => f.section === 'R_FUNCTIONS')) {
    throw ApiError.badRequest(
      `job.functionCall: application ${applicationName} has no R_FUNCTIONS in its catalog to call.`,
    );
  }
}
