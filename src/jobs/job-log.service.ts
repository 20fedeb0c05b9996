import { setTimeout as delay } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ApiError } from '../common/api-error';
import { ResultRepository } from '../results/result.repository';
import { JobLogRepository, LogLine } from './job-log.repository';
import { JobState } from '../queue/job.entity';
import { JobRecordsRepository } from '../queue/job-records.repository';

/** How often a live stream looks for new lines while the job runs. */
export const LOG_POLL_MS = 250;
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
export class JobLogService {
  constructor(
    private readonly logs: JobLogRepository,
    private readonly jobs: JobRecordsRepository,
    private readonly results: ResultRepository,
  ) {}

  async plain(applicationName: string, jobId: string, res: Response): Promise<void> {
    res.status(200).setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    let after = -1;
    for (;;) {
      const lines = await this.logs.read(applicationName, jobId, after, PAGE);
      res.write(lines.map(plainLogLine).join(''));
      if (lines.length < PAGE) {
        break;
      }
      after = lines[lines.length - 1].seq;
    }
    res.end();
  }

  /**
   * Follows the log: an event per line (`id` its number, `event: line`, data JSON with stream,
   * time and line; `event: progress` with fraction, message and time for a progress report), from after `Last-Event-ID` when given, and an `end` event with the outcome
   * once the job is done and every line was sent.
   */
  async live(applicationName: string, jobId: string, req: Request, res: Response): Promise<void> {
    let after = lastEventId(req.headers['last-event-id']);
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    while (!gone.signal.aborted) {
      const job = await this.jobs.findOne(applicationName, jobId);
      const lines = await this.logs.read(applicationName, jobId, after, PAGE);
      for (const line of lines) {
        res.write(sseEvent(line));
        after = line.seq;
      }
      if (lines.length === PAGE) {
        continue;
      }
      if (!job || job.state === JobState.DONE) {
        // The job's state was read before its lines: every line of a finished job was sent.
        const result = job ? await this.results.findMetadata(applicationName, jobId) : null;
        const outcome = result
          ? {
              success: result.success,
              type: result.type,
              cancelled: job?.cancelledAt !== null && job?.cancelledAt !== undefined,
            }
          : { deleted: true };
        res.write(`event: end\ndata: ${JSON.stringify(outcome)}\n\n`);
        break;
      }
      await delay(LOG_POLL_MS, undefined, { signal: gone.signal }).catch(() => undefined);
    }
    res.end();
  }
}

/** One line as an event: `progress` for a svc_progress report, else `line`. */
function sseEvent(line: LogLine): string {
  const data =
    line.stream === 'progress'
      ? { ...(JSON.parse(line.line) as object), time: line.time }
      : { stream: line.stream, time: line.time, line: line.line };
  const event = line.stream === 'progress' ? 'progress' : 'line';
  return `id: ${line.seq}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function lastEventId(header: string | string[] | undefined): number {
  if (header === undefined) {
    return -1;
  }
  const value = Array.isArray(header) ? header[0] : header;
  if (!/^\d{1,9}$/.test(value.trim())) {
    throw ApiError.badRequest('Last-Event-ID must be the id of an event of this stream.');
  }
  return Number(value);
}
