import { HttpStatus, Injectable, Optional } from '@nestjs/common';
import type { Readable } from 'node:stream';
import { ApiError } from '../common/api-error';
import { REST_PREFIX } from '../common/public-uri';
import { missing } from '../common/missing-resource';
import { QueueConfig, SecurityConfig } from '../config/config-slices';
import { authMethodsOf } from '../config/security-settings';
import { auditRowJson } from '../audit/audit.repository';
import { AUDIT_ACTIONS, AuditService } from '../audit/audit.service';
import { ApplicationsDirectory } from '../admin/applications-directory.service';
import { JobCancellationService } from '../jobs/job-cancellation.service';
import { QUEUE_FULL_RETRY_AFTER_SECONDS, SubmissionLimits } from '../jobs/submission-limits';
import {
  AdminJobRow,
  JobAdminRepository,
  JobFilter,
  JobPosition,
  OverviewBucketRow,
  RetryOutcome,
} from '../queue/job-admin.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { JobKind } from '../queue/queue.types';
import { WorkerNodesRepository } from '../queue/worker-nodes.repository';
import { AccessPolicyService } from '../security/access-policy.service';
import type { Principal } from '../security/principal';
import { consoleJob, ConsoleJob } from './console-view';
import { cursorOf, RequestedJobs } from './job-filter';
import { JobEventsService } from './job-events.service';

/** Who the caller is to the console. */
export interface ConsoleCaller {
  principal: string;
  globalAdmin: boolean;
  /** The applications they administer (a global admin: every known one). */
  applications: string[];
  /**
   * Whether AUTH_MODE lets API keys in: without `apiKey` in it, a key made at run time is stored
   * but every request that sends it is refused, which the console says before one is made.
   */
  apiKeysAccepted: boolean;
  /** The actions the audit trail records, for its filter (a global admin's; else empty). */
  auditActions: string[];
}

export interface JobPage {
  jobs: ConsoleJob[];
  /** The next page's cursor; null on the last page. */
  next: string | null;
  /** The jobs the filter matches, counted up to TOTAL_CAP. */
  total: number;
  /** More than `total` match. */
  totalCapped: boolean;
}

/** A job as its page shows it: with its input files kept for a run or a retry. */
export interface ConsoleJobDetail extends ConsoleJob {
  inputFiles: {
    /** Every input file kept (a job that succeeded or was cancelled has none left). */
    total: number;
    /** The first INPUT_FILES_SHOWN by name, each with its download for the job's admins. */
    files: Array<{ name: string; size: number; uri: string }>;
  };
}

/** A job's page lists this many of its input files at most (a ZIP may hold thousands). */
export const INPUT_FILES_SHOWN = 200;

/** A list's total is counted up to this many jobs. */
export const TOTAL_CAP = 10000;

export interface BulkCancel {
  cancelled: number;
  jobIds: string[];
  more: boolean;
}

interface Series {
  bucketSeconds: number;
  buckets: Array<{
    at: string;
    waitP50Ms: number | null;
    waitP95Ms: number | null;
    runP50Ms: number | null;
    runP95Ms: number | null;
    started: number;
    finished: number;
    succeeded: number;
    failed: number;
    queueDepth: number;
  }>;
}

export interface Overview {
  generatedAt: string;
  applications: Array<{
    application: string;
    queued: number;
    running: number;
    succeededLastHour: number;
    failedLastHour: number;
  }>;
  series: { hour: Series; day: Series };
  workers: Array<{
    node: string;
    role: string;
    rEngine: string;
    slots: number;
    busy: number;
    free: number;
    heartbeatAt: string;
    stale: boolean;
    /** The service's version it runs; null: a node from before it was reported. */
    version: string | null;
    startedAt: string | null;
    /** Its process's resident memory at the last heartbeat (R's processes not counted). */
    memoryBytes: number | null;
    /** Its running R jobs of the applications the caller sees (busy counts every one). */
    runningJobs: Array<{ applicationName: string; jobId: string; startedAt: string }>;
  }>;
}

/** What a bulk retry did: the jobs queued again, and those it left failed and why. */
export interface BulkRetry {
  retried: number;
  jobIds: string[];
  /** Per application whose maxQueuedJobs was reached: its limit and the failed jobs left. */
  queueFull: Array<{ application: string; maxQueuedJobs: number; skipped: number }>;
  /** Failed jobs that cannot be retried (they failed before their input files were kept). */
  notRetryable: number;
  /** Further failed jobs matched beyond `limit`. */
  more: boolean;
}

/** A bulk retry's dry run: the failed jobs it would take, for a confirmation that names them. */
export interface BulkRetryCount {
  failed: number;
  /** More than `failed` match (counted up to TOTAL_CAP). */
  capped: boolean;
}

/** A worker is stale after this many heartbeats missed. */
const STALE_HEARTBEATS = 3;

/**
 * The operator console's API (docs/api.md#the-operator-console): who may see which
 * applications' jobs, the jobs under filters, a job retried or many cancelled, the overview.
 * A global admin sees every application, an application admin those they administer; every
 * question is narrowed to them here, whatever the request names.
 */
@Injectable()
export class ConsoleService {
  constructor(
    private readonly policy: AccessPolicyService,
    private readonly directory: ApplicationsDirectory,
    private readonly jobs: JobAdminRepository,
    private readonly workers: WorkerNodesRepository,
    private readonly cancellation: JobCancellationService,
    private readonly notifier: QueueNotifier,
    private readonly events: JobEventsService,
    private readonly queueConfig: QueueConfig,
    private readonly security: SecurityConfig,
    private readonly limits: SubmissionLimits,
    @Optional() private readonly audit?: AuditService,
  ) {}

  async caller(principal: Principal): Promise<ConsoleCaller> {
    const globalAdmin = this.policy.isGlobalAdmin(principal);
    return {
      principal: principal.id,
      globalAdmin,
      applications: globalAdmin
        ? (await this.directory.list()).map((entry) => entry.application)
        : this.policy.administeredApplications(principal),
      apiKeysAccepted: authMethodsOf(this.security.authMode).has('apiKey'),
      auditActions: globalAdmin ? [...AUDIT_ACTIONS] : [],
    };
  }

  /** The applications the principal may see; null: every one (a global admin). */
  visibleApplications(principal: Principal): string[] | null {
    return this.policy.isGlobalAdmin(principal)
      ? null
      : this.policy.administeredApplications(principal);
  }

  /** Why `principal` can no longer see all of `visible` (null: every application), or null. */
  lostApplications(principal: Principal, visible: readonly string[] | null): string | null {
    const now = this.visibleApplications(principal);
    if (now === null) {
      return null;
    }
    if (visible === null) {
      return 'its caller is no longer a global admin';
    }
    const lost = visible.filter((application) => !now.includes(application));
    return lost.length === 0 ? null : `its caller no longer administers ${lost.join(', ')}`;
  }

  async list(
    principal: Principal,
    requested: RequestedJobs,
    limit: number,
    after: JobPosition | null,
    base: string,
  ): Promise<JobPage> {
    const filter = this.filterFor(principal, requested);
    const [rows, counted] = await Promise.all([
      this.jobs.list(filter, limit + 1, after),
      this.jobs.count(filter, TOTAL_CAP),
    ]);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      jobs: page.map((row) => consoleJob(base, row)),
      next: rows.length > limit ? cursorOf({ at: last.position_at, id: last.id }) : null,
      total: counted.total,
      totalCapped: counted.capped,
    };
  }

  /**
   * One job with its input files (the first INPUT_FILES_SHOWN by name); 404 when it does not
   * exist or the principal may not see its application.
   */
  async job(
    principal: Principal,
    applicationName: string,
    jobId: string,
    base: string,
  ): Promise<ConsoleJobDetail> {
    const row = await this.visibleJob(principal, applicationName, jobId);
    const inputs = await this.jobs.inputFiles(row.id, INPUT_FILES_SHOWN);
    const job = consoleJob(base, row);
    return {
      ...job,
      inputFiles: {
        total: inputs.total,
        files: inputs.files.map((file) => ({
          name: file.name,
          size: file.size,
          uri: `${base}${REST_PREFIX}/admin/jobs/${row.application_name}/${row.id}/files/${file.id}`,
        })),
      },
    };
  }

  /** One input file of a job the principal may see, to download; 404 when there is none. */
  async inputFile(
    principal: Principal,
    applicationName: string,
    jobId: string,
    fileId: string,
  ): Promise<{ name: string; size: number; open: () => Readable }> {
    await this.visibleJob(principal, applicationName, jobId);
    const file = await this.jobs.inputFile(applicationName, jobId, fileId);
    if (file === null) {
      throw ApiError.notFound(
        `Job ${jobId} of application ${applicationName} has no input file ${fileId} (a job's input files are removed once it succeeds or is cancelled).`,
      );
    }
    return file;
  }

  /** Queues a failed job again (202); 409 for one that did not fail, 404 as for job(). */
  async retry(
    principal: Principal,
    applicationName: string,
    jobId: string,
    base: string,
  ): Promise<ConsoleJob> {
    const job = await this.visibleJob(principal, applicationName, jobId);
    const done = await this.retryOne(applicationName, job.id, job.kind, null);
    if (done.outcome === 'unknown') {
      throw missing.job(applicationName, jobId);
    }
    if (done.outcome === 'refused') {
      throw new ApiError(HttpStatus.CONFLICT, refusal(jobId, done.reason));
    }
    if (done.outcome === 'queue-full') {
      throw ApiError.tooManyRequests(
        `The application "${applicationName}" has ${done.queued} jobs queued, its limit (maxQueuedJobs: ${this.limits.maxQueuedOf(applicationName) ?? done.queued}): retry once some have started.`,
        QUEUE_FULL_RETRY_AFTER_SECONDS,
      );
    }
    this.events.changed(applicationName);
    return this.job(principal, applicationName, jobId, base);
  }

  /** How many failed jobs a bulk retry under the filter would take (its dry run). */
  async countFailed(principal: Principal, requested: RequestedJobs): Promise<BulkRetryCount> {
    const counted = await this.jobs.count(this.failedFilter(principal, requested), TOTAL_CAP);
    return { failed: counted.total, capped: counted.capped };
  }

  /**
   * Retries up to `limit` failed jobs under the filter, newest first, each through the retry of
   * one job (audited one by one as `job.retried`, the request's filter in its details) within
   * its application's maxQueuedJobs: once an application is full its further jobs are skipped
   * and counted, not tried.
   */
  async retryFailed(
    principal: Principal,
    requested: RequestedJobs,
    limit: number,
    filterFields: Record<string, unknown>,
  ): Promise<BulkRetry> {
    const rows = await this.jobs.matching(this.failedFilter(principal, requested), limit + 1);
    const answer: BulkRetry = {
      retried: 0,
      jobIds: [],
      queueFull: [],
      notRetryable: 0,
      more: rows.length > limit,
    };
    const full = new Map<string, BulkRetry['queueFull'][number]>();
    const touched = new Set<string>();
    for (const row of rows.slice(0, limit)) {
      const application = row.application_name;
      const skipping = full.get(application);
      if (skipping) {
        skipping.skipped += 1;
        continue;
      }
      const done = await this.retryOne(application, row.id, row.kind, {
        filter: auditedFilter(filterFields),
      });
      if (done.outcome === 'retried') {
        answer.jobIds.push(row.id);
        touched.add(application);
      } else if (done.outcome === 'queue-full') {
        const entry = {
          application,
          maxQueuedJobs: this.limits.maxQueuedOf(application) ?? done.queued,
          skipped: 1,
        };
        full.set(application, entry);
        answer.queueFull.push(entry);
      } else {
        // Refused (failed before its inputs were kept) or gone meanwhile: not retried.
        answer.notRetryable += 1;
      }
    }
    answer.retried = answer.jobIds.length;
    for (const application of touched) {
      this.events.changed(application);
    }
    return answer;
  }

  /**
   * One job's retry within its application's maxQueuedJobs, audited as the request's caller
   * (`details`: what the audit row adds), and this node's workers woken (the others through the
   * statement's NOTIFY).
   */
  private async retryOne(
    applicationName: string,
    jobId: string,
    kind: JobKind,
    details: Record<string, unknown> | null,
  ): Promise<RetryOutcome> {
    const done = await this.jobs.retry(
      applicationName,
      jobId,
      this.audit ? auditRowJson(this.audit.rowOf({ action: 'job.retried', details })) : null,
      this.limits.maxQueuedOf(applicationName),
    );
    if (done.outcome === 'retried') {
      this.notifier.jobQueued(kind);
      if (done.repliesQueued) {
        this.notifier.jobQueued(JobKind.MAIL_REPLY);
      }
    }
    return done;
  }

  /**
   * Cancels one queued or running job as DELETE /jobs/{app}/{id} does, in the name of the
   * console's caller (audited as them whatever AUTH_MODE is: the job API's DELETE has no caller
   * in AUTH_MODE=none); answers the job as it stands then. 409 when it had finished, 404 as for
   * job().
   */
  async cancelOne(
    principal: Principal,
    applicationName: string,
    jobId: string,
    base: string,
  ): Promise<ConsoleJob> {
    await this.visibleJob(principal, applicationName, jobId);
    const outcome = await this.cancellation.cancel(applicationName, jobId, principal.id);
    if (outcome === 'unknown') {
      throw missing.job(applicationName, jobId);
    }
    if (outcome === 'finished') {
      throw new ApiError(
        HttpStatus.CONFLICT,
        `Job ${jobId} of application ${applicationName} has finished already: only a queued or running job can be cancelled.`,
      );
    }
    return this.job(principal, applicationName, jobId, base);
  }

  /**
   * Cancels up to `limit` queued or running jobs under the filter, newest first, each as
   * DELETE /jobs/{app}/{id} does (audited one by one); `more`: further jobs matched.
   */
  async cancel(principal: Principal, requested: RequestedJobs, limit: number): Promise<BulkCancel> {
    const filter = this.filterFor(principal, requested);
    const rows = await this.jobs.matching(
      { ...filter, states: filter.states.length > 0 ? filter.states : ['QUEUED', 'RUNNING'] },
      limit + 1,
    );
    const jobIds: string[] = [];
    for (const row of rows.slice(0, limit)) {
      const outcome = await this.cancellation.cancel(row.application_name, row.id, principal.id);
      if (outcome === 'stopped' || outcome === 'stopping') {
        jobIds.push(row.id);
      }
    }
    return { cancelled: jobIds.length, jobIds, more: rows.length > limit };
  }

  async overview(principal: Principal): Promise<Overview> {
    const visible = this.visibleApplications(principal);
    const [known, counts, hour, day, workers] = await Promise.all([
      // A global admin's: those named or in the catalog, and those with jobs in the window.
      visible ?? this.directory.namedOrCatalogued(),
      this.jobs.overviewApplications(visible),
      this.jobs.overviewSeries(visible, 60, 60),
      this.jobs.overviewSeries(visible, 900, 96),
      this.workers.list(visible),
    ]);
    const countsOf = new Map(counts.map((row) => [row.application_name, row]));
    const names = [...new Set([...known, ...countsOf.keys()])].sort();
    const staleMs = STALE_HEARTBEATS * this.queueConfig.heartbeatSeconds * 1000;
    return {
      generatedAt: new Date().toISOString(),
      applications: names.map((application) => {
        const row = countsOf.get(application);
        return {
          application,
          queued: row?.queued ?? 0,
          running: row?.running ?? 0,
          succeededLastHour: row?.succeeded_last_hour ?? 0,
          failedLastHour: row?.failed_last_hour ?? 0,
        };
      }),
      series: { hour: seriesOf(60, hour), day: seriesOf(900, day) },
      workers: workers.nodes.map((node) => ({
        node: node.nodeId,
        role: node.role,
        rEngine: node.rEngine,
        slots: node.slots,
        busy: node.busy,
        free: Math.max(0, node.slots - node.busy),
        heartbeatAt: new Date(node.heartbeatAt).toISOString(),
        stale: workers.now.getTime() - new Date(node.heartbeatAt).getTime() > staleMs,
        version: node.version,
        startedAt: node.startedAt === null ? null : new Date(node.startedAt).toISOString(),
        memoryBytes: node.memoryBytes,
        runningJobs: node.runningJobs.map((job) => ({
          applicationName: job.applicationName,
          jobId: job.jobId,
          startedAt: job.startedAt.toISOString(),
        })),
      })),
    };
  }

  /**
   * The filter of a request narrowed to what the principal may see: an application admin who
   * names an application not theirs gets a 403.
   */
  private filterFor(principal: Principal, requested: RequestedJobs): JobFilter {
    const visible = this.visibleApplications(principal);
    const { application, ...rest } = requested;
    if (application !== null && visible !== null && !visible.includes(application)) {
      throw new ApiError(
        HttpStatus.FORBIDDEN,
        `${principal.id} is not an admin of application ${application}.`,
      );
    }
    return { ...rest, applications: application !== null ? [application] : visible };
  }

  /** The filter narrowed to the principal's applications, of failed jobs only. */
  private failedFilter(principal: Principal, requested: RequestedJobs): JobFilter {
    return { ...this.filterFor(principal, requested), states: ['FAILED'] };
  }

  private async visibleJob(
    principal: Principal,
    applicationName: string,
    jobId: string,
  ): Promise<AdminJobRow> {
    const visible = this.visibleApplications(principal);
    const row =
      visible === null || visible.includes(applicationName)
        ? await this.jobs.findOne(applicationName, jobId)
        : null;
    if (row === null) {
      throw missing.job(applicationName, jobId);
    }
    return row;
  }
}

/**
 * A bulk action's filter as its audit rows record it: `from` and `to` (submission times) renamed,
 * since the audit trail takes fields of those names for e-mail addresses and pseudonymises them.
 */
export function auditedFilter(fields: Record<string, unknown>): Record<string, unknown> {
  const { from, to, ...rest } = fields;
  return {
    ...rest,
    ...(from === undefined ? {} : { submittedFrom: from }),
    ...(to === undefined ? {} : { submittedTo: to }),
  };
}

function seriesOf(bucketSeconds: number, rows: OverviewBucketRow[]): Series {
  const ms = (value: number | null): number | null => (value === null ? null : Math.round(value));
  return {
    bucketSeconds,
    buckets: rows.map((row) => ({
      at: new Date(row.at).toISOString(),
      waitP50Ms: ms(row.wait_p50),
      waitP95Ms: ms(row.wait_p95),
      runP50Ms: ms(row.run_p50),
      runP95Ms: ms(row.run_p95),
      started: row.started,
      finished: row.finished,
      succeeded: row.succeeded,
      failed: row.failed,
      queueDepth: row.queue_depth,
    })),
  };
}

function refusal(
  jobId: string,
  reason: 'queued' | 'running' | 'succeeded' | 'cancelled' | 'no-inputs',
): string {
  switch (reason) {
    case 'queued':
    case 'running':
      return `Job ${jobId} is ${reason.toUpperCase()}: only a failed job can be retried.`;
    case 'succeeded':
      return `Job ${jobId} succeeded: only a failed job can be retried.`;
    case 'cancelled':
      return `Job ${jobId} was cancelled: only a failed job can be retried; submit it again instead.`;
    case 'no-inputs':
      return `Job ${jobId} failed before its input files were kept for a retry: submit it again instead.`;
  }
}
