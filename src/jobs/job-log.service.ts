import { Readable } from 'node:stream';
import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  MessageEvent,
  StreamableFile,
} from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { EventSink, EventStream } from '../common/event-stream';
import { missing } from '../common/missing-resource';
import { ResultRepository } from '../results/result.repository';
import { JobLogRepository, LogLine, LogTail } from '../job-log/job-log.repository';
import { JobState } from '../queue/queue.types';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';

/** A read of the log takes at most this many lines, and at most PAGE_BYTES of text and one line. */
const PAGE = 500;
/** What one reader of the log holds of it at a time, a line aside (docs/security.md). */
export const PAGE_BYTES = 256 * 1024;

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
  private readonly streams = new Set<EventSink>();

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
        const lines = await logs.read(applicationName, jobId, after, PAGE, PAGE_BYTES);
        if (lines.length > 0) {
          yield lines.map(plainLogLine).join('');
        }
        if (!fullPage(lines)) {
          return;
        }
        after = lines[lines.length - 1].seq;
      }
    }
    // One page read ahead at most: a reader that does not read holds no more than that.
    return new StreamableFile(Readable.from(pages(), { highWaterMark: 1 }), {
      type: 'text/plain; charset=utf-8',
    });
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
   *
   * The stream waits for its reader: a read takes at most PAGE_BYTES of lines (and one line),
   * each line is sent once the reader took the one before, and the next read is made only then.
   * So a reader that stops reading holds one page on this node, not the log.
   */
  async follow(
    applicationName: string,
    jobId: string,
    lastEventIdHeader: string | undefined,
  ): Promise<EventStream> {
    const from = lastEventId(lastEventIdHeader);
    await this.existingJob(applicationName, jobId);
    return new EventStream((sink) => this.stream(applicationName, jobId, from, sink));
  }

  /** Ends the open streams (without an end event: a client reconnects to another node). */
  beforeApplicationShutdown(): void {
    for (const sink of [...this.streams]) {
      sink.complete();
    }
  }

  /** Runs one live stream into `subscriber`; returns its teardown. */
  private stream(
    applicationName: string,
    jobId: string,
    from: number,
    subscriber: EventSink,
  ): () => void {
    let after = from;
    let reading = false;
    let again = false;
    const readAll = async (): Promise<void> => {
      do {
        again = false;
        const tail = await this.logs.readTail(applicationName, jobId, after, PAGE, PAGE_BYTES);
        if (subscriber.closed) {
          return;
        }
        for (const line of tail?.lines ?? []) {
          const taken = subscriber.next(lineEvent(line));
          after = line.seq;
          if (!taken) {
            await subscriber.ready();
            if (subscriber.closed) {
              return;
            }
          }
        }
        if (tail !== null && fullPage(tail.lines)) {
          again = true; // a backlog: the next page at once
        } else if (tail === null || tail.state === JobState.DONE) {
          // One snapshot: every line of a finished job was among those read or before them.
          const end = await this.endEvent(applicationName, jobId, tail, after);
          subscriber.complete(end);
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

/** A read that may have left lines behind: the next one is made at once. */
function fullPage(lines: LogLine[]): boolean {
  let bytes = 0;
  for (const line of lines) {
    bytes += Buffer.byteLength(line.line, 'utf8');
  }
  return lines.length === PAGE || bytes >= PAGE_BYTES;
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
