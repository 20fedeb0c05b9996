import { Readable } from 'node:stream';
import { lookup } from 'mime-types';
import * as yauzl from 'yauzl';
import { ResultEntity } from '../results/result.entity';
import { ResultRepository } from '../results/result.repository';
import { MtomAttachment, newContentId, xopInclude } from './mtom-writer';
import { SOAP_ENVELOPE_NAMESPACE } from './soap-fault';
import { SOAP_TYPES_NAMESPACE } from './soap-request-reader';

/** A job's result as the SOAP answer needs it. */
export interface StoredResult {
  applicationName: string;
  jobId: string;
  success: boolean;
  /** The data's extension: zip, txt, xml, json. */
  type: string;
  /** Its full content type, e.g. `text/plain; charset=utf-8`. */
  contentType: string;
  data: Buffer;
}

/** One `payload` of the answer: described in the envelope, its bytes an MTOM attachment. */
export interface AnswerPayload {
  name: string;
  contentType: string;
  attachment: MtomAttachment;
}

/** Reads a stored result. The one place that does, so that it can become a stream. */
export async function loadResult(
  results: ResultRepository,
  applicationName: string,
  jobId: string,
): Promise<StoredResult | null> {
  const entity: ResultEntity | null = await results.findWithData(applicationName, jobId);
  return entity;
}

function mediaType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

function escapeXml(text: string): string {
  // Characters XML 1.0 cannot carry (a control character in an R-made file name) become U+FFFD.
  return text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

function bufferAttachment(contentType: string, data: Buffer): MtomAttachment {
  return { contentId: newContentId(), contentType, open: () => Readable.from([data]) };
}

/** The files of a result ZIP, each an attachment that inflates its entry when it is written. */
async function zipEntryPayloads(zip: Buffer): Promise<AnswerPayload[]> {
  const zipfile = await yauzl.fromBufferPromise(zip, { lazyEntries: true });
  const payloads: AnswerPayload[] = [];
  for await (const entry of zipfile.eachEntry()) {
    if (entry.fileName.endsWith('/')) {
      continue;
    }
    const contentType = lookup(entry.fileName) || 'application/octet-stream';
    payloads.push({
      name: entry.fileName,
      contentType,
      attachment: {
        contentId: newContentId(),
        contentType,
        open: () => zipfile.openReadStreamPromise(entry),
      },
    });
  }
  return payloads;
}

/**
 * The answer's payloads (SPEC §7): a job sent as one ZIP gets its result ZIP back; a successful
 * multi-file job otherwise gets one payload per result file; a function call its document; a
 * failure its error text (or a function call's error document).
 */
export async function answerPayloads(
  result: StoredResult,
  singleZip: boolean,
): Promise<AnswerPayload[]> {
  if (result.type === 'zip' && !singleZip) {
    const files = await zipEntryPayloads(result.data);
    // A job that wrote no file: its (empty) ZIP still makes the one payload the schema requires.
    if (files.length > 0) {
      return files;
    }
  }
  return [
    {
      name: `${result.jobId}.${result.type}`,
      contentType: mediaType(result.contentType),
      attachment: bufferAttachment(result.contentType, result.data),
    },
  ];
}

/** The SOAP envelope of a `result`, its data as XOP references to the attachments. */
export function resultEnvelope(result: StoredResult, payloads: AnswerPayload[]): string {
  const payloadElements = payloads
    .map(
      (payload) =>
        `<payload name="${escapeXml(payload.name)}" contentType="${escapeXml(payload.contentType)}">` +
        `<data>${xopInclude(payload.attachment.contentId)}</data></payload>`,
    )
    .join('');
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<soap:Envelope xmlns:soap="${SOAP_ENVELOPE_NAMESPACE}"><soap:Body>` +
    `<result xmlns="${SOAP_TYPES_NAMESPACE}">` +
    `<applicationName>${escapeXml(result.applicationName)}</applicationName>` +
    `<jobId>${escapeXml(result.jobId)}</jobId>` +
    `<success>${result.success ? 'true' : 'false'}</success>` +
    payloadElements +
    '</result></soap:Body></soap:Envelope>'
  );
}
