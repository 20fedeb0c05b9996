import { Injectable, Logger, OnApplicationShutdown, Optional } from '@nestjs/common';
import { QueueConfig } from '../config/config-slices';
import { DatabaseEvents } from '../storage/database-events.service';
import {
  CALLBACK_QUEUED_CHANNEL,
  JOB_LOG_CHANNEL,
  JOB_QUEUED_CHANNEL,
  JOB_STARTED_CHANNEL,
  RESULT_READY_CHANNEL,
} from './queue-channels';
import type { JobKind } from './queue.types';

/**
 * The queue's five signals on the node's DatabaseEvents, each at once in this process and
 * through LISTEN/NOTIFY from other nodes:
 * - a job was queued: wakes workers early;
 * - a job's result was stored: wakes whoever waits for it (onResultReady);
 * - jobs were started by a worker (onJobStarted);
 * - a job's callback was queued with its result (onCallbackQueued): wakes the workers' callback slots; sent
 *   only for jobs that have a callback;
 * - lines were appended to a job's log (onLogAppended): wakes the live streams of the log; at
 *   most one per job per batch of lines (JobLogRepository.append, src/job-log/).
 * The statements of QueueRepository and of the job log send the NOTIFY (with this node's prefix,
 * so this node ignores the echo); the methods below deliver in-process once the statement
 * committed.
 * All are hints: a notification sent while the LISTEN connection was down is never reported, so
 * whoever waits looks again when it is back (onListening); workers also poll (POLL_INTERVAL_MS).
 * When other nodes are not heard at all (DATABASE_URL goes through a transaction-mode pooler and
 * no DATABASE_LISTEN_URL is set) onListening fires every POLL_INTERVAL_MS instead, so waiters
 * look as often as workers poll.
 */
@Injectable()
export class QueueNotifier implements OnApplicationShutdown {
  private readonly logger = new Logger(QueueNotifier.name);
  private readonly pollListeners = new Set<() => void>();
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly pollIntervalMs: number;

  constructor(
    private readonly events: DatabaseEvents,
    @Optional() config?: QueueConfig,
  ) {
    this.pollIntervalMs = config?.pollIntervalMs ?? 1000;
  }

  /** What this node's statements put before the payloads they notify (DatabaseEvents.prefix). */
  get sender(): string {
    return this.events.prefix;
  }

  /** Called after a submission of a job of this kind commits in this process. */
  jobQueued(kind: JobKind): void {
    this.events.deliverHere(JOB_QUEUED_CHANNEL, kind);
  }

  onQueued(callback: (kind: JobKind) => void): void {
    this.events.subscribe(JOB_QUEUED_CHANNEL, (kind) => callback(kind as JobKind));
  }

  /** Called after this process stored a job's result (the statement sent the NOTIFY). */
  resultStored(jobId: string): void {
    this.events.deliverHere(RESULT_READY_CHANNEL, jobId);
  }

  /** Called after this process stored the result of a job with a callback (the statement sent the NOTIFY). */
  callbackQueued(jobId: string): void {
    this.events.deliverHere(CALLBACK_QUEUED_CHANNEL, jobId);
  }

  /** Calls `listener` with the id of each job whose callback is queued from now on. Returns unsubscribe. */
  onCallbackQueued(listener: (jobId: string) => void): () => void {
    return this.events.subscribe(CALLBACK_QUEUED_CHANNEL, listener);
  }

  /** Called after this process claimed jobs (the claim sent the NOTIFY). */
  jobsStarted(jobIds: string[]): void {
    this.events.deliverHere(JOB_STARTED_CHANNEL, jobIds.join(','));
  }

  /** Calls `listener` with the id of each job a worker starts from now on. Returns unsubscribe. */
  onJobStarted(listener: (jobId: string) => void): () => void {
    return this.events.subscribe(JOB_STARTED_CHANNEL, (jobIds) =>
      jobIds.split(',').forEach(listener),
    );
  }

  /** Called after this process appended lines to a job's log (the statement sent the NOTIFY). */
  logAppended(jobId: string): void {
    this.events.deliverHere(JOB_LOG_CHANNEL, jobId);
  }

  /**
   * Calls `listener` with the id of each job whose log grows from now on: by this node at once,
   * by another node when its NOTIFY arrives. Returns unsubscribe. A hint, like the others.
   */
  onLogAppended(listener: (jobId: string) => void): () => void {
    return this.events.subscribe(JOB_LOG_CHANNEL, listener);
  }

  /**
   * Calls `listener` with the id of each job whose result was stored from now on: by this node
   * at once, by another node when its NOTIFY arrives. Returns the unsubscribe function. A hint,
   * not a guarantee: check the result table as well, and poll it while waiting.
   */
  onResultReady(listener: (jobId: string) => void): () => void {
    return this.events.subscribe(RESULT_READY_CHANNEL, listener);
  }

  /**
   * Calls `listener` each time the LISTEN connection is (re)established (notifications sent
   * while it was down are lost, so a waiter looks at the database again), or every
   * POLL_INTERVAL_MS when other nodes are not heard. Returns unsubscribe.
   */
  onListening(listener: () => void): () => void {
    if (this.events.otherNodes !== 'unheard') {
      return this.events.onListening(listener);
    }
    const entry = (): void => listener();
    this.pollListeners.add(entry);
    this.startPolling();
    return () => {
      this.pollListeners.delete(entry);
    };
  }

  /** Starts listening for other nodes' notifications; resolves after the first attempt. */
  async listen(): Promise<void> {
    if (this.events.otherNodes === 'unheard') {
      this.startPolling();
    }
    await this.events.listen();
  }

  private startPolling(): void {
    if (this.pollTimer) {
      return;
    }
    this.logger.log(
      `no LISTEN connection (DATABASE_POOLER=pgbouncer without DATABASE_LISTEN_URL): polling every ${this.pollIntervalMs} ms`,
    );
    this.pollTimer = setInterval(() => {
      for (const listener of [...this.pollListeners]) {
        try {
          listener();
        } catch (error) {
          this.logger.warn(`a listening listener failed: ${(error as Error).message}`);
        }
      }
    }, this.pollIntervalMs);
    this.pollTimer.unref();
  }

  onApplicationShutdown(): void {
    if (this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
    this.pollListeners.clear();
  }
}
