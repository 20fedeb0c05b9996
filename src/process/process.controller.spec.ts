import { ProcessConfig } from '../config/config-slices';
import {
  apiErrorOf,
  controllerOf,
  fakeRequest,
  fakeResponse,
} from '../../test/support/controller-testing';
import { ProcessController } from './process.controller';
import { ProcessService } from './process.service';

describe('ProcessController', () => {
  let call: jest.Mock;
  let controller: ProcessController;

  beforeEach(async () => {
    call = jest
      .fn()
      .mockResolvedValue({ status: 200, contentType: 'application/json', body: '{}' });
    controller = await controllerOf(ProcessController, [
      { provide: ProcessConfig, useValue: { maxRequestBytes: 1000 } },
      { provide: ProcessService, useValue: { call } },
    ]);
  });

  const post = (headers: Record<string, string>, body: string | Buffer) => {
    const res = fakeResponse();
    return {
      res,
      done: controller.call(
        fakeRequest({
          method: 'POST',
          headers: { 'X-SVC-Application-Name': 'app', ...headers },
          body,
        }),
        res,
      ),
    };
  };

  it('calls the function of the body by its type and writes its answer', async () => {
    const { res, done } = post({ 'Content-Type': 'application/json' }, '{"x":1}');
    await done;
    expect(call).toHaveBeenCalledWith('app', 'json', '{"x":1}');
    expect(res.written).toEqual({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
  });

  it.each([
    [{ 'Content-Type': 'text/plain' }, 'x', 415],
    [{ 'Content-Type': 'application/xml' }, '', 400],
    [{ 'Content-Type': 'application/xml' }, Buffer.from([0xff, 0xfe, 0x00]), 400],
  ])('refuses %j with %s: %d', async (headers, body, status) => {
    expect(await apiErrorOf(() => post(headers, body).done)).toMatchObject({ status });
    expect(call).not.toHaveBeenCalled();
  });
});
