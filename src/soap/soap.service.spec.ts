import { SoapFault } from './soap-fault';
import type { ReceivedSoapRequest } from './soap-request-reader';
import { processCallOf } from './soap.service';

const CALL = { applicationName: 'demo', parameters: [], payloads: [] };

function received(
  soapAction: string | undefined,
  localName = 'job',
  namespace = 'urn:svc:soap:types',
): ReceivedSoapRequest {
  return {
    soapAction,
    operation: { namespace, localName },
    call: localName === 'job' ? CALL : null,
    cleanup: () => Promise.resolve(),
  };
}

function faultOf(request: ReceivedSoapRequest): SoapFault {
  try {
    processCallOf(request);
  } catch (error) {
    return error as SoapFault;
  }
  throw new Error('no fault');
}

describe('processCallOf: the operation is told by the body element', () => {
  it.each([undefined, '', 'urn:svc:soap:Process', '"urn:svc:soap:Process"'])(
    'accepts the job element with SOAPAction %j',
    (action) => {
      expect(processCallOf(received(action))).toBe(CALL);
    },
  );

  it('another body element is an unknown operation (Client)', () => {
    const fault = faultOf(received(undefined, 'cancel'));
    expect(fault.code).toBe('Client');
    expect(fault.message).toMatch(
      /Unknown operation: the body element \{urn:svc:soap:types\}cancel/,
    );
    expect(faultOf(received(undefined, 'job', 'urn:other')).message).toMatch(/\{urn:other\}job/);
  });

  it('a SOAPAction naming another operation is a Client fault, even with a job element', () => {
    const fault = faultOf(received('urn:svc:soap:Cancel'));
    expect(fault.code).toBe('Client');
    expect(fault.message).toMatch(/SOAPAction "urn:svc:soap:Cancel" names no operation/);
  });
});
