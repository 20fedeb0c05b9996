import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { lookup } from 'mime-types';
import { openZip, ZipArchive, zipEntryName } from '../common/zip-reader';
import { ResultDataSource, ResultRepository } from '../results/result.repository';
import { MtomAttachment, newContentId, xopInclude } from './mtom-writer';
import { SOAP_ENVELOPE_NAMESPACE } from './soap-fault';
import { SOAP_TYPES_NAMESPACE } from './envelope-reader';
import { mediaType } from '../common/media-type';
import { xmlAttributeValue, xmlText } from '../common/representation/xml-text';

/** A job's result as the SOAP answer needs it: its metadata, and its data as a stream. */
export type StoredResult = Pick<
  ResultDataSource,
  'applicationName' | 'jobId' | 'success' | 'type' | 'contentType' | 'open'
>;

/** One `payload` of the answer: described in the envelope, its bytes an MTOM attachment. */
export interface AnswerPayload {
  name: string;
  contentType: string;
  attachment: MtomAttachment;
}

/** The answer's payloads, and what to release once they have been sent. */
export interface AnswerPayloads {
  payloads: AnswerPayload[];
  dispose(): Promise<void>;
}

/** Finds a stored result; its data is read only when an attachment is sent. */
export async function loadResult(
  results: ResultRepository,
  applicationName: string,
  jobId: string,
): Promise<StoredResult | null> {
  return results.findDataSource(applicationName, jobId);
}

/**
 * The files of a result ZIP, each an attachment that inflates its entry when it is sent. The ZIP
 * is streamed to a temporary file first: its directory is at the end, so it cannot be read as a
 * stream, and the result may be far larger than memory should hold.
 */
async function zipEntryPayloads(result: StoredResult, tempDir: string): Promise<AnswerPayloads> {
  const directory = await mkdtemp(join(tempDir, 'svc-soap-result-'));
  let zipfile: ZipArchive | undefined;
  const dispose = async () => {
    zipfile?.close();
    await rm(directory, { recursive: true, force: true });
  };
  try {
    const path = join(directory, 'result.zip');
    await pipeline(result.open(), createWriteStream(path));
    const opened = await openZip({ path });
    zipfile = opened;
    const payloads: AnswerPayload[] = [];
    for await (const entry of opened.eachEntry()) {
      // The result archive's names are ones yazl wrote: relative, forward slashes only.
      const name = zipEntryName(entry);
      if (name.endsWith('/')) {
        continue;
      }
      const contentType = lookup(name) || 'application/octet-stream';
      payloads.push({
        name,
        contentType,
        attachment: {
          contentId: newContentId(),
          contentType,
          open: () => opened.openReadStreamPromise(entry),
        },
      });
    }
    return { payloads, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * The answer's payloads (SPEC §7): a job sent as one ZIP gets its result ZIP back; a successful
 * multi-file job otherwise gets one payload per result file; a function call its document; a
 * failure its error text (or a function call's error document).
 */
export async function answerPayloads(
  result: StoredResult,
  singleZip: boolean,
  tempDir: string = tmpdir(),
): Promise<AnswerPayloads> {
  if (result.type === 'zip' && !singleZip) {
    const files = await zipEntryPayloads(result, tempDir);
    // A job that wrote no file: its (empty) ZIP still makes the one payload the schema requires.
    if (files.payloads.length > 0) {
      return files;
    }
    await files.dispose();
  }
  return {
    payloads: [
      {
        name: `${result.jobId}.${result.type}`,
        contentType: mediaType(result.contentType),
        attachment: {
          contentId: newContentId(),
          contentType: result.contentType,
          open: () => result.open(),
        },
      },
    ],
    dispose: () => Promise.resolve(),
  };
}

/** The SOAP envelope of a `result`, its data as XOP references to the attachments. */
export function resultEnvelope(result: StoredResult, payloads: AnswerPayload[]): string {
  const payloadElements = payloads
    .map(
      (payload) =>
        `<payload name="${xmlAttributeValue(payload.name)}" contentType="${xmlAttributeValue(payload.contentType)}">` +
        `<data>${xopInclude(payload.attachment.contentId)}</data></payload>`,
    )
    .join('');
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<soap:Envelope xmlns:soap="${SOAP_ENVELOPE_NAMESPACE}"><soap:Body>` +
    `<result xmlns="${SOAP_TYPES_NAMESPACE}">` +
    `<applicationName>${xmlText(result.applicationName)}</applicationName>` +
    `<jobId>${xmlText(result.jobId)}</jobId>` +
    `<success>${result.success ? 'true' : 'false'}</success>` +
    payloadElements +
    '</result></soap:Body></soap:Envelope>'
  );
}
