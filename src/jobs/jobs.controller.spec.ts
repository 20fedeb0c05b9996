import { RestLinks } from '../common/public-uri';
import { RestApiConfig } from '../config/config-slices';
import { JobState } from '../queue/queue.types';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { FormJobService } from './form-job.service';
import { JobCancellationService } from './job-cancellation.service';
import { JobStatusService } from './job-status.service';
import { JobsController } from './jobs.controller';
import { JobsService } from './jobs.service';
import { JobTokenRepresentation } from './jobs-view';

const JOB_ID = '0f8fad5b-d9cb-469f-a165-70867728950e';

describe('JobsController', () => {
  let formSubmit: jest.Mock;
  let cancel: jest.Mock;
  let status: jest.Mock;
  let controller: JobsController;
  const signal = new AbortController().signal;

  beforeEach(async () => {
    formSubmit = jest.fn().mockResolvedValue({
      jobId: JOB_ID,
      applicationName: 'app',
      submissionTime: new Date('2026-11-02T10:00:00Z'),
    });
    cancel = jest.fn();
    status = jest.fn().mockResolvedValue({ a: 'status' });
    controller = await controllerOf(JobsController, [
      {
        provide: RestApiConfig,
        useValue: { publicBaseUrl: BASE, maxRequestBytes: 1000, resultWaitMaxSeconds: 30 },
      },
      { provide: JobsService, useValue: { submit: jest.fn() } },
      { provide: FormJobService, useValue: { submit: formSubmit } },
      { provide: JobCancellationService, useValue: { cancel } },
      { provide: JobStatusService, useValue: { status } },
    ]);
  });

  it('hands a form post to FormJobService and answers its job token with the result in Location', async () => {
    const req = fakeRequest({
      method: 'POST',
      headers: { 'Content-Type': 'multipart/form-data; boundary=x' },
    });
    const answer = await controller.submit(req);
    expect(formSubmit).toHaveBeenCalledWith(req);
    expect(answer.headers).toEqual({ Location: `${BASE}/svc/api/rest/results/app/${JOB_ID}` });
    expect((answer.body as JobTokenRepresentation).toElement()).toMatchObject({
      name: 'jobToken',
      attributes: { jobId: JOB_ID, applicationName: 'app' },
    });
  });

  it('asks the status service for the job, waiting as the query says', async () => {
    const answer = await controller.status(fakeRequest(), signal, 'app', JOB_ID, '5', 'QUEUED');
    expect(answer).toEqual({ a: 'status' });
    expect(status).toHaveBeenCalledWith(expect.any(RestLinks), 'app', JOB_ID, {
      waitMs: 5000,
      seenState: JobState.QUEUED,
      signal,
    });
  });

  it('asks for the status at once without wait', async () => {
    await controller.status(fakeRequest(), signal, 'app', JOB_ID);
    expect(status).toHaveBeenCalledWith(expect.any(RestLinks), 'app', JOB_ID, {
      waitMs: null,
      seenState: null,
      signal,
    });
  });

  it.each([
    ['0', undefined, 'wait must be a whole number of seconds from 1 to 30.'],
    ['31', undefined, 'wait must be a whole number of seconds from 1 to 30.'],
    [undefined, 'QUEUED', 'while is only used with wait.'],
    ['5', 'sleeping', 'while must be one of '],
  ])('answers 400 for wait=%s while=%s', async (wait, whileState, message) => {
    const error = await apiErrorOf(() =>
      controller.status(fakeRequest(), signal, 'app', JOB_ID, wait, whileState),
    );
    expect(error).toMatchObject({ status: 400 });
    expect(error.message).toContain(message);
    expect(status).not.toHaveBeenCalled();
  });

  it('cancels as the principal: 204 when stopped, 202 with the status when stopping', async () => {
    cancel.mockResolvedValueOnce('stopped');
    const stopped = await controller.cancel(fakeRequest(), 'app', JOB_ID);
    expect(cancel).toHaveBeenCalledWith('app', JOB_ID, null);
    expect(stopped).toMatchObject({ status: 204, body: null });

    cancel.mockResolvedValueOnce('stopping');
    const stopping = await controller.cancel(fakeRequest(), 'app', JOB_ID);
    expect(stopping).toMatchObject({ status: 202, body: { a: 'status' } });
    expect(status).toHaveBeenCalledWith(expect.any(RestLinks), 'app', JOB_ID);
  });

  it('answers 404 for an unknown job and 409 for a finished one', async () => {
    cancel.mockResolvedValueOnce('unknown').mockResolvedValueOnce('finished');
    expect(await apiErrorOf(() => controller.cancel(fakeRequest(), 'app', JOB_ID))).toMatchObject({
      status: 404,
    });
    expect(await apiErrorOf(() => controller.cancel(fakeRequest(), 'app', JOB_ID))).toEqual({
      status: 409,
      message: `Job ${JOB_ID} of application app has finished already; delete its result instead.`,
    });
  });
});
