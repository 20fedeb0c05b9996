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

  it('gives a reader back text that looks like an entity as it was written', () => {
    // An R error message can say `&amp;` or `&lt;` itself; a parser must not turn it into `&`.
    const message = 'x &amp; y &lt; z &#60; &unknown; & <';
    const xml = soapFaultEnvelope(new SoapFault('Server', message));
    const parsed = new XMLParser({ processEntities: true, htmlEntities: false }).parse(xml);
    expect(parsed['soap:Envelope']['soap:Body']['soap:Fault'].faultstring).toBe(message);
  });

  it('is an Error with its code', () => {
    const fault = new SoapFault('Server', 'm');
    expect(fault).toBeInstanceOf(Error);
    expect([fault.code, fault.message, fault.name]).toEqual(['Server', 'm', 'SoapFault']);
  });
});
