import { XMLParser } from 'fast-xml-parser';
import { SoapFault, soapFaultEnvelope, type SoapFaultCode } from './soap-fault';

describe('soapFaultEnvelope', () => {
  it.each<SoapFaultCode>(['Client', 'Server', 'VersionMismatch'])(
    'writes a SOAP 1.1 Fault with faultcode soap:%s',
    (code) => {
      const xml = soapFaultEnvelope(new SoapFault(code, 'what went wrong'));
      const parsed = new XMLParser({ ignoreAttributes: false }).parse(xml);
      const envelope = parsed['soap:Envelope'];
      expect(envelope['@_xmlns:soap']).toBe('http://schemas.xmlsoap.org/soap/envelope/');
      expect(envelope['soap:Body']['soap:Fault']).toEqual({
        faultcode: `soap:${code}`,
        faultstring: 'what went wrong',
      });
    },
  );

  it('escapes markup and replaces characters XML cannot carry', () => {
    const xml = soapFaultEnvelope(new SoapFault('Client', 'bad <name> & "x"\u0001\uD800'));
    expect(xml).toContain('<faultstring>bad &lt;name&gt; &amp; "x"\uFFFD\uFFFD</faultstring>');
  });

  it('is an Error with its code', () => {
    const fault = new SoapFault('Server', 'm');
    expect(fault).toBeInstanceOf(Error);
    expect([fault.code, fault.message, fault.name]).toEqual(['Server', 'm', 'SoapFault']);
  });
});
