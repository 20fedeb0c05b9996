import type { MessageEvent } from '@nestjs/common';
import { Subject } from 'rxjs';
import { NodeConfig, RestApiConfig } from '../config/config-slices';
import { EventStreamQuota } from '../security/event-stream-quota';
import { makePrincipal, rememberPrincipal } from '../security/principal';
import {
  apiErrorOf,
  BASE,
  controllerOf,
  eventStreamOf,
  fakeRequest,
  FakeRequestInit,
  UNCHANGING_RIGHTS,
} from '../../test/support/controller-testing';
import type { CancelJobsDto } from './bulk-jobs.dto';
import { ConsoleController } from './console.controller';
import { ConsoleService } from './console.service';
import { cursorOf } from './job-filter';
import { JobEventsService } from './job-events.service';

const ALICE = makePrincipal('user', 'alice', []);
const JOB_ID = '5b1e0c52-7d3e-4b8a-9c21-0e5f4d3b2a10';

function asAlice(init: FakeRequestInit = {}) {
  const req = fakeRequest(init);
  rememberPrincipal(req, ALICE);
  return req;
}

describe('ConsoleController', () => {
  let service: Record<string, jest.Mock>;
  let events: Record<string, jest.Mock>;
  let controller: ConsoleController;

  beforeEach(async () => {
    service = {
      caller: jest.fn().mockResolvedValue({ principal: 'user:alice' }),
      list: jest.fn().mockResolvedValue({ jobs: [], next: null }),
      job: jest.fn().mockResolvedValue({ jobId: JOB_ID }),
      retry: jest.fn().mockResolvedValue({ jobId: JOB_ID, state: 'QUEUED' }),
      cancel: jest.fn().mockResolvedValue({ cancelled: 0, jobIds: [], more: false }),
      overview: jest.fn().mockResolvedValue({ applications: [] }),
      visibleApplications: jest.fn().mockReturnValue(['demo']),
    };
    events = { follow: jest.fn() };
    controller = await controllerOf(ConsoleController, [
      { provide: ConsoleService, useValue: service },
      { provide: JobEventsService, useValue: events },
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      EventStreamQuota,
      UNCHANGING_RIGHTS,
      { provide: RestApiConfig, useValue: { eventStreamsPerCaller: 1 } },
    ]);
  });

  it('answers who the caller is', async () => {
    expect(await controller.me(asAlice())).toEqual({ principal: 'user:alice' });
    expect(service.caller).toHaveBeenCalledWith(ALICE);
  });

  it('reads the filters, limit and cursor, and links the next page with the same query', async () => {
    const position = { at: '2026-11-02T10:00:00.123456Z', id: JOB_ID };
    service.list.mockResolvedValue({ jobs: [], next: 'CURSOR' });
    const query = {
      id: '5B1E0C52-7D',
      application: 'demo',
      state: 'QUEUED,FAILED',
      kind: 'script',
      source: 'rest',
      principal: 'user:bob',
      from: '2026-11-01T00:00:00Z',
      limit: '10',
      cursor: cursorOf(position),
    };
    const page = await controller.list(asAlice({ query }), query);
    expect(service.list).toHaveBeenCalledWith(
      ALICE,
      {
        application: 'demo',
        states: ['QUEUED', 'FAILED'],
        kind: 'script',
        source: 'rest',
        principal: 'user:bob',
        from: new Date('2026-11-01T00:00:00Z'),
        to: null,
        // A prefix, dashes and case as typed: every id that starts with its digits.
        idRange: {
          from: '5b1e0c52-7d00-0000-0000-000000000000',
          to: '5b1e0c52-7dff-ffff-ffff-ffffffffffff',
        },
      },
      10,
      position,
      BASE,
    );
    expect(page.next).toBe('CURSOR');
    const next = new URL(page.nextUri!);
    expect(`${next.origin}${next.pathname}`).toBe(`${BASE}/svc/api/rest/admin/jobs`);
    expect(Object.fromEntries(next.searchParams)).toEqual({ ...query, cursor: 'CURSOR' });
  });

  it('has no next link on the last page, and 50 jobs a page by default', async () => {
    const page = await controller.list(asAlice(), {});
    expect(page).toEqual({ jobs: [], next: null, nextUri: null });
    expect(service.list.mock.calls[0][2]).toBe(50);
  });

  it.each([
    [
      { state: 'LOST' },
      'state must be one of QUEUED, RUNNING, DONE, SUCCEEDED, FAILED, CANCELLED.',
    ],
    [{ kind: 'mail_reply' }, 'kind must be one of script, xml, json.'],
    [{ limit: '500' }, 'limit must be a whole number from 1 to 200.'],
    [{ cursor: 'bm90IGEgY3Vyc29y' }, 'cursor must be the value of next'],
    [
      { cursor: cursorOf({ at: '2026-02-30T00:00:00.000000Z', id: JOB_ID }) },
      'cursor must be the value of next',
    ],
    [{ principal: 'bob' }, 'principal must be <kind>:<name>, e.g. user:alice.'],
  ])('answers 400 for %j without asking the service', async (query, message) => {
    const error = await apiErrorOf(() => controller.list(asAlice(), query));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
    expect(service.list).not.toHaveBeenCalled();
  });

  it('reads and retries one job under the public base URL', async () => {
    await controller.job(asAlice(), 'demo', JOB_ID);
    expect(service.job).toHaveBeenCalledWith(ALICE, 'demo', JOB_ID, BASE);
    expect(await controller.retry(asAlice(), 'demo', JOB_ID)).toMatchObject({ state: 'QUEUED' });
    expect(service.retry).toHaveBeenCalledWith(ALICE, 'demo', JOB_ID, BASE);
  });

  it('cancels with the body as filter, unfinished states only, 100 at most by default', async () => {
    const body = { application: 'demo', state: 'QUEUED,RUNNING' } as CancelJobsDto;
    await controller.cancel(asAlice(), body);
    expect(service.cancel).toHaveBeenCalledWith(
      ALICE,
      expect.objectContaining({ application: 'demo', states: ['QUEUED', 'RUNNING'] }),
      100,
    );
    const error = await apiErrorOf(() => controller.cancel(asAlice(), { state: 'FAILED' }));
    expect(error).toEqual({ status: 400, message: 'state must be one of QUEUED, RUNNING.' });
  });

  it('follows the events of the applications the caller may see; 406 without an event stream', async () => {
    const stream = new Subject<MessageEvent>();
    events.follow.mockReturnValue(eventStreamOf(stream));
    const seen: MessageEvent[] = [];
    const subscription = controller
      .follow(asAlice())
      .asObservable()
      .subscribe((event) => seen.push(event));
    stream.next({ data: { application: 'demo' }, type: 'jobs' });
    expect(seen).toEqual([{ data: { application: 'demo' }, type: 'jobs' }]);
    expect(events.follow).toHaveBeenCalledWith(['demo']);
    // EVENT_STREAMS_PER_CALLER=1 here: alice's second stream waits for her first to end.
    expect(await apiErrorOf(() => controller.follow(asAlice()))).toMatchObject({ status: 429 });
    subscription.unsubscribe();
    controller.follow(asAlice()).asObservable().subscribe().unsubscribe();
    expect(await apiErrorOf(() => controller.eventsWithoutStream())).toMatchObject({
      status: 406,
    });
  });

  it('answers 401 when no one authenticated (the guard lets no one through so)', async () => {
    expect(await apiErrorOf(() => controller.me(fakeRequest()))).toMatchObject({ status: 401 });
    expect(await controller.overview(asAlice())).toEqual({ applications: [] });
  });
});
