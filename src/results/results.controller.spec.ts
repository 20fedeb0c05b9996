import { Readable } from 'node:stream';
import { RestApiConfig } from '../config/config-slices';
import { JobWaiter } from '../queue/job-waiter.service';
import {
  apiErrorOf,
  BASE,
  controllerOf,
  fakeRequest,
  fakeResponse,
} from '../../test/support/controller-testing';
import { ResultRepresentation } from './result-view';
import { ResultRepository } from './result.repository';
import { ResultsController } from './results.controller';

const JOB_ID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const METADATA = {
  jobId: JOB_ID,
  applicationName: 'app',
  resultTime: new Date('2026-11-02T10:00:00Z'),
  success: true,
  type: 'zip',
};

describe('ResultsController', () => {
  let results: Record<string, jest.Mock>;
  let waitFor: jest.Mock;
  let controller: ResultsController;
  const signal = new AbortController().signal;

  beforeEach(async () => {
    results = {
      page: jest.fn().mockResolvedValue([]),
      findMetadata: jest.fn().mockResolvedValue(METADATA),
      delete: jest.fn(),
      findDataSource: jest.fn(),
    };
    waitFor = jest.fn();
    controller = await controllerOf(ResultsController, [
      {
        provide: RestApiConfig,
        useValue: { publicBaseUrl: BASE, maxRequestBytes: 1000, resultWaitMaxSeconds: 30 },
      },
      { provide: ResultRepository, useValue: results },
      { provide: JobWaiter, useValue: { waitFor } },
    ]);
  });

  it('streams the listing of a page the query names, in the negotiated type', async () => {
    const answer = await controller.list(
      fakeRequest({ headers: { Accept: 'application/json' } }),
      'app',
      '3',
      '6',
    );
    expect(results.page).toHaveBeenCalledWith('app', 3, null, 6);
    expect(answer.headers).toEqual({
      'Content-Type': 'application/json; charset=utf-8',
      Vary: 'Accept',
    });
    expect(answer.body).toBeInstanceOf(Readable);
  });

  it.each([
    ['x', undefined, 'limit must be a non-negative whole number.'],
    [undefined, '-1', 'offset must be a non-negative whole number.'],
  ])('answers 400 for limit=%s offset=%s', async (limit, offset, message) => {
    expect(await apiErrorOf(() => controller.list(fakeRequest(), 'app', limit, offset))).toEqual({
      status: 400,
      message,
    });
    expect(results.page).not.toHaveBeenCalled();
  });

  it('answers the metadata at once without wait, linking the data', async () => {
    const view = await controller.metadata(fakeRequest(), signal, 'app', JOB_ID);
    expect(results.findMetadata).toHaveBeenCalledWith('app', JOB_ID);
    expect(waitFor).not.toHaveBeenCalled();
    expect(view).toBeInstanceOf(ResultRepresentation);
    expect(JSON.stringify(view.toElement())).toContain(
      `${BASE}/svc/api/rest/result/app/${JOB_ID}.zip`,
    );
  });

  it('waits for the result with wait, and answers 404 when none came', async () => {
    waitFor.mockResolvedValue(null);
    const error = await apiErrorOf(() =>
      controller.metadata(fakeRequest(), signal, 'app', JOB_ID, '7'),
    );
    expect(waitFor).toHaveBeenCalledWith(JOB_ID, expect.any(Function), 7000, { signal });
    expect(error).toEqual({
      status: 404,
      message: `No result for job ${JOB_ID} of application app (not ready, or unknown).`,
    });
  });

  it('deletes a result, and answers 404 when there was none', async () => {
    results.delete.mockResolvedValueOnce(true).mockResolvedValueOnce(false);
    await expect(controller.delete('app', JOB_ID)).resolves.toBeUndefined();
    expect(results.delete).toHaveBeenCalledWith('app', JOB_ID);
    expect(await apiErrorOf(() => controller.delete('app', JOB_ID))).toMatchObject({
      status: 404,
    });
  });

  it('answers 400 for a data file not named by a job id, 404 for another extension', async () => {
    const res = fakeResponse();
    expect(await apiErrorOf(() => controller.data(fakeRequest(), res, 'app', 'notes.zip'))).toEqual(
      { status: 400, message: '"notes.zip" is not {jobId}.{extension}.' },
    );
    results.findDataSource.mockResolvedValue(METADATA);
    const path = `/svc/api/rest/result/app/${JOB_ID.toUpperCase()}.txt`;
    expect(
      await apiErrorOf(() =>
        controller.data(fakeRequest({ path }), res, 'app', `${JOB_ID.toUpperCase()}.txt`),
      ),
    ).toEqual({ status: 404, message: `No result data at ${path}.` });
    expect(results.findDataSource).toHaveBeenCalledWith('app', JOB_ID);
  });
});
