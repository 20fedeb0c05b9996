import { NodeConfig, ProcessConfig } from '../config/config-slices';
import { jobTokenOf } from '../jobs/jobs-view';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { FunctionsController, MAX_ARGUMENT_DEPTH } from './functions.controller';
import { FunctionsService } from './functions.service';
import type { ExportedFunction } from '../r-engine/exported-functions';

const JSON_TYPE = { 'Content-Type': 'application/json' };

describe('FunctionsController', () => {
  let functions: Record<string, jest.Mock>;
  let controller: FunctionsController;

  beforeEach(async () => {
    const add: ExportedFunction = {
      name: 'add',
      file: 'add.R',
      title: null,
      description: null,
      arguments: [
        { name: 'x', type: 'number', default: null, description: null },
        { name: 'y', type: null, default: '1', description: null },
        { name: 'a', type: null, default: '1', description: null },
      ],
      returns: null,
      returnType: null,
    };
    functions = {
      listExported: jest.fn().mockResolvedValue([{ name: 'add' }]),
      openApi: jest.fn().mockResolvedValue({ openapi: '3.1.0' }),
      find: jest.fn().mockResolvedValue(add),
      call: jest.fn().mockResolvedValue({ status: 200, body: '[3]' }),
      queue: jest.fn().mockResolvedValue(
        jobTokenOf(BASE, {
          jobId: '0f8fad5b-d9cb-469f-a165-70867728950e',
          applicationName: 'app',
          submissionTime: new Date('2026-11-02T10:00:00Z'),
        }),
      ),
    };
    controller = await controllerOf(FunctionsController, [
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      { provide: ProcessConfig, useValue: { maxRequestBytes: 1000 } },
      { provide: FunctionsService, useValue: functions },
    ]);
  });

  const post = (body: string, headers: Record<string, string> = JSON_TYPE) =>
    controller.call('app', 'add', fakeRequest({ method: 'POST', headers, body }));

  it('lists the exported functions and describes them under the public base URL', async () => {
    expect(await controller.list('app')).toEqual({ functions: [{ name: 'add' }] });
    expect(await controller.openApi('app', fakeRequest())).toEqual({ openapi: '3.1.0' });
    expect(functions.openApi).toHaveBeenCalledWith('app', BASE);
  });

  it("calls the function with the body's JSON and answers its value", async () => {
    const answer = await post('{"x": 1, "y": 2}');
    expect(functions.find).toHaveBeenCalledWith('app', 'add');
    expect(functions.call).toHaveBeenCalledWith('app', 'add', '{"x": 1, "y": 2}');
    expect(answer).toMatchObject({
      status: 200,
      body: '[3]',
      headers: { 'Content-Type': 'application/json; charset=utf-8' },
    });
  });

  it('queues the call with Prefer: respond-async: 202, the job token, its Location', async () => {
    const answer = await post('{"x": 1}', {
      ...JSON_TYPE,
      Accept: 'application/json',
      Prefer: 'wait=5, respond-async',
    });
    expect(functions.queue).toHaveBeenCalledWith('app', 'add', '{"x": 1}', expect.anything(), BASE);
    expect(functions.call).not.toHaveBeenCalled();
    expect(answer.status).toBe(202);
    expect(answer.headers).toMatchObject({
      'Content-Type': 'application/json; charset=utf-8',
      'Preference-Applied': 'respond-async',
      Location: `${BASE}/svc/api/rest/results/app/0f8fad5b-d9cb-469f-a165-70867728950e`,
    });
    expect(JSON.parse(answer.body as string)).toMatchObject({ applicationName: 'app' });
  });

  it.each([
    ['{}', { 'Content-Type': 'text/plain' }, 415, 'Send the arguments as a JSON object'],
    ['[1]', JSON_TYPE, 400, 'The body must be a JSON object of the named arguments'],
    ['{x', JSON_TYPE, 400, 'The body is not JSON: '],
    [
      `{"a":${'['.repeat(MAX_ARGUMENT_DEPTH)}${']'.repeat(MAX_ARGUMENT_DEPTH)}}`,
      JSON_TYPE,
      400,
      'nested deeper than 64',
    ],
    [`{"a":"${'x'.repeat(1000)}"}`, JSON_TYPE, 413, 'at most 1000 bytes (MAX_REQUEST_BYTES)'],
  ])('refuses the body %s (%j) with %d', async (body, headers, status, message) => {
    const error = await apiErrorOf(() => post(body, headers));
    expect(error.status).toBe(status);
    expect(error.message).toContain(message);
    expect(functions.call).not.toHaveBeenCalled();
  });

  it('refuses missing, unknown and mistyped arguments in one 400 before calling or queueing', async () => {
    for (const headers of [JSON_TYPE, { ...JSON_TYPE, Prefer: 'respond-async' }]) {
      const error = await apiErrorOf(() => post('{"x": "1", "z": 2}', headers));
      expect(error.status).toBe(400);
      expect(error.message).toBe(
        'add: argument "x" must be a number, not a string; argument "z" is not one add takes.',
      );
    }
    expect((await apiErrorOf(() => post('{"y": 2}'))).message).toBe(
      'add: argument "x" is missing (it has no default).',
    );
    expect(functions.call).not.toHaveBeenCalled();
    expect(functions.queue).not.toHaveBeenCalled();
  });

  it('answers 400 for a bad application name before asking the service', async () => {
    expect(await apiErrorOf(() => controller.list('no such'))).toMatchObject({ status: 400 });
    expect(functions.listExported).not.toHaveBeenCalled();
  });
});
