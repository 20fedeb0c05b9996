import { AuditService } from '../audit/audit.service';
import { rm } from 'node:fs/promises';
import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  Optional,
} from '@nestjs/common';
import { CallbackJobExecutor } from '../callbacks/callback-job.executor';
import { MailReplyJobExecutor } from '../mail-replies/mail-reply-job.executor';
import { isDatabaseUnavailable } from '../common/api-exception.filter';
import { backOffDelay } from '../common/back-off';
import { runWithLogContext } from '../common/log-context';
import { MetricsService } from '../metrics/metrics.service';
import { ApplicationsConfig, QueueConfig, WorkerConfig } from '../config/config-slices';
import { claimPoliciesOf, retentionByApplication } from '../config/application-settings';
import { errorResult } from '../job-core/job-result';
import { REngineUnavailableError } from '../r-engine/r-engine';
import { DirectStarts, HeldSlot, SlotHolder } from '../queue/direct-starts';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { QueueRepository } from '../queue/queue.repository';
import { NodeIdentity } from '../storage/node-identity';
import {
  ClaimedJob,
  DeliveryJobExecutor,
  JOB_EXECUTOR,
  JobExecutor,
  JobKind,
  R_JOB_KINDS,
  ResultData,
} from '../queue/queue.types';
import { inSpan, recordSpan, SpanNotes, tracingEnabled } from '../tracing/tracing';
import { outsideRequests } from '../common/outside-requests';

/**
 * While the database is unreachable, a finished job's result is offered again after at most
 * this long, backing off (backOffDelay)...
 */
const STORE_RETRY_MS = 1000;
/** ...up to this long between two offers... */
const STORE_RETRY_MAX_MS = 10_000;
/** ...for at least this long (and two leases when they are longer), unless the node stops. */
const STORE_RETRY_MIN_MS = 60_000;

/** A group of slots: the general one takes any application's jobs, a dedicated one only its own. */
interface SlotPool {
  /** For the log: scripts, function calls, or the application's name. */
  name: string;
  applicationName: string | null;
  /** The kinds of job it takes; null: any. */
  kinds: readonly JobKind[] | null;
  size: number;
  running: Set<string>;
  /** A delivery kind's slots: the executor that claims and runs its jobs. */
  delivery?: DeliveryJobExecutor;
  /**
   * Whether jobs of its kinds may be queued that it did not take: its last claim got all it
   * asked for, or a job of its kinds was queued while it was full. When a job of an R pool ends,
   * its slot claims again only then; else the claim would find nothing (one statement per job).
   */
  backlog?: boolean;
}

interface RunningJob {
  job: ClaimedJob;
  abort: AbortController;
  done: Promise<void>;
  /** Set once R has finished and the worker stores the result: a notification now is its own. */
  storing: boolean;
}

/** The abort reason of a job whose result was stored elsewhere (a cancel) while it ran here. */
export class JobEndedElsewhere extends Error {
  constructor(jobId: string) {
    super(`job ${jobId} ended elsewhere (cancelled) while it ran here`);
    this.name = 'JobEndedElsewhere';
  }
}

/**
 * Runs jobs on this node: claims as many as it has free slots, heartbeats their leases, stores
 * their results, and retries infrastructure failures with exponential back-off. A supervisor
 * pass on every node (serialised by an advisory lock) recovers jobs of dead workers. Delivery
 * jobs (a finished job's callback, an e-mail reply) have slots of their own per kind, claimed by
 * a statement of their own, and are run by their executor (CallbackJobExecutor,
 * MailReplyJobExecutor): they never take an R slot.
 */
@Injectable()
export class WorkerService implements OnApplicationBootstrap, OnApplicationShutdown, SlotHolder {
  private readonly logger = new Logger(WorkerService.name);
  /** The lease owner: this node's id. */
  readonly owner: string;
  private readonly pools: SlotPool[];
  /** Pools claimed for by one statement: the script and function-call slots, each application's alone. */
  private readonly claimGroups: SlotPool[][];
  private readonly running = new Map<string, RunningJob>();
  private stopping = false;
  private filling = false;
  private refillRequested = false;
  /** Kinds that queued notifications announced since the last claim round; all after a poll; a full pool's own after its claim. */
  private wanted: Set<JobKind> | 'all' = 'all';
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly config: WorkerConfig,
    private readonly queueConfig: QueueConfig,
    private readonly applications: ApplicationsConfig,
    private readonly queue: QueueRepository,
    private readonly notifier: QueueNotifier,
    @Inject(JOB_EXECUTOR) private readonly executor: JobExecutor,
    node: NodeIdentity,
    @Optional() private readonly metrics?: MetricsService,
    @Optional() private readonly audit?: AuditService,
    @Optional() callbacks?: CallbackJobExecutor,
    @Optional() mailReplies?: MailReplyJobExecutor,
    @Optional() private readonly directStarts?: DirectStarts,
  ) {
    this.owner = node.id;
    this.pools = [
      // Claiming more than the engine can run would hold jobs other nodes could be running.
      {
        name: 'scripts',
        applicationName: null,
        kinds: [JobKind.SCRIPT],
        size: Math.min(config.scriptSlots, executor.capacity ?? Infinity),
        running: new Set(),
      },
      // Function calls have slots of their own: a flood of long scripts does not hold them up.
      {
        name: 'function calls',
        applicationName: null,
        kinds: [JobKind.XML, JobKind.JSON],
        size: config.functionSlots,
        running: new Set(),
      },
      ...Object.entries(config.applicationSlots).map(([applicationName, size]) => ({
        name: applicationName,
        applicationName,
        kinds: null,
        size,
        running: new Set<string>(),
      })),
    ];
    this.claimGroups = [this.pools.slice(0, 2), ...this.pools.slice(2).map((pool) => [pool])];
    // Each delivery kind this node can run (a mail reply needs SMTP_URL) has slots of its own.
    for (const [name, delivery] of [
      ['callbacks', callbacks],
      ['mail replies', mailReplies],
    ] as const) {
      if (delivery && delivery.capacity > 0) {
        const pool: SlotPool = {
          name,
          applicationName: null,
          kinds: [delivery.kind],
          size: delivery.capacity,
          running: new Set(),
          delivery,
        };
        this.pools.push(pool);
        this.claimGroups.push([pool]);
      }
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    // A queued job's kind: slots that cannot take it need not look (two statements per wake otherwise).
    this.notifier.onQueued((kind) => this.wake(kind));
    // A result stored for a job running here was stored by a cancel: stop R at once. The
    // heartbeat is the fallback when the notification is lost (the job is no longer RUNNING).
    this.notifier.onResultReady((jobId) => this.stopEndedElsewhere(jobId));
    // A result stored with a callback queued its callback job.
    this.notifier.onCallbackQueued(() => this.wake(JobKind.CALLBACK));
    await this.notifier.listen();
    this.timers.push(setInterval(() => this.wake(), this.queueConfig.pollIntervalMs));
    this.timers.push(
      setInterval(() => void this.heartbeat(), this.queueConfig.heartbeatSeconds * 1000),
    );
    this.timers.push(
      setInterval(
        () => void this.supervise(),
        Math.max(1000, (this.queueConfig.leaseSeconds * 1000) / 2),
      ),
    );
    for (const timer of this.timers) {
      timer.unref();
    }
    this.logger.log(
      `worker ${this.owner} started with ${this.pools.map((p) => `${p.name}:${p.size}`).join(', ')} slots`,
    );
    await this.supervise();
    this.directStarts?.offer(this);
    this.wake();
  }

  /** Whether an application has maxRunningJobs, so that a job's end may let another of it start. */
  private anyCapped(): boolean {
    return claimPoliciesOf(this.applications).maxRunning.some((cap) => cap !== null);
  }

  /**
   * A free slot of a general pool for a job the intake is storing (DirectStarts): held (counted
   * as running) until the job's statement tells whether it started. None while stopping, for a
   * kind no general pool takes, or for an application with maxRunningJobs (whose claims are
   * serialised across nodes by the capped claims' lock).
   */
  hold(jobId: string, applicationName: string, kind: JobKind): HeldSlot | null {
    if (this.stopping) {
      return null;
    }
    const policies = claimPoliciesOf(this.applications);
    const policy = policies.applications.indexOf(applicationName);
    if (policy >= 0 && policies.maxRunning[policy] !== null) {
      return null;
    }
    const pool = this.pools.find(
      (p) =>
        p.applicationName === null &&
        p.delivery === undefined &&
        p.kinds?.includes(kind) === true &&
        p.running.size < p.size,
    );
    if (!pool?.kinds) {
      return null;
    }
    pool.running.add(jobId);
    let settled = false;
    return {
      owner: this.owner,
      leaseSeconds: this.queueConfig.leaseSeconds,
      kinds: pool.kinds,
      start: (job) => {
        if (!settled) {
          settled = true;
          // Started by a submitting request: the run is not that request's (as a woken claim's).
          outsideRequests(() => this.start(job, pool, Date.now()));
          this.notifier.jobsStarted([job.id]);
        }
      },
      release: () => {
        if (!settled) {
          settled = true;
          pool.running.delete(jobId);
        }
      },
    };
  }

  /** Asks for a claim round now; rounds never overlap, a request during one triggers another. */
  wake(kind?: JobKind | readonly JobKind[]): void {
    if (this.stopping) {
      return;
    }
    this.want(kind);
    if (this.filling) {
      this.refillRequested = true;
      return;
    }
    // Woken by a submitting request: the claims and runs are not that request's.
    outsideRequests(() => void this.fill());
  }

  /** Adds kinds to those the next claim round looks for; undefined: every kind. */
  private want(kind?: JobKind | readonly JobKind[]): void {
    if (kind === undefined) {
      this.wanted = 'all';
    } else if (this.wanted !== 'all') {
      for (const each of typeof kind === 'string' ? [kind] : kind) {
        this.wanted.add(each);
      }
    }
  }

  private stopEndedElsewhere(jobId: string): void {
    const running = this.running.get(jobId);
    if (running && !running.storing && !running.abort.signal.aborted) {
      this.logger.log(`job ${jobId}: cancelled, stopping it`);
      running.abort.abort(new JobEndedElsewhere(jobId));
    }
  }

  get runningJobIds(): string[] {
    return [...this.running.keys()];
  }

  /** The node's R slots (delivery slots left out) and how many of them run a job now. */
  get rSlots(): { slots: number; busy: number } {
    const pools = this.pools.filter((pool) => pool.delivery === undefined);
    return {
      slots: pools.reduce((sum, pool) => sum + pool.size, 0),
      busy: pools.reduce((sum, pool) => sum + pool.running.size, 0),
    };
  }

  private async fill(): Promise<void> {
    this.filling = true;
    try {
      do {
        this.refillRequested = false;
        const wanted = this.wanted;
        this.wanted = new Set();
        const takes = (pool: SlotPool): boolean =>
          wanted === 'all' || pool.kinds === null || pool.kinds.some((kind) => wanted.has(kind));
        for (const group of this.claimGroups) {
          for (const pool of group) {
            if (takes(pool) && pool.running.size >= pool.size) {
              pool.backlog = true; // a job of its kinds waits for one of its slots
            }
          }
          const open = group.filter((pool) => pool.size - pool.running.size > 0 && takes(pool));
          if (open.length === 0 || this.stopping) {
            continue;
          }
          const [first, second] = open;
          const free = (pool: SlotPool): number => pool.size - pool.running.size;
          // What each pool asks for, before the claim's await (a job may end or start meanwhile).
          const asked = new Map(open.map((pool) => [pool, free(pool)]));
          const claimedAt = Date.now();
          const jobs = first.delivery
            ? await first.delivery.claim(this.owner, free(first), this.queueConfig.leaseSeconds)
            : await this.queue.claim(
                this.owner,
                free(first),
                this.queueConfig.leaseSeconds,
                first.applicationName,
                first.kinds,
                second?.kinds ? { kinds: second.kinds, limit: free(second) } : null,
                claimPoliciesOf(this.applications),
              );
          const claimed = new Map<SlotPool, number>();
          for (const job of jobs) {
            const pool = open.find((p) => p.kinds === null || p.kinds.includes(job.kind)) ?? first;
            claimed.set(pool, (claimed.get(pool) ?? 0) + 1);
            this.start(job, pool, claimedAt);
          }
          if (jobs.length > 0 && !first.delivery) {
            this.notifier.jobsStarted(jobs.map((job) => job.id));
          }
          // A pool that got all it asked for may find more of its kinds; the other pools need
          // not look again (a delivery pool's claim per R job otherwise).
          for (const pool of open) {
            pool.backlog = (claimed.get(pool) ?? 0) >= (asked.get(pool) ?? 0);
            if ((claimed.get(pool) ?? 0) > 0 && free(pool) === 0) {
              this.refillRequested = true;
              this.want(pool.kinds ?? undefined);
            }
          }
        }
      } while (
        this.refillRequested &&
        !this.stopping &&
        this.pools.some((p) => p.running.size < p.size)
      );
    } catch (error) {
      this.logger.warn(`claiming jobs failed: ${(error as Error).message}`);
    } finally {
      this.filling = false;
    }
  }

  private start(job: ClaimedJob, pool: SlotPool, claimedAt: number): void {
    if (pool.delivery) {
      this.startDelivery(job, pool, pool.delivery);
      return;
    }
    pool.running.add(job.id);
    this.metrics?.jobStarted(job.applicationName, (claimedAt - job.submittedAt.getTime()) / 1000);
    const abort = new AbortController();
    // Every log line of the job, the R engine's included, carries its id.
    const done = runWithLogContext({ jobId: job.id }, () =>
      tracingEnabled() ? this.traced(job, claimedAt, abort.signal) : this.run(job, abort.signal),
    ).finally(() => {
      pool.running.delete(job.id);
      this.running.delete(job.id);
      // An R slot is free: claim R jobs, not deliveries (their own slots did not change), if any
      // may wait. A capped application's queued job may wait for this very job's end.
      if (pool.backlog !== false || this.anyCapped()) {
        this.wake(R_JOB_KINDS);
      }
    });
    this.running.set(job.id, { job, abort, done, storing: false });
  }

  /**
   * A delivery job's attempt, by its kind's executor (which records its outcome; a callback's
   * makes its span); a retry it schedules wakes the kind's slots then (polling is the fallback).
   */
  private startDelivery(job: ClaimedJob, pool: SlotPool, delivery: DeliveryJobExecutor): void {
    pool.running.add(job.id);
    const abort = new AbortController();
    // Its log lines carry the id of the job it delivers for.
    const jobId = job.callback?.jobId ?? job.mailReply?.jobId ?? job.id;
    const done = runWithLogContext({ jobId }, async () => {
      const retryAt = await delivery.deliver(job, this.owner, abort.signal);
      if (retryAt !== null) {
        setTimeout(
          () => this.wake(delivery.kind),
          Math.max(0, retryAt.getTime() - Date.now()) + 5,
        ).unref();
      }
    })
      .catch((error: unknown) =>
        this.logger.warn(`job ${jobId}: ${pool.name} attempt failed: ${(error as Error).message}`),
      )
      .finally(() => {
        pool.running.delete(job.id);
        this.running.delete(job.id);
        this.wake(delivery.kind);
      });
    this.running.set(job.id, { job, abort, done, storing: false });
  }

  /**
   * The job's run as a span of the trace it was submitted in (a new trace when it has none),
   * with its claim (one statement for several jobs: a span of each job's, from when the claim
   * began) and, below, its steps: the executor's, the result's storing.
   */
  private traced(job: ClaimedJob, claimedAt: number, signal: AbortSignal): Promise<void> {
    const attributes = {
      'svc.job.id': job.id,
      'svc.application': job.applicationName,
      'svc.job.kind': job.kind,
      'svc.job.attempt': job.attempts,
    };
    return inSpan(
      'svc.job.run',
      { parent: job.trace, attributes, startTime: claimedAt },
      async (span) => {
        recordSpan('svc.job.claim', { attributes: { 'svc.job.id': job.id }, startTime: claimedAt });
        await this.run(job, signal, span);
      },
    );
  }

  private async run(job: ClaimedJob, signal: AbortSignal, span?: SpanNotes): Promise<void> {
    const log = new Logger(`job ${job.id}`);
    log.log(`attempt ${job.attempts} started (${job.applicationName}, ${job.kind})`);
    const started = process.hrtime.bigint();
    let result: ResultData;
    try {
      result = await this.executor.execute(job, signal);
    } catch (error) {
      if (signal.aborted) {
        return; // lease lost or shutting down: the job is someone else's now
      }
      if (!(error instanceof REngineUnavailableError)) {
        // A bug or a storage failure: treat it like an unavailable engine, so the job is retried, not lost.
        log.error(`failed unexpectedly: ${(error as Error).stack ?? String(error)}`);
      }
      await this.handleInfrastructureFailure(job, (error as Error).message, log);
      return;
    }
    try {
      if (signal.aborted) {
        return;
      }
      const entry = this.running.get(job.id);
      if (entry) {
        entry.storing = true;
      }
      if (!result.success && job.hasJobWait === true && (await this.rerunFailed(job, log))) {
        return;
      }
      const stored = await this.storeResult(job, result, log);
      span?.set({ 'svc.result.success': result.success, 'svc.result.stored': stored });
      if (!result.success) {
        span?.fail('the job ended with an error result');
      }
      if (stored) {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        this.metrics?.jobFinished(job.applicationName, job.source, result.success, seconds);
        log.log(
          `done (success=${result.success}, ${result.type}, ${result.dataFile?.size ?? result.data.length} bytes)`,
        );
      } else {
        log.warn(
          `attempt ${job.attempts} finished after losing its lease (it expired, or the job was cancelled or ran elsewhere): the late result was rejected and discarded`,
        );
      }
    } catch (error) {
      // The database stayed unreachable: the lease expires and the job runs again.
      log.error(`could not store the result: ${(error as Error).message}`);
    } finally {
      if (result.dataFile) {
        // A large result's file (see ScriptJobExecutor): stored, discarded, or to be made again.
        await rm(result.dataFile.path, { force: true }).catch(() => undefined);
      }
    }
  }

  /**
   * Stores a finished job's result; while the database is unreachable, tries again after a wait
   * that backs off from a second to ten (a short outage does not cost the run). Once it answers, the result is stored if this worker
   * still holds the lease, else rejected: another worker has run, or is running, the job.
   */
  private storeResult(job: ClaimedJob, result: ResultData, log: Logger): Promise<boolean> {
    return tracingEnabled()
      ? inSpan(
          'svc.job.store_result',
          {
            attributes: {
              'svc.job.id': job.id,
              'svc.result.bytes': result.dataFile?.size ?? result.data.length,
            },
          },
          () => this.storeResultNow(job, result, log),
        )
      : this.storeResultNow(job, result, log);
  }

  private async storeResultNow(job: ClaimedJob, result: ResultData, log: Logger): Promise<boolean> {
    const giveUpAt =
      Date.now() + Math.max(STORE_RETRY_MIN_MS, 2 * this.queueConfig.leaseSeconds * 1000);
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.complete(job.id, this.owner, result, job.hasCallback);
      } catch (error) {
        if (!isDatabaseUnavailable(error) || this.stopping || Date.now() >= giveUpAt) {
          throw error;
        }
        if (attempt === 1) {
          log.warn(
            `could not store the result, the database is unreachable (${(error as Error).message}); retrying, backing off from ${STORE_RETRY_MS} ms`,
          );
        }
        const delay = backOffDelay(attempt, STORE_RETRY_MS, STORE_RETRY_MAX_MS);
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Stores the result (when `owner` still holds the lease) and tells this node's waiters, and its
   * callback delivery when the job may have a callback (other nodes hear it from the statement).
   */
  private async complete(
    jobId: string,
    owner: string,
    result: ResultData,
    mayHaveCallback: boolean,
  ): Promise<boolean> {
    const stored = await this.queue.complete(jobId, owner, result);
    if (stored) {
      this.notifier.resultStored(jobId);
      if (mayHaveCallback) {
        this.notifier.callbackQueued(jobId);
      }
    }
    return stored;
  }

  /**
   * A flow's step whose run failed and that has reruns left runs again after a back-off from
   * RETRY_BACKOFF_MS (as an infrastructure failure's retry does); false: its failure is its result.
   */
  private async rerunFailed(job: ClaimedJob, log: Logger): Promise<boolean> {
    const delay = backOffDelay(
      job.attempts,
      this.queueConfig.retryBackoffMs,
      Number.POSITIVE_INFINITY,
    );
    if (!(await this.queue.rerunFailed(job.id, this.owner, delay))) {
      return false;
    }
    log.warn(`attempt ${job.attempts} failed; the step runs again in ${delay} ms`);
    setTimeout(() => this.wake(), delay + 5).unref();
    return true;
  }

  private async handleInfrastructureFailure(
    job: ClaimedJob,
    message: string,
    log: Logger,
  ): Promise<void> {
    try {
      if (job.attempts >= this.queueConfig.maxAttempts) {
        log.error(
          `attempt ${job.attempts} of ${this.queueConfig.maxAttempts} could not run: ${message}; giving up`,
        );
        if (await this.complete(job.id, this.owner, deadLetter(job, message), job.hasCallback)) {
          this.metrics?.jobFinished(job.applicationName, job.source, false);
        }
      } else {
        // RETRY_BACKOFF_MS has no cap of its own: MAX_ATTEMPTS bounds the doubling.
        const delay = backOffDelay(
          job.attempts,
          this.queueConfig.retryBackoffMs,
          Number.POSITIVE_INFINITY,
        );
        log.warn(`attempt ${job.attempts} could not run (${message}); retrying in ${delay} ms`);
        await this.queue.retryLater(job.id, this.owner, message, delay);
        setTimeout(() => this.wake(), delay + 5).unref();
      }
    } catch (error) {
      log.error(`could not record the failure: ${(error as Error).message}`);
    }
  }

  private async heartbeat(): Promise<void> {
    const ids = this.runningJobIds;
    if (ids.length === 0) {
      return;
    }
    try {
      const held = new Set(
        await this.queue.heartbeat(this.owner, ids, this.queueConfig.leaseSeconds),
      );
      for (const id of ids) {
        const entry = this.running.get(id);
        // A job that finished while the statement ran (DONE, or its result being stored, which
        // checks the lease itself) is no longer renewed: that is not a lost lease.
        if (!held.has(id) && entry !== undefined && !entry.storing) {
          this.logger.warn(`job ${id}: lease lost, stopping it`);
          entry.abort.abort();
        }
      }
    } catch (error) {
      this.logger.warn(`heartbeat failed: ${(error as Error).message}`);
    }
  }

  private async supervise(): Promise<void> {
    try {
      // A job whose node stopped responding waits one more lease before it runs again: the
      // time the cluster already takes to call a node gone, now given to a restarted node to
      // take other work before the job (perhaps what froze it) can reach it again.
      const lostRunDelaySeconds = this.queueConfig.leaseSeconds;
      // A job out of attempts gets its dead-letter result in the same transaction.
      const { requeued, exhausted } = await this.queue.recoverExpiredLeases(
        this.queueConfig.maxAttempts,
        lostRunDelaySeconds,
        (job) => deadLetter(job, job.lastError ?? 'unknown failure'),
      );
      if (requeued > 0) {
        this.logger.warn(
          `re-queued ${requeued} job(s) whose worker stopped responding, to run in ${lostRunDelaySeconds} s at the earliest`,
        );
        setTimeout(() => this.wake(), lostRunDelaySeconds * 1000 + 5).unref();
      }
      for (const job of exhausted) {
        this.notifier.resultStored(job.id);
        // Whether it has a callback is not known here: the delivery looks (rare).
        this.notifier.callbackQueued(job.id);
        this.logger.error(
          `job ${job.id}: dead-letter result stored (${job.lastError ?? 'unknown failure'})`,
        );
      }
      const byApplication = retentionByApplication(this.applications);
      // Nothing expires when every period is 0 (keep until deleted): no statement then.
      if ([this.config.resultRetentionHours, ...Object.values(byApplication)].some((h) => h > 0)) {
        await this.queue.deleteExpiredResults(this.config.resultRetentionHours, byApplication);
      }
      if (this.config.usageRetentionDays > 0) {
        await this.queue.deleteExpiredUsage(this.config.usageRetentionDays);
      }
      if (this.config.auditRetentionDays > 0) {
        await this.audit?.deleteExpired(this.config.auditRetentionDays);
      }
    } catch (error) {
      this.logger.warn(`supervisor pass failed: ${(error as Error).message}`);
    }
  }

  /** Stops claiming, lets running jobs finish for the grace period, then hands the rest back. */
  async onApplicationShutdown(): Promise<void> {
    this.directStarts?.withdraw(this);
    this.stopping = true;
    for (const timer of this.timers) {
      clearInterval(timer);
    }
    const pending = [...this.running.values()];
    if (pending.length === 0) {
      return;
    }
    this.logger.log(
      `waiting up to ${this.config.shutdownGraceSeconds} s for ${pending.length} running job(s)`,
    );
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.config.shutdownGraceSeconds * 1000);
    });
    await Promise.race([Promise.all(pending.map((r) => r.done)), graceOver]);
    clearTimeout(timer);
    const unfinished = this.runningJobIds;
    for (const id of unfinished) {
      this.running.get(id)?.abort.abort();
    }
    if (unfinished.length > 0) {
      const released = await this.queue.release(this.owner, unfinished).catch(() => 0);
      this.logger.log(`handed ${released} unfinished job(s) back to the queue`);
    }
  }
}

function deadLetter(
  job: { id: string; applicationName: string; submittedAt: Date; attempts: number },
  reason: string,
): ResultData {
  return errorResult(
    job,
    `The job could not be delivered to R after ${job.attempts} attempt(s): ${reason}`,
  );
}
