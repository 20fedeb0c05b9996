import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Test } from '@nestjs/testing';
import { XMLParser } from 'fast-xml-parser';
import { SoapModule } from 'nestjs-soap';
import type { Client, IOptions } from 'soap';
import { validateXML, type XMLFileInfo } from 'xmllint-wasm';
import { Answer, request } from './rest-client';

export const SOAP_PATH = '/svc/api/soap/mtom-jobs';
export const TYPES_NS = 'urn:svc:soap:types';
export const ENVELOPE_NS = 'http://schemas.xmlsoap.org/soap/envelope/';
export const XOP_NS = 'http://www.w3.org/2004/08/xop/include';
export const PROCESS_ACTION = 'urn:svc:soap:Process';
const CLIENT_NAME = 'SVC_SOAP';

const WSDL_DIR = resolve(__dirname, '../../wsdl');

/**
 * A client generated at run time from the served WSDL URL by node-soap, made the way a NestJS
 * application gets one: nestjs-soap's SoapModule in a (test) module. Answers' MTOM attachments
 * are parsed (`parseReponseAttachments`, node-soap's spelling).
 */
export async function generatedClient(
  wsdlUrl: string,
  options: IOptions = {},
  basicAuth?: { username: string; password: string },
): Promise<Client> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      SoapModule.register({
        clientName: CLIENT_NAME,
        uri: wsdlUrl,
        clientOptions: { parseReponseAttachments: true, ...options },
        auth: basicAuth && { type: 'basic', ...basicAuth },
      }),
    ],
  }).compile();
  const client = moduleRef.get<Client | null>(CLIENT_NAME);
  await moduleRef.close();
  if (!client) {
    throw new Error(`nestjs-soap could not build a client from ${wsdlUrl} (see its log line)`);
  }
  return client;
}

export interface MimePart {
  headers: Record<string, string>;
  body: Buffer;
}

export interface MtomAnswerPart extends MimePart {
  contentId: string;
}

function parameter(contentType: string, name: string): string | undefined {
  const match = new RegExp(`;\\s*${name}\\s*=\\s*(?:"([^"]*)"|([^;\\s]+))`, 'i').exec(contentType);
  return match ? (match[1] ?? match[2]) : undefined;
}

/** Splits a multipart body (RFC 2046), independently of the service's own reader. */
export function parseMultipart(contentType: string, body: Buffer): MimePart[] {
  const boundary = parameter(contentType, 'boundary');
  if (!boundary) {
    throw new Error(`no boundary in ${contentType}`);
  }
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: MimePart[] = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    let start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') {
      break;
    }
    start = body.indexOf('\r\n', start) + 2;
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), start);
    if (next < 0) {
      throw new Error('multipart body without a closing delimiter');
    }
    const part = body.subarray(start, next);
    const headerEnd = part.indexOf('\r\n\r\n');
    const headers: Record<string, string> = {};
    for (const line of part.subarray(0, headerEnd).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    parts.push({ headers, body: part.subarray(headerEnd + 4) });
    at = next + 2;
  }
  return parts;
}

/** An MTOM answer: the root part's XML and the attachments by Content-ID. */
export function readMtom(answer: Answer): {
  root: MimePart;
  envelope: string;
  attachments: Map<string, MimePart>;
} {
  const contentType = answer.headers.get('content-type') ?? '';
  const parts = parseMultipart(contentType, answer.body);
  const start = parameter(contentType, 'start');
  const idOf = (part: MimePart) => (part.headers['content-id'] ?? '').replace(/^<|>$/g, '');
  const root = start ? parts.find((part) => `<${idOf(part)}>` === start) : parts[0];
  if (!root) {
    throw new Error(`no root part ${start}`);
  }
  const attachments = new Map(parts.filter((p) => p !== root).map((p) => [idOf(p), p]));
  return { root, envelope: root.body.toString('utf8'), attachments };
}

/** The envelope with every xop:Include replaced by its attachment in base64 (the XOP infoset). */
export function inlineXop(envelope: string, attachments: Map<string, MimePart>): string {
  return envelope.replace(
    /<(?:[\w.-]+:)?Include\b[^>]*?href="cid:([^"]+)"[^>]*\/>/g,
    (_include, cid: string) => {
      const part = attachments.get(decodeURIComponent(cid));
      if (!part) {
        throw new Error(`no attachment for cid:${cid}`);
      }
      return part.body.toString('base64');
    },
  );
}

/** Validation errors of a SOAP 1.1 envelope; a `result` in its body is checked against soap-data.xsd. */
export async function envelopeErrors(xml: string): Promise<string[]> {
  const load = async (fileName: string, dir: string): Promise<XMLFileInfo> => ({
    fileName,
    contents: await readFile(join(dir, fileName), 'utf8'),
  });
  const result = await validateXML({
    xml: { fileName: 'envelope.xml', contents: xml },
    schema: await load('soap-envelope.xsd', __dirname),
    preload: await Promise.all([load('soap-data.xsd', WSDL_DIR), load('xmime.xsd', WSDL_DIR)]),
  });
  return result.errors.map((error) => error.rawMessage);
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '',
  removeNSPrefix: true,
  parseTagValue: false,
  isArray: (name) => name === 'payload',
});

export interface ResultPayload {
  name: string;
  contentType: string;
  data: Buffer;
}

export interface ParsedResult {
  applicationName: string;
  jobId: string;
  success: boolean;
  payloads: ResultPayload[];
}

type Parsed = Record<string, Record<string, unknown>>;

/** The `result` of an answer whose XOP includes are already inlined. */
export function resultOf(envelope: string): ParsedResult {
  const body = (parser.parse(envelope) as Parsed).Envelope.Body as Parsed;
  const result = body.result as unknown as {
    applicationName: string;
    jobId: string;
    success: string;
    payload: Array<{ name: string; contentType: string; data: string }>;
  };
  return {
    applicationName: result.applicationName,
    jobId: result.jobId,
    success: result.success === 'true',
    payloads: result.payload.map((p) => ({
      name: p.name,
      contentType: p.contentType,
      data: Buffer.from(p.data, 'base64'),
    })),
  };
}

export function faultOf(envelope: string): { faultcode: string; faultstring: string } {
  const body = (parser.parse(envelope) as Parsed).Envelope.Body as Parsed;
  return body.Fault as unknown as { faultcode: string; faultstring: string };
}

export interface RequestPayload {
  name: string;
  contentType: string;
  data: Buffer | string;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/"/g, '&quot;');
}

/** A Process envelope; `dataOf` writes each payload's data element content. */
export function jobEnvelope(
  applicationName: string,
  payloads: RequestPayload[],
  parameters: Array<{ name: string; value: string }> = [],
  dataOf: (payload: RequestPayload, index: number) => string = (payload) =>
    Buffer.from(payload.data).toString('base64'),
): string {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<soapenv:Envelope xmlns:soapenv="${ENVELOPE_NS}" xmlns:t="${TYPES_NS}"><soapenv:Body><t:job>` +
    `<t:applicationName>${escapeXml(applicationName)}</t:applicationName>` +
    parameters
      .map((p) => `<t:parameter name="${escapeXml(p.name)}" value="${escapeXml(p.value)}"/>`)
      .join('') +
    payloads
      .map(
        (payload, index) =>
          `<t:payload name="${escapeXml(payload.name)}" contentType="${escapeXml(payload.contentType)}">` +
          `<t:data>${dataOf(payload, index)}</t:data></t:payload>`,
      )
      .join('') +
    '</t:job></soapenv:Body></soapenv:Envelope>'
  );
}

/** A Process request in MTOM: each payload's data an xop:Include of a binary attachment. */
export function mtomJobRequest(
  applicationName: string,
  payloads: RequestPayload[],
  parameters: Array<{ name: string; value: string }> = [],
): { contentType: string; body: Buffer } {
  const boundary = 'uuid:test-boundary-4f1c';
  const cid = (index: number) => `payload-${index}@svc.test`;
  const envelope = jobEnvelope(
    applicationName,
    payloads,
    parameters,
    (_payload, index) =>
      `<xop:Include xmlns:xop="${XOP_NS}" href="cid:${encodeURIComponent(cid(index))}"/>`,
  );
  const chunks: Buffer[] = [
    Buffer.from(
      `--${boundary}\r\nContent-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n` +
        `Content-Transfer-Encoding: 8bit\r\nContent-ID: <root@svc.test>\r\n\r\n${envelope}\r\n`,
    ),
  ];
  payloads.forEach((payload, index) => {
    chunks.push(
      Buffer.from(
        `--${boundary}\r\nContent-Type: ${payload.contentType}\r\n` +
          `Content-Transfer-Encoding: binary\r\nContent-ID: <${cid(index)}>\r\n\r\n`,
      ),
      Buffer.from(payload.data),
      Buffer.from('\r\n'),
    );
  });
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return {
    contentType:
      `multipart/related; type="application/xop+xml"; start="<root@svc.test>"; ` +
      `start-info="text/xml"; boundary="${boundary}"`,
    body: Buffer.concat(chunks),
  };
}

/** POSTs a SOAP request as it is given; `soapAction` undefined: no SOAPAction header at all. */
export function postSoap(
  serviceUrl: string,
  body: string | Buffer,
  contentType = 'text/xml; charset=utf-8',
  soapAction: string | undefined = `"${PROCESS_ACTION}"`,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return request(`${serviceUrl}${SOAP_PATH}`, {
    method: 'POST',
    headers: {
      'Content-Type': contentType,
      ...(soapAction === undefined ? {} : { SOAPAction: soapAction }),
      ...headers,
    },
    body,
  });
}

/** A Process answer read whole: the envelope (XOP inlined), its validation errors and the result. */
export async function processAnswer(answer: Answer): Promise<{
  result: ParsedResult;
  errors: string[];
  attachments: Map<string, MimePart>;
  root: MimePart;
}> {
  if (answer.status !== 200) {
    throw new Error(`Process answered ${answer.status}: ${answer.text}`);
  }
  const { root, envelope, attachments } = readMtom(answer);
  const inlined = inlineXop(envelope, attachments);
  return { result: resultOf(inlined), errors: await envelopeErrors(inlined), attachments, root };
}

/** A fault answer: status 500 (or the given one), text/xml, a valid envelope; its code and string. */
export async function faultAnswer(
  answer: Answer,
): Promise<{ faultcode: string; faultstring: string; errors: string[] }> {
  return { ...faultOf(answer.text), errors: await envelopeErrors(answer.text) };
}

/** The generated `ProcessAsync` method, typed (node-soap adds operations as untyped members). */
export type ProcessAsync = (args: unknown, options?: object) => Promise<unknown[]>;

export function processMethod(client: Client): ProcessAsync {
  const method = (client as unknown as Record<string, unknown>).ProcessAsync;
  if (typeof method !== 'function') {
    throw new Error('the generated client has no ProcessAsync method');
  }
  return (method as ProcessAsync).bind(client);
}
