import { Test } from '@nestjs/testing';
import { CallbackRepository } from '../callbacks/callback.repository';
import { RestLinks } from '../common/public-uri';
import { JobEntity } from '../queue/job.entity';
import { JobState } from '../queue/queue.types';
import { JobRecordsRepository } from '../queue/job-records.repository';
import { JobWaiter } from '../queue/job-waiter.service';
import { apiErrorOf, BASE } from '../../test/support/controller-testing';
import { JobStatusService } from './job-status.service';

const JOB_ID = '0f8fad5b-d9cb-469f-a165-70867728950e';

function job(state: JobState, more: Partial<JobEntity> = {}): JobEntity {
  return {
    id: JOB_ID,
    applicationName: 'app',
    state,
    submittedAt: new Date('2026-11-02T10:00:00Z'),
    startedAt: new Date('2026-11-02T10:00:01Z'),
    finishedAt: null,
    attempts: 1,
    callbackUrl: null,
    cancelledAt: null,
    cancelledBy: null,
    progressFraction: null,
    progressMessage: null,
    ...more,
  } as JobEntity;
}

describe('JobStatusService', () => {
  let findOne: jest.Mock;
  let waitFor: jest.Mock;
  let findStatus: jest.Mock;
  let service: JobStatusService;
  const links = new RestLinks(BASE);
  const signal = new AbortController().signal;

  beforeEach(async () => {
    findOne = jest.fn();
    waitFor = jest.fn();
    findStatus = jest.fn().mockResolvedValue(null);
    const module = await Test.createTestingModule({
      providers: [
        JobStatusService,
        { provide: JobRecordsRepository, useValue: { findOne } },
        { provide: JobWaiter, useValue: { waitFor } },
        { provide: CallbackRepository, useValue: { findStatus } },
      ],
    }).compile();
    service = module.get(JobStatusService);
  });

  const attributes = async (wait?: Parameters<JobStatusService['status']>[3]) =>
    (await service.status(links, 'app', JOB_ID, wait)).toElement().attributes;

  it('shows a queued job without its start time, and no callback when it has none', async () => {
    findOne.mockResolvedValue(job(JobState.QUEUED));
    const element = (await service.status(links, 'app', JOB_ID)).toElement();
    expect(findOne).toHaveBeenCalledWith('app', JOB_ID);
    expect(element.attributes).toMatchObject({ state: 'QUEUED', startTime: null, attempts: 1 });
    expect(element.attributes?.resultUri).toBe(`${BASE}/svc/api/rest/results/app/${JOB_ID}`);
    expect(findStatus).not.toHaveBeenCalled();
  });

  it('shows a callback not yet tried as pending', async () => {
    findOne.mockResolvedValue(job(JobState.RUNNING, { callbackUrl: 'https://cb.example/' }));
    const element = (await service.status(links, 'app', JOB_ID)).toElement();
    expect(findStatus).toHaveBeenCalledWith(JOB_ID);
    expect(JSON.stringify(element)).toContain('"state":"pending"');
  });

  it('answers 404 for an unknown job', async () => {
    findOne.mockResolvedValue(null);
    expect(await apiErrorOf(() => service.status(links, 'app', JOB_ID))).toMatchObject({
      status: 404,
    });
  });

  it('does not wait for a finished job, nor when the state differs from the one seen', async () => {
    findOne.mockResolvedValue(job(JobState.DONE));
    await attributes({ waitMs: 5000, seenState: null, signal });
    findOne.mockResolvedValue(job(JobState.RUNNING));
    await attributes({ waitMs: 5000, seenState: JobState.QUEUED, signal });
    expect(waitFor).not.toHaveBeenCalled();
  });

  it('waits for a change of the state and shows the job as it then is', async () => {
    findOne.mockResolvedValueOnce(job(JobState.QUEUED));
    waitFor.mockImplementation(async (_id: string, look: () => Promise<unknown>) => {
      findOne.mockResolvedValueOnce(job(JobState.RUNNING));
      return look();
    });
    expect(await attributes({ waitMs: 5000, seenState: null, signal })).toMatchObject({
      state: 'RUNNING',
    });
    expect(waitFor).toHaveBeenCalledWith(JOB_ID, expect.any(Function), 5000, {
      events: 'result-or-start',
      signal,
    });
  });
});
