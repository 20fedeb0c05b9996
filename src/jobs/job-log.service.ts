import { Readable } from 'node:stream';
import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  MessageEvent,
  StreamableFile,
} from '@nestjs/common';
import { Observable, Subscriber } from 'rxjs';
import { ApiError } from '../common/api-error';
import { missing } from '../common/missing-resource';
import { ResultRepository } from '../results/result.repository';
import { JobLogRepository, LogLine, LogTail } from '../job-log/job-log.repository';
import { JobState } from '../queue/queue.types';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';

const PAGE = 500;

/** One line of the text/plain log: time, stream, text. */
export function plainLogLine(line: LogLine): string {
  return `${line.time.toISOString()} ${line.stream} ${line.line}\n`;
}

/**
 * Serves a job's log (docs/api.md): what is stored now as text/plain, or live as Server-Sent
 * Events. Lines reach the database from the worker in batches, so any API node can serve them.
 */
@Injectable()
export class JobLogService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(JobLogService.name);
  /** The open live streams, ended when the node stops. */
  private readonly streams = new Set<Subscriber<MessageEvent>>();

  constructor(
    private readonly logs: JobLogRepository,
    private readonly jobs: JobRecordsRepository,
    private readonly results: ResultRepository,
    private readonly notifier: QueueNotifier,
  ) {}

  /** How many live streams are open on this node. */
  get openStreams(): number {
    return this.streams.size;
  }

  /** What is stored now, one line each, read a page at a time as it is sent; 404 for no job. */
  async plain(applicationName: string, jobId: string): Promise<StreamableFile> {
    await this.existingJob(applicationName, jobId);
    const logs = this.logs;
    async function* pages(): AsyncGenerator<string> {
      for (let after = -1; ;) {
        const lines = await logs.read(applicationName, jobId, after, PAGE);
        if (lines.length > 0) {
          yield lines.map(plainLogLine).join('');
        }
        if (lines.length < PAGE) {
          return;
        }
        after = lines[lines.length - 1].seq;
      }
    }
    return new StreamableFile(Readable.from(pages()), { type: 'text/plain; charset=utf-8' });
  }

  /**
   * Follows the log: an event per line (`id` its number, `event: line`, data JSON with stream,
   * time and line; `event: progress` with fraction, message and time for a progress report),
   * from after `Last-Event-ID` when given, and an `end` event with the outcome once the job is
   * done and every line was sent. 400 for a bad Last-Event-ID and 404 for no job, before the
   * stream starts.
   *
   * The stream does not poll. It reads the job's state and new lines (one statement) when it
   * opens and then only when woken: by a notification that lines were appended to this job's
   * log (sent with each batch the worker stores, at most one per 250 ms per job) or that its
   * result was stored, from this node at once or from another over LISTEN; and when the LISTEN
   * connection is back (what was sent while it was down is lost), or, with no LISTEN connection
   * at all, every POLL_INTERVAL_MS (QueueNotifier.onListening). Wake-ups during a read are
   * coalesced into one more read. A quiet job costs its open streams no query.
   */
  async follow(
    applicationName: string,
    jobId: string,
    lastEventIdHeader: string | undefined,
  ): Promise<Observable<MessageEvent>> {
    const from = lastEventId(lastEventIdHeader);
    await this.existingJob(applicationName, jobId);
    return new Observable<MessageEvent>((subscriber) =>
      this.stream(applicationName, jobId, from, subscriber),
    );
  }

  /** Ends the open streams (without an end event: a client reconnects to another node). */
  beforeApplicationShutdown(): void {
    for (const subscriber of [...this.streams]) {
      subscriber.complete();
    }
  }

  /** Runs one live stream into `subscriber`; returns its teardown. */
  private stream(
    applicationName: string,
    jobId: string,
    from: number,
    subscriber: Subscriber<MessageEvent>,
  ): () => void {
    let after = from;
    let reading = false;
    let again = false;
    const readAll = async (): Promise<void> => {
      do {
        again = false;
        const tail = await this.logs.readTail(applicationName, jobId, after, PAGE);
        if (subscriber.closed) {
          return;
        }
        for (const line of tail?.lines ?? []) {
          subscriber.next(lineEvent(line));
          after = line.seq;
        }
        if (tail !== null && tail.lines.length === PAGE) {
          again = true; // a backlog: the next page at once
        } else if (tail === null || tail.state === JobState.DONE) {
          // One snapshot: every line of a finished job was among those read or before them.
          const end = await this.endEvent(applicationName, jobId, tail, after);
          subscriber.next(end);
          subscriber.complete();
          return;
        }
      } while (again && !subscriber.closed);
    };
    const wake = (): void => {
      if (subscriber.closed) {
        return;
      }
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      readAll()
        .catch((error: Error) => {
          // The client reconnects with the id of the last line it got, here or on another node.
          this.logger.warn(`the live log of job ${jobId} stopped: ${error.message}`);
          subscriber.complete();
        })
        .finally(() => (reading = false));
    };
    const forThisJob = (id: string): void => {
      if (id === jobId) {
        wake();
      }
    };
    const unsubscribe = [
      this.notifier.onLogAppended(forThisJob),
      this.notifier.onResultReady(forThisJob),
      this.notifier.onListening(wake),
    ];
    this.streams.add(subscriber);
    // The first read once the node LISTENs on the stream's channels (at once, unless the first
    // stream of the node has just added them), so that no append after it goes unheard.
    void this.notifier
      .listen()
      .catch(() => undefined)
      .finally(wake);
    return () => {
      unsubscribe.forEach((off) => off());
      this.streams.delete(subscriber);
    };
  }

  /** The outcome of a finished job (`tail` its last read; null: it is gone). */
  private async endEvent(
    applicationName: string,
    jobId: string,
    tail: LogTail | null,
    after: number,
  ): Promise<MessageEvent> {
    const result = tail ? await this.results.findMetadata(applicationName, jobId) : null;
    const outcome = result
      ? { success: result.success, type: result.type, cancelled: tail?.cancelled ?? false }
      : { deleted: true };
    // Its id repeats the last line's (an empty one: none was sent), so that a client that
    // reconnects after the end resumes where it was; without one, the event stream would number
    // the event itself.
    return { type: 'end', id: after < 0 ? '' : String(after), data: outcome };
  }

  private async existingJob(applicationName: string, jobId: string): Promise<void> {
    if (!(await this.jobs.findOne(applicationName, jobId))) {
      throw missing.job(applicationName, jobId);
    }
  }
}

/** One line as an event: `progress` for a svc_progress report, else `line`. */
function lineEvent(line: LogLine): MessageEvent {
  return line.stream === 'progress'
    ? {
        type: 'progress',
        id: String(line.seq),
        data: { ...(JSON.parse(line.line) as object), time: line.time },
      }
    : {
        type: 'line',
        id: String(line.seq),
        data: { stream: line.stream, time: line.time, line: line.line },
      };
}

function lastEventId(header: string | undefined): number {
  if (header === undefined) {
    return -1;
  }
  if (!/^\d{1,9}$/.test(header.trim())) {
    throw ApiError.badRequest('Last-Event-ID must be the id of an event of this stream.');
  }
  return Number(header);
}
