import { EventEmitter } from 'node:events';
import { Inject, Injectable, Logger, OnApplicationShutdown, Optional } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { DatabaseTarget } from '../storage/database-options';
import { ListenConnection } from '../storage/listen-connection';
import { DATABASE_TARGET } from '../storage/storage.module';
import { JOB_QUEUED_CHANNEL, JOB_STARTED_CHANNEL, RESULT_READY_CHANNEL } from './queue.repository';
import type { JobKind } from './queue.types';

/** How long a result stored here is remembered, so that its own NOTIFY echo is not reported twice. */
const LOCAL_ECHO_WINDOW_MS = 10_000;

/**
 * Three signals, each at once in this process and through LISTEN/NOTIFY from other nodes:
 * - a job was queued: wakes workers early;
 * - a job's result was stored: wakes whoever waits for it (onResultReady);
 * - jobs were started by a worker (onJobStarted).
 * All are hints: a notification sent while the LISTEN connection was down is never reported, so
 * whoever waits looks again when it is back (onListening); workers also poll (POLL_INTERVAL_MS).
 * With no LISTEN connection at all (DATABASE_URL goes through a transaction-mode pooler and no
 * DATABASE_LISTEN_URL is set) other nodes are not heard: onListening then fires every
 * POLL_INTERVAL_MS instead, so waiters look as often as workers poll.
 */
@Injectable()
export class QueueNotifier implements OnApplicationShutdown {
  private readonly logger = new Logger(QueueNotifier.name);
  // Any number of waiters may subscribe (one per waiting request, say).
  private readonly events = new EventEmitter().setMaxListeners(0);
  private readonly connection: ListenConnection | null;
  private polling = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly pollIntervalMs: number;
  /** Job id -> when its result was first reported (either way); in insertion (so time) order. */
  private readonly reportedHere = new Map<string, number>();

  constructor(
    @Inject(DATABASE_TARGET) private readonly target: DatabaseTarget,
    @Optional() config?: AppConfig,
  ) {
    this.pollIntervalMs = config?.pollIntervalMs ?? 1000;
    this.connection =
      target.kind === 'server' && target.listenUrl
        ? new ListenConnection(
            {
              url: target.listenUrl,
              applicationName: 'svc-listener',
              channels: [JOB_QUEUED_CHANNEL, RESULT_READY_CHANNEL, JOB_STARTED_CHANNEL],
              purpose: 'queue notifications',
            },
            {
              onNotification: (channel, payload) => this.onNotification(channel, payload),
              onListening: () => this.events.emit('listening'),
            },
            this.logger,
          )
        : null;
  }

  /** True while notifications from other nodes arrive (a LISTEN connection is up). */
  private get hearsOtherNodes(): boolean {
    return this.connection?.listening ?? false;
  }

  /** Called after a submission of a job of this kind commits in this process. */
  jobQueued(kind: JobKind): void {
    this.events.emit('queued', kind);
  }

  onQueued(callback: (kind: JobKind) => void): void {
    this.events.on('queued', callback);
  }

  /**
   * Called after this process stored a job's result (the statement that stored it also sent
   * the NOTIFY other nodes receive).
   */
  resultStored(jobId: string): void {
    if (this.hearsOtherNodes && !this.firstReport(jobId)) {
      return; // its own NOTIFY came back first and was reported already
    }
    this.events.emit('result-ready', jobId);
  }

  /**
   * Called after this process claimed jobs. With a LISTEN connection the claim's own NOTIFY
   * reports them (to this node too); without one (the embedded database, or the connection is
   * down) they are reported here.
   */
  jobsStarted(jobIds: string[]): void {
    if (!this.hearsOtherNodes) {
      for (const jobId of jobIds) {
        this.events.emit('job-started', jobId);
      }
    }
  }

  /** Calls `listener` with the id of each job a worker starts from now on. Returns unsubscribe. */
  onJobStarted(listener: (jobId: string) => void): () => void {
    return this.subscribe('job-started', listener);
  }

  /**
   * Calls `listener` each time the LISTEN connection is (re)established: notifications sent
   * while it was down are lost, so a waiter looks at the database again. Returns unsubscribe.
   */
  onListening(listener: () => void): () => void {
    return this.subscribe('listening', listener);
  }

  private subscribe(event: string, listener: (payload: string) => void): () => void {
    const guarded = (payload: string): void => {
      try {
        listener(payload);
      } catch (error) {
        this.logger.warn(`a ${event} listener failed: ${(error as Error).message}`);
      }
    };
    this.events.on(event, guarded);
    void this.listen();
    return () => {
      this.events.off(event, guarded);
    };
  }

  /**
   * With a LISTEN connection a result this node stored is seen twice, by resultStored and by its
   * own NOTIFY, in either order: true for the first of the two, false for the echo.
   */
  private firstReport(jobId: string): boolean {
    const now = Date.now();
    for (const [id, at] of this.reportedHere) {
      if (at > now - LOCAL_ECHO_WINDOW_MS) {
        break;
      }
      this.reportedHere.delete(id);
    }
    if (this.reportedHere.delete(jobId)) {
      return false;
    }
    this.reportedHere.set(jobId, now);
    return true;
  }

  /**
   * Calls `listener` with the id of each job whose result was stored from now on: by this node
   * at once, by another node when its NOTIFY arrives (a server database; the LISTEN connection
   * starts with the first subscriber). Returns the unsubscribe function. A hint, not a
   * guarantee: check the result table as well, and poll it while waiting.
   */
  onResultReady(listener: (jobId: string) => void): () => void {
    return this.subscribe('result-ready', listener);
  }

  /**
   * Starts listening for other nodes' notifications (a server database only: the embedded one
   * has no other nodes). Resolves after the first connection attempt.
   */
  async listen(): Promise<void> {
    if (this.target.kind !== 'server') {
      return;
    }
    if (this.connection) {
      return this.connection.start();
    }
    if (!this.polling) {
      this.polling = true;
      this.logger.log(
        `no LISTEN connection (DATABASE_POOLER=pgbouncer without DATABASE_LISTEN_URL): polling every ${this.pollIntervalMs} ms`,
      );
      this.pollTimer = setInterval(() => this.events.emit('listening'), this.pollIntervalMs);
      this.pollTimer.unref();
    }
  }

  private onNotification(channel: string, payload: string): void {
    if (channel === JOB_QUEUED_CHANNEL) {
      this.events.emit('queued', payload);
    } else if (channel === RESULT_READY_CHANNEL && this.firstReport(payload)) {
      this.events.emit('result-ready', payload);
    } else if (channel === JOB_STARTED_CHANNEL) {
      for (const jobId of payload.split(',')) {
        this.events.emit('job-started', jobId);
      }
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.polling = false;
    if (this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
    this.events.removeAllListeners();
    await this.connection?.stop();
  }
}
