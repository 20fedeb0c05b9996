import { BeforeApplicationShutdown, Injectable, Logger, MessageEvent } from '@nestjs/common';
import { EventSink, EventStream } from '../common/event-stream';
import { outsideRequests } from '../common/outside-requests';
import { JobAdminRepository } from '../queue/job-admin.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { R_JOB_KINDS } from '../queue/queue.types';

/** At most one batch of events per second: signals in between are coalesced into it. */
export const EVENT_COALESCE_MS = 1000;
/** A comment every 25 s keeps proxies from closing a quiet stream. */
export const EVENT_PING_MS = 25_000;
/** How far back a "job queued" signal (which names no job) looks for newly submitted jobs. */
const QUEUED_LOOKBACK_SECONDS = 5;

interface Listener {
  /** The applications it may see; null: every one. */
  applications: ReadonlySet<string> | null;
  sink: EventSink;
  /**
   * While its reader is behind: the applications to tell it of once it has caught up. At most
   * one entry per application, so a reader that does not read costs the node no more than that.
   */
  behind: Set<string> | null;
}

/**
 * The console's event stream (GET /admin/events): one listener per open stream, fed from the
 * queue's signals (a job queued, started, or ended: QueueNotifier, from this node at once and
 * from the others over LISTEN). The node gathers the signals for a second, looks up once which
 * applications' jobs they were about, and sends each stream a `jobs` event per application it
 * may see. A quiet queue costs nothing; a busy one one statement a second, whatever the streams.
 * A stream whose reader is behind gets no ping, and its events wait as the set of applications
 * they name, sent once it has caught up.
 */
@Injectable()
export class JobEventsService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(JobEventsService.name);
  private readonly listeners = new Set<Listener>();
  private readonly jobIds = new Set<string>();
  private queuedSeen = false;
  /** Applications this node knows changed without a signal (a retry made here). */
  private readonly touched = new Set<string>();
  private flushTimer: NodeJS.Timeout | null = null;
  private subscribed = false;

  constructor(
    private readonly notifier: QueueNotifier,
    private readonly jobs: JobAdminRepository,
  ) {}

  /** How many streams are open on this node. */
  get openStreams(): number {
    return this.listeners.size;
  }

  /** A stream of `jobs` events about `applications` (null: all), with a ping comment now and every 25 s. */
  follow(applications: readonly string[] | null): EventStream {
    this.subscribe();
    return new EventStream((sink) => {
      const listener: Listener = {
        applications: applications === null ? null : new Set(applications),
        sink,
        behind: null,
      };
      this.listeners.add(listener);
      // The first comment sends the stream's headers at once.
      this.send(listener, { comment: 'ping' });
      const ping = setInterval(() => {
        if (listener.behind === null) {
          this.send(listener, { comment: 'ping' });
        }
      }, EVENT_PING_MS);
      ping.unref();
      return () => {
        clearInterval(ping);
        this.listeners.delete(listener);
      };
    });
  }

  /** Tells the streams that jobs of `application` changed (a change this node made without a signal). */
  changed(application: string): void {
    this.touched.add(application);
    this.schedule();
  }

  beforeApplicationShutdown(): void {
    for (const listener of [...this.listeners]) {
      listener.sink.complete();
    }
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
  }

  private subscribe(): void {
    if (this.subscribed) {
      return;
    }
    this.subscribed = true;
    const job = (jobId: string): void => {
      this.jobIds.add(jobId);
      this.schedule();
    };
    this.notifier.onQueued((kind) => {
      if (R_JOB_KINDS.includes(kind)) {
        this.queuedSeen = true;
        this.schedule();
      }
    });
    this.notifier.onJobStarted(job);
    this.notifier.onResultReady(job);
    void this.notifier.listen().catch(() => undefined);
  }

  private schedule(): void {
    if (this.flushTimer !== null || this.listeners.size === 0) {
      if (this.listeners.size === 0) {
        this.forget();
      }
      return;
    }
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      outsideRequests(() => void this.flush());
    }, EVENT_COALESCE_MS);
    this.flushTimer.unref();
  }

  private forget(): void {
    this.jobIds.clear();
    this.touched.clear();
    this.queuedSeen = false;
  }

  private async flush(): Promise<void> {
    const jobIds = [...this.jobIds];
    const queuedSeen = this.queuedSeen;
    const applications = new Set(this.touched);
    this.forget();
    try {
      if (jobIds.length > 0 || queuedSeen) {
        for (const application of await this.jobs.applicationsTouched(
          jobIds,
          queuedSeen,
          QUEUED_LOOKBACK_SECONDS,
        )) {
          applications.add(application);
        }
      }
    } catch (error) {
      this.logger.warn(`the console's events could not be looked up: ${(error as Error).message}`);
    }
    for (const listener of this.listeners) {
      for (const application of [...applications].sort()) {
        if (listener.applications === null || listener.applications.has(application)) {
          this.tell(listener, application);
        }
      }
    }
  }

  private tell(listener: Listener, application: string): void {
    if (listener.behind !== null) {
      listener.behind.add(application);
      return;
    }
    this.send(listener, { type: 'jobs', data: { application } });
  }

  /** Sends `event`; when the reader is behind, waits for it before anything more is sent. */
  private send(listener: Listener, event: MessageEvent): void {
    if (listener.sink.next(event)) {
      return;
    }
    listener.behind = new Set();
    void listener.sink.ready().then(() => {
      const waiting = [...(listener.behind ?? [])].sort();
      listener.behind = null;
      for (const application of waiting) {
        this.tell(listener, application);
      }
    });
  }
}
