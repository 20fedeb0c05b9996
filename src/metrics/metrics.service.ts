import { Injectable, Logger } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The `application` label of every application the service does not know by name. */
export const OTHER_APPLICATION = 'other';

/** What a pool of warm R sessions reports about itself. */
export interface RSessionPoolStats {
  size: number;
  busy: number;
  idle: number;
  /** Calls waiting for a session. */
  waiting: number;
}

/**
 * This node's Prometheus metrics (SPEC §9). Counters count what happened on this node (a
 * submission on the API node that accepted it, a finished job on the worker that ran it), so
 * the cluster's totals are the sum over nodes; the queue depth is read from the database at
 * scrape time and is the same on every node.
 */
@Injectable()
export class MetricsService {
  private readonly logger = new Logger(MetricsService.name);
  readonly registry = new Registry();
  private rSessionPool: (() => RSessionPoolStats) | null = null;
  private rSandbox: (() => string) | null = null;
  private queueDepth: (() => Promise<number>) | null = null;
  private queueBacklog: (() => Promise<number>) | null = null;
  private applicationJobs:
    (() => Promise<Array<{ applicationName: string; state: string; jobs: number }>>) | null = null;
  /** Whether an application name may be a label value; until told, none may. */
  private knownApplication: (name: string) => boolean = () => false;

  private readonly submitted = new Counter({
    name: 'svc_jobs_submitted_total',
    help: 'Jobs accepted (stored and queued) by this node.',
    labelNames: ['application', 'source'] as const,
    registers: [this.registry],
  });
  private readonly rejected = new Counter({
    name: 'svc_submissions_rejected_total',
    help: 'Submissions this node refused at an application limit, by the limit (maxQueuedJobs, maxSubmissionsPerMinute, maxSubmissionsPerMinutePerPrincipal, maxJobSizeBytes, priority).',
    labelNames: ['application', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly wait = new Histogram({
    name: 'svc_job_wait_seconds',
    help: 'Time from submission to start (claim) of a job, on the worker that started it.',
    labelNames: ['application'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });
  private readonly finished = new Counter({
    name: 'svc_jobs_finished_total',
    help: 'Jobs this node finished with a stored result, successful or not.',
    labelNames: ['application', 'source'] as const,
    registers: [this.registry],
  });
  private readonly failed = new Counter({
    name: 'svc_jobs_failed_total',
    help: 'Jobs this node finished with an error result (R error, timeout, dead letter).',
    labelNames: ['application', 'source'] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'svc_job_duration_seconds',
    help: 'Time from claiming a job to storing its result, on the worker that ran it.',
    labelNames: ['application', 'source'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
    registers: [this.registry],
  });
  private readonly httpDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP requests by route pattern, method and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });
  private readonly httpChildren = new Map<
    string,
    Histogram.Internal<'method' | 'route' | 'status'>
  >();

  private readonly environmentBuilds = new Counter({
    name: 'svc_environment_builds_total',
    help: "Builds of applications' R environments on this node (a library made from the cache and from sources), by outcome (succeeded, failed).",
    labelNames: ['application', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly environmentPackages = new Counter({
    name: 'svc_environment_packages_total',
    help: 'Packages of those builds, by what the build did with each: built (R CMD INSTALL) or cached (taken from the cache).',
    labelNames: ['application', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly environmentBuildSeconds = new Histogram({
    name: 'svc_environment_build_seconds',
    help: "Time to make an environment's library on this node: with builds, or all from the cache (a restore).",
    labelNames: ['application', 'kind'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'svc_' });
    const logger = this.logger;
    const depth = () => this.queueDepth?.() ?? null;
    new Gauge({
      name: 'svc_queue_depth',
      help: 'Jobs waiting to run (state QUEUED), cluster-wide, read from the database at scrape time.',
      registers: [this.registry],
      async collect() {
        try {
          const value = await depth();
          if (value !== null) {
            this.set(value);
          }
        } catch (error) {
          // The database is down: leave the last value; health checks report the outage.
          logger.warn(`queue depth unavailable: ${(error as Error).message}`);
        }
      },
    });
    const backlog = () => this.queueBacklog?.() ?? null;
    new Gauge({
      name: 'svc_queue_backlog',
      help: 'Jobs queued plus running, cluster-wide, read from the database at scrape time: workers needed = ceil(backlog / SCRIPT_SLOTS).',
      registers: [this.registry],
      async collect() {
        try {
          const value = await backlog();
          if (value !== null) {
            this.set(value);
          }
        } catch (error) {
          logger.warn(`queue backlog unavailable: ${(error as Error).message}`);
        }
      },
    });
    const perApplication = () => this.applicationJobs?.() ?? null;
    const label = (name: string) => this.applicationLabel(name);
    new Gauge({
      name: 'svc_application_jobs',
      help: 'Jobs queued and running per application, cluster-wide, read from the database at scrape time (applications not configured: "other").',
      labelNames: ['application', 'state'] as const,
      registers: [this.registry],
      async collect() {
        try {
          const counts = await perApplication();
          if (counts === null) {
            return;
          }
          this.reset();
          const summed = new Map<string, number>();
          for (const { applicationName, state, jobs } of counts) {
            const key = `${label(applicationName)}\u0000${state}`;
            summed.set(key, (summed.get(key) ?? 0) + jobs);
          }
          for (const [key, jobs] of summed) {
            const [application, state] = key.split('\u0000');
            this.set({ application, state }, jobs);
          }
        } catch (error) {
          logger.warn(`jobs per application unavailable: ${(error as Error).message}`);
        }
      },
    });
    const sandbox = () => this.rSandbox?.() ?? null;
    new Gauge({
      name: 'svc_r_sandbox',
      help: 'The isolation R code runs under on this node (R_SANDBOX): 1 for the one in force (bwrap, none, webassembly).',
      labelNames: ['sandbox'] as const,
      registers: [this.registry],
      collect() {
        const kind = sandbox();
        this.reset();
        if (kind) {
          this.set({ sandbox: kind }, 1);
        }
      },
    });
    const pool = () => this.rSessionPool?.() ?? null;
    new Gauge({
      name: 'svc_r_sessions',
      help: 'Warm R sessions of this node by state (size = busy + idle; waiting: calls queued for a session).',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const stats = pool();
        this.reset();
        if (stats) {
          this.set({ state: 'size' }, stats.size);
          this.set({ state: 'busy' }, stats.busy);
          this.set({ state: 'idle' }, stats.idle);
          this.set({ state: 'waiting' }, stats.waiting);
        }
      },
    });
  }

  /** Where the queue depth gauge reads from (the queue, at scrape time). */
  observeQueueDepth(read: () => Promise<number>): void {
    this.queueDepth = read;
  }

  /** Where the per-application gauge reads its queued and running counts (at scrape time). */
  observeApplicationJobs(
    read: () => Promise<Array<{ applicationName: string; state: string; jobs: number }>>,
  ): void {
    this.applicationJobs = read;
  }

  /** Where the backlog gauge reads from (the queue's QUEUE_BACKLOG_SQL, at scrape time). */
  observeQueueBacklog(read: () => Promise<number>): void {
    this.queueBacklog = read;
  }

  /** Where the sandbox gauge reads which isolation R code runs under on this node. */
  observeRSandbox(sandbox: () => string): void {
    this.rSandbox = sandbox;
  }

  /** Where the R session pool gauge reads from (the function-call engine's `stats()`). */
  observeRSessionPool(stats: () => RSessionPoolStats): void {
    this.rSessionPool = stats;
  }

  /**
   * Which application names the `application` label takes as they are; any other name is
   * counted as `other`, so a client cannot grow the series by inventing names.
   */
  labelApplicationsBy(known: (name: string) => boolean): void {
    this.knownApplication = known;
  }

  private applicationLabel(name: string): string {
    return this.knownApplication(name) ? name : OTHER_APPLICATION;
  }

  jobSubmitted(name: string, source: string): void {
    this.submitted.inc({ application: this.applicationLabel(name), source });
  }

  jobStarted(name: string, waitedSeconds: number): void {
    this.wait.observe({ application: this.applicationLabel(name) }, Math.max(0, waitedSeconds));
  }

  submissionRejected(name: string, reason: string): void {
    this.rejected.inc({ application: this.applicationLabel(name), reason });
  }

  /** `seconds` is unknown for a dead letter (the job never ran). */
  jobFinished(name: string, source: string, success: boolean, seconds?: number): void {
    const application = this.applicationLabel(name);
    this.finished.inc({ application, source });
    if (!success) {
      this.failed.inc({ application, source });
    }
    if (seconds !== undefined) {
      this.duration.observe({ application, source }, seconds);
    }
  }

  /** One environment's library made (or failed) on this node; `packages` what it did with each. */
  environmentBuilt(
    name: string,
    succeeded: boolean,
    seconds: number,
    packages: Array<{ cached: boolean }>,
  ): void {
    const application = this.applicationLabel(name);
    this.environmentBuilds.inc({ application, outcome: succeeded ? 'succeeded' : 'failed' });
    const built = packages.filter((pkg) => !pkg.cached).length;
    this.environmentPackages.inc({ application, outcome: 'built' }, built);
    this.environmentPackages.inc({ application, outcome: 'cached' }, packages.length - built);
    if (succeeded) {
      this.environmentBuildSeconds.observe(
        { application, kind: built > 0 ? 'build' : 'restore' },
        seconds,
      );
    }
  }

  httpRequest(method: string, route: string, status: number, seconds: number): void {
    // One child per label set, looked up by a plain string: observe(labels, value) would hash
    // and check the label object on every request.
    const key = `${method} ${status} ${route}`;
    let child = this.httpChildren.get(key);
    if (!child) {
      child = this.httpDuration.labels({ method, route, status: String(status) });
      this.httpChildren.set(key, child);
    }
    child.observe(seconds);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  async render(): Promise<string> {
    return this.registry.metrics();
  }
}
