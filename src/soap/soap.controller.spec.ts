import { NodeConfig } from '../config/config-slices';
import {
  BASE,
  controllerOf,
  fakeRequest,
  fakeResponse,
} from '../../test/support/controller-testing';
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
    const res = fakeResponse();
    controller.describe(fakeRequest({ path: PATH, query: { WSDL: '' } }), res);
    expect(wsdl).toHaveBeenCalledWith(BASE);
    expect(res.written).toEqual({
      status: 200,
      headers: { 'content-type': 'text/xml; charset=utf-8' },
      body: '<definitions/>',
    });
  });

  it('answers a plain 400, not a fault, to GET without ?wsdl', () => {
    const res = fakeResponse();
    controller.describe(fakeRequest({ path: PATH }), res);
    expect(wsdl).not.toHaveBeenCalled();
    expect(res.written).toEqual({
      status: 400,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      body: `GET ${PATH} answers only the WSDL (?wsdl); SOAP requests are POSTed here.\n`,
    });
  });

  it('hands a POST to SoapService with its response', async () => {
    const req = fakeRequest({ method: 'POST', path: PATH });
    const res = fakeResponse();
    await controller.process(req, res);
    expect(process).toHaveBeenCalledWith(req, res);
  });

  it('answers 405 with Allow to another method', () => {
    const res = fakeResponse();
    controller.other(fakeRequest({ method: 'PUT', path: PATH }), res);
    expect(res.written).toEqual({
      status: 405,
      headers: { allow: 'GET, POST', 'content-type': 'text/plain; charset=utf-8' },
      body: `PUT is not allowed on ${PATH}; allowed: GET, POST (GET with ?wsdl only).\n`,
    });
  });
});
