import type { MessageEvent } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Subscription } from 'rxjs';
import { JobAdminRepository } from '../queue/job-admin.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { DatabaseEvents } from '../storage/database-events.service';
import { inProcessEvents } from '../../test/support/in-process-events';
import { EVENT_COALESCE_MS, EVENT_PING_MS, JobEventsService } from './job-events.service';

const JOB = '5b1e0c52-7d3e-4b8a-9c21-0e5f4d3b2a10';

/** Lets the promises that timers started settle (fake timers do not run them). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await Promise.resolve();
  }
}

describe('JobEventsService', () => {
  let service: JobEventsService;
  let notifier: QueueNotifier;
  let touched: jest.Mock;
  const subscriptions: Subscription[] = [];

  beforeEach(async () => {
    jest.useFakeTimers();
    touched = jest.fn().mockResolvedValue(['demo', 'other']);
    // The real notifier on an embedded database's events: in-process, no LISTEN connection.
    const module = await Test.createTestingModule({
      providers: [
        JobEventsService,
        QueueNotifier,
        { provide: DatabaseEvents, useValue: inProcessEvents() },
        { provide: JobAdminRepository, useValue: { applicationsTouched: touched } },
      ],
    }).compile();
    service = module.get(JobEventsService);
    notifier = module.get(QueueNotifier);
  });

  afterEach(() => {
    subscriptions.splice(0).forEach((subscription) => subscription.unsubscribe());
    jest.useRealTimers();
  });

  function open(applications: string[] | null): MessageEvent[] {
    const events: MessageEvent[] = [];
    subscriptions.push(
      service
        .follow(applications)
        .asObservable()
        .subscribe((event) => events.push(event)),
    );
    return events;
  }

  it('pings at once and every 25 s, and stops when the client goes', () => {
    const events = open(null);
    expect(events).toEqual([{ comment: 'ping' }]);
    jest.advanceTimersByTime(EVENT_PING_MS);
    expect(events).toEqual([{ comment: 'ping' }, { comment: 'ping' }]);
    subscriptions[0].unsubscribe();
    expect(service.openStreams).toBe(0);
    jest.advanceTimersByTime(EVENT_PING_MS);
    expect(events).toHaveLength(2);
  });

  it('gathers the signals of a second into one look-up, one event per visible application', async () => {
    const all = open(null);
    const demoOnly = open(['demo']);
    notifier.jobQueued('script');
    notifier.jobsStarted([JOB]);
    notifier.resultStored(JOB);
    jest.advanceTimersByTime(EVENT_COALESCE_MS - 1);
    expect(touched).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    await settle();
    expect(touched).toHaveBeenCalledTimes(1);
    expect(touched).toHaveBeenCalledWith([JOB], true, 5);
    const jobs = (events: MessageEvent[]) => events.filter((event) => event.type === 'jobs');
    expect(jobs(all).map((event) => event.data)).toEqual([
      { application: 'demo' },
      { application: 'other' },
    ]);
    expect(jobs(demoOnly).map((event) => event.data)).toEqual([{ application: 'demo' }]);
  });

  it('ignores delivery jobs queued, and looks nothing up while no stream is open', async () => {
    open(null);
    notifier.jobQueued('callback');
    jest.advanceTimersByTime(EVENT_COALESCE_MS);
    await settle();
    expect(touched).not.toHaveBeenCalled();
    subscriptions[0].unsubscribe();
    notifier.resultStored(JOB);
    jest.advanceTimersByTime(EVENT_COALESCE_MS);
    await settle();
    expect(touched).not.toHaveBeenCalled();
  });

  it('reports a change this node made without a signal (a retry) without a look-up', async () => {
    const events = open(['demo']);
    service.changed('demo');
    service.changed('other');
    jest.advanceTimersByTime(EVENT_COALESCE_MS);
    await settle();
    expect(touched).not.toHaveBeenCalled();
    expect(events.filter((event) => event.type === 'jobs')).toEqual([
      { type: 'jobs', data: { application: 'demo' } },
    ]);
  });

  it('ends the open streams when the node stops', () => {
    let completed = false;
    subscriptions.push(
      service
        .follow(null)
        .asObservable()
        .subscribe({ complete: () => (completed = true) }),
    );
    service.beforeApplicationShutdown();
    expect(completed).toBe(true);
  });
});
