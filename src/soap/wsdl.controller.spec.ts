import { NodeConfig } from '../config/config-slices';
import {
  apiErrorOf,
  BASE,
  controllerOf,
  fakeRequest,
  fakeResponse,
} from '../../test/support/controller-testing';
import { WsdlController } from './wsdl.controller';
import { WsdlService } from './wsdl.service';

describe('WsdlController', () => {
  let file: jest.Mock;
  let controller: WsdlController;

  beforeEach(async () => {
    file = jest.fn();
    controller = await controllerOf(WsdlController, [
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      { provide: WsdlService, useValue: { file, fileNames: () => ['a.wsdl', 'b.xsd'] } },
    ]);
  });

  it('answers a file for the public base URL as text/xml', () => {
    file.mockReturnValue(Buffer.from('<schema/>'));
    const res = fakeResponse();
    controller.file('b.xsd', fakeRequest(), res);
    expect(file).toHaveBeenCalledWith('b.xsd', BASE);
    expect(res.written).toEqual({
      status: 200,
      headers: { 'content-type': 'text/xml; charset=utf-8' },
      body: Buffer.from('<schema/>'),
    });
  });

  it('answers 404 naming the files there are', async () => {
    file.mockReturnValue(undefined);
    expect(await apiErrorOf(() => controller.file('c.xsd', fakeRequest(), fakeResponse()))).toEqual(
      {
        status: 404,
        message: 'No file c.xsd under /svc/wsdl/; the files are: a.wsdl, b.xsd.',
      },
    );
  });
});
