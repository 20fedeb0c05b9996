import { xmlText } from '../common/representation/xml-text';

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
 * The message is often R's: every character of it reaches the client as it was.
 */
export function soapFaultEnvelope(fault: SoapFault): string {
  // faultcode and faultstring are unqualified in SOAP 1.1.
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<soap:Envelope xmlns:soap="${SOAP_ENVELOPE_NAMESPACE}"><soap:Body><soap:Fault>` +
    `<faultcode>soap:${fault.code}</faultcode>` +
    `<faultstring>${xmlText(fault.message)}</faultstring>` +
    '</soap:Fault></soap:Body></soap:Envelope>'
  );
}
