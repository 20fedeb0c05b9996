import { NodeConfig } from '../config/config-slices';
import { HttpAnswer } from '../common/http-answer';
import { apiErrorOf, BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
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
    const answer = controller.file('b.xsd', fakeRequest());
    expect(file).toHaveBeenCalledWith('b.xsd', BASE);
    expect(answer).toEqual(
      new HttpAnswer(Buffer.from('<schema/>'), {
        headers: { 'Content-Type': 'text/xml; charset=utf-8' },
      }),
    );
  });

  it('answers 404 naming the files there are', async () => {
    file.mockReturnValue(undefined);
    expect(await apiErrorOf(() => controller.file('c.xsd', fakeRequest()))).toEqual({
      status: 404,
      message: 'No file c.xsd under /svc/wsdl/; the files are: a.wsdl, b.xsd.',
    });
  });
});
