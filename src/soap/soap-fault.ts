import { create } from 'xmlbuilder2';

export const SOAP_ENVELOPE_NAMESPACE = 'http://schemas.xmlsoap.org/soap/envelope/';
/** The SOAP 1.2 envelope namespace: recognised only to answer VersionMismatch. */
export const SOAP12_ENVELOPE_NAMESPACE = 'http://www.w3.org/2003/05/soap-envelope';

export type SoapFaultCode = 'Client' | 'Server' | 'VersionMismatch';

/** A SOAP 1.1 fault to answer; `message` becomes the faultstring, so it is written for the client. */
export class SoapFault extends Error {
  constructor(
    readonly code: SoapFaultCode,
    message: string,
  ) {
    super(message);
    this.name = 'SoapFault';
  }
}

/**
 * The SOAP 1.1 Fault envelope (faultcode soap:<code>, faultstring) as a string; the caller
 * sends it with HTTP 500 and `text/xml; charset=utf-8`, as WS-I Basic Profile 1.1 requires.
 */
export function soapFaultEnvelope(fault: SoapFault): string {
  const document = create({ version: '1.0', encoding: 'UTF-8' })
    .ele(SOAP_ENVELOPE_NAMESPACE, 'soap:Envelope')
    .ele(SOAP_ENVELOPE_NAMESPACE, 'soap:Body')
    .ele(SOAP_ENVELOPE_NAMESPACE, 'soap:Fault');
  // faultcode and faultstring are unqualified in SOAP 1.1.
  document.ele('faultcode').txt(`soap:${fault.code}`);
  document.ele('faultstring').txt(xmlSafe(fault.message));
  return document.end({ prettyPrint: false });
}

/** Characters XML 1.0 cannot carry (control characters, lone surrogates) become U+FFFD. */
function xmlSafe(text: string): string {
  return text.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD');
}
