import { NodeConfig } from '../config/config-slices';
import { HttpAnswer } from '../common/http-answer';
import { BASE, controllerOf, fakeRequest } from '../../test/support/controller-testing';
import { SoapController } from './soap.controller';
import { SoapService } from './soap.service';
import { WsdlService } from './wsdl.service';

const PATH = '/svc/api/soap/mtom-jobs';

describe('SoapController', () => {
  let process: jest.Mock;
  let wsdl: jest.Mock;
  let controller: SoapController;

  beforeEach(async () => {
    process = jest.fn();
    wsdl = jest.fn().mockReturnValue('<definitions/>');
    controller = await controllerOf(SoapController, [
      { provide: NodeConfig, useValue: { publicBaseUrl: BASE } },
      { provide: SoapService, useValue: { process } },
      { provide: WsdlService, useValue: { wsdl } },
    ]);
  });

  it('answers the WSDL for the public base URL to GET ?wsdl, in any case', () => {
    const answer = controller.describe(fakeRequest({ path: PATH, query: { WSDL: '' } }));
    expect(wsdl).toHaveBeenCalledWith(BASE);
    expect(answer).toEqual(
      new HttpAnswer('<definitions/>', {
        status: 200,
        headers: { 'Content-Type': 'text/xml; charset=utf-8' },
      }),
    );
  });

  it('answers a plain 400, not a fault, to GET without ?wsdl', () => {
    const answer = controller.describe(fakeRequest({ path: PATH }));
    expect(wsdl).not.toHaveBeenCalled();
    expect(answer).toEqual(
      new HttpAnswer(
        `GET ${PATH} answers only the WSDL (?wsdl); SOAP requests are POSTed here.\n`,
        {
          status: 400,
          headers: { 'Content-Type': 'text/plain; charset=utf-8' },
        },
      ),
    );
  });

  it("hands a POST to SoapService with the client's going, and returns its answer", async () => {
    const req = fakeRequest({ method: 'POST', path: PATH });
    const signal = new AbortController().signal;
    const answer = new HttpAnswer('envelope');
    process.mockResolvedValue(answer);
    expect(await controller.process(req, signal)).toBe(answer);
    expect(process).toHaveBeenCalledWith(req, signal);
  });

  it('answers 405 with Allow to another method', () => {
    const answer = controller.other(fakeRequest({ method: 'PUT', path: PATH }));
    expect(answer).toEqual(
      new HttpAnswer(`PUT is not allowed on ${PATH}; allowed: GET, POST (GET with ?wsdl only).\n`, {
        status: 405,
        headers: { 'Content-Type': 'text/plain; charset=utf-8', Allow: 'GET, POST' },
      }),
    );
  });
});
