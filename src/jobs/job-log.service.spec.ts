import { HttpStatus, MessageEvent } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Subscription } from 'rxjs';
import { inProcessEvents } from '../../test/support/in-process-events';
import { JobState } from '../queue/queue.types';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { ResultRepository } from '../results/result.repository';
import { DatabaseEvents } from '../storage/database-events.service';
import { JobLogRepository, LogLine, LogTail } from '../job-log/job-log.repository';
import { JobLogService } from './job-log.service';

const APP = 'demo';
const JOB = '3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10';

/** The job's row and its log as the repositories would read them; counts the stream's reads. */
class JobTable {
  state: JobState = JobState.RUNNING;
  cancelled = false;
  lines: LogLine[] = [];
  tailReads = 0;

  append(line: string): void {
    this.lines.push({ seq: this.lines.length, stream: 'stdout', time: new Date(0), line });
  }

  readTail(app: string, jobId: string, after: number, limit: number): Promise<LogTail | null> {
    this.tailReads += 1;
    if (app !== APP || jobId !== JOB) {
      return Promise.resolve(null);
    }
    const lines = this.lines.filter((l) => l.seq > after).slice(0, limit);
    return Promise.resolve({ state: this.state, cancelled: this.cancelled, lines });
  }
}

/** Lets pending promise callbacks run (fake timers do not advance them). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i += 1) {
    await Promise.resolve();
  }
}

describe('JobLogService live stream', () => {
  let service: JobLogService;
  let notifier: QueueNotifier;
  let table: JobTable;
  let events: MessageEvent[];
  let completed: boolean;
  let subscription: Subscription | null;

  beforeEach(async () => {
    jest.useFakeTimers();
    table = new JobTable();
    // The real notifier on an embedded database's events: in-process, no LISTEN connection.
    const module = await Test.createTestingModule({
      providers: [
        JobLogService,
        QueueNotifier,
        { provide: DatabaseEvents, useValue: inProcessEvents() },
        {
          provide: JobLogRepository,
          useValue: { readTail: table.readTail.bind(table) },
        },
        {
          provide: JobRecordsRepository,
          useValue: {
            findOne: (app: string, jobId: string) =>
              Promise.resolve(app === APP && jobId === JOB ? { id: JOB } : null),
          },
        },
        {
          provide: ResultRepository,
          useValue: {
            findMetadata: () => Promise.resolve({ success: false, type: 'txt' }),
          },
        },
      ],
    }).compile();
    service = module.get(JobLogService);
    notifier = module.get(QueueNotifier);
    events = [];
    completed = false;
    subscription = null;
  });
  afterEach(() => {
    subscription?.unsubscribe();
    jest.useRealTimers();
  });

  async function open(lastEventId?: string): Promise<void> {
    const stream = await service.follow(APP, JOB, lastEventId);
    subscription = stream.asObservable().subscribe({
      next: (event) => events.push(event),
      complete: () => (completed = true),
    });
    await settle();
  }

  it('reads once when it opens, then not at all while the job is quiet, for minutes', async () => {
    table.append('first line');
    await open();
    expect(table.tailReads).toBe(1);
    expect(events).toEqual([
      {
        type: 'line',
        id: '0',
        data: { stream: 'stdout', time: new Date(0), line: 'first line' },
      },
    ]);
    jest.advanceTimersByTime(10 * 60_000);
    await settle();
    expect(table.tailReads).toBe(1);
    expect(completed).toBe(false);
  });

  it("reads once per notification of its job's log, and not for other jobs", async () => {
    await open();
    table.append('second line');
    notifier.logAppended(JOB);
    await settle();
    expect(table.tailReads).toBe(2);
    expect(events.map((e) => e.id)).toEqual(['0']);
    notifier.logAppended('00000000-0000-4000-8000-000000000000');
    jest.advanceTimersByTime(60_000);
    await settle();
    expect(table.tailReads).toBe(2);
    table.append('third line');
    notifier.logAppended(JOB);
    await settle();
    expect(table.tailReads).toBe(3);
    expect(events.map((e) => e.id)).toEqual(['0', '1']);
  });

  it('turns notifications that come during a read into one more read', async () => {
    await open();
    table.append('a');
    notifier.logAppended(JOB);
    // The read runs: these three wait for it and are read together.
    notifier.logAppended(JOB);
    notifier.logAppended(JOB);
    notifier.logAppended(JOB);
    await settle();
    expect(table.tailReads).toBe(3);
    expect(events.map((e) => e.id)).toEqual(['0']);
  });

  it('resumes after Last-Event-ID and ends with the outcome when the result is stored', async () => {
    ['a', 'b', 'c'].forEach((line) => table.append(line));
    await open('1');
    expect(events.map((e) => e.id)).toEqual(['2']);
    table.state = JobState.DONE;
    table.cancelled = true;
    notifier.resultStored(JOB);
    await settle();
    expect(events[events.length - 1]).toEqual({
      type: 'end',
      id: '2',
      data: { success: false, type: 'txt', cancelled: true },
    });
    expect(completed).toBe(true);
  });

  it('sends a progress report as a progress event', async () => {
    table.lines.push({
      seq: 0,
      stream: 'progress',
      time: new Date(0),
      line: '{"fraction":0.4,"message":"fitting"}',
    });
    await open();
    expect(events).toEqual([
      { type: 'progress', id: '0', data: { fraction: 0.4, message: 'fitting', time: new Date(0) } },
    ]);
  });

  it('reads again when the LISTEN connection is back', async () => {
    const listening: Array<() => void> = [];
    jest.spyOn(notifier, 'onListening').mockImplementation((listener) => {
      listening.push(listener);
      return () => listening.splice(listening.indexOf(listener), 1);
    });
    await open();
    expect(listening).toHaveLength(1);
    listening[0]();
    await settle();
    expect(table.tailReads).toBe(2);
    subscription?.unsubscribe();
    expect(listening).toHaveLength(0);
  });

  it('releases its subscriptions when the client goes away: no read after', async () => {
    await open();
    subscription?.unsubscribe();
    table.append('late');
    notifier.logAppended(JOB);
    notifier.resultStored(JOB);
    await settle();
    expect(table.tailReads).toBe(1);
    expect(events).toEqual([]);
  });

  it('ends open streams, without an end event, when the node stops', async () => {
    await open();
    service.beforeApplicationShutdown();
    expect(completed).toBe(true);
    notifier.logAppended(JOB);
    await settle();
    expect(table.tailReads).toBe(1);
  });

  it('answers 400 for a bad Last-Event-ID and 404 for no job, before any stream', async () => {
    await expect(service.follow(APP, JOB, 'x')).rejects.toMatchObject({
      status: HttpStatus.BAD_REQUEST,
    });
    await expect(
      service.follow(APP, '00000000-0000-4000-8000-000000000000', undefined),
    ).rejects.toMatchObject({ status: HttpStatus.NOT_FOUND });
    expect(table.tailReads).toBe(0);
  });
});
