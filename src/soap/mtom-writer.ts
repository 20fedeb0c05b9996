import { randomBytes, randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { XOP_NAMESPACE, hrefForContentId } from './xop';

/** One binary part of an MTOM answer; `open` is called when its turn comes, not before. */
export interface MtomAttachment {
  /** Bare Content-ID (without angle brackets), e.g. from newContentId(). */
  contentId: string;
  contentType: string;
  open(): Readable | Promise<Readable>;
}

/** The element content that points at an attachment (an `xop:Include` with a `cid:` href). */
export function xopInclude(contentId: string): string {
  return `<xop:Include xmlns:xop="${XOP_NAMESPACE}" href="${escapeAttribute(hrefForContentId(contentId))}"/>`;
}

/** A unique Content-ID for an attachment or the root part. */
export function newContentId(): string {
  return `${randomUUID()}@svc`;
}

/**
 * Sends an MTOM answer: a multipart/related body whose root part is the envelope
 * (application/xop+xml) followed by each attachment, streamed with backpressure. No
 * Content-Length, so the response is chunked. The boundary is 192 random bits; the data is
 * not scanned for it, since a collision is as likely as guessing the bits.
 * Resolves when the answer is sent, or when the client has gone (the attachment being
 * read is then closed); rejects, after destroying the response, if an attachment cannot
 * be read: the client then sees a truncated body rather than a complete-looking answer.
 */
export async function writeMtomResponse(
  res: ServerResponse,
  status: number,
  envelopeXml: string,
  attachments: MtomAttachment[],
): Promise<void> {
  for (const attachment of attachments) {
    headerValue(attachment.contentType);
    headerValue(attachment.contentId);
  }
  const boundary = `MIMEBoundary_${randomBytes(24).toString('hex')}`;
  const rootId = newContentId();
  res.statusCode = status;
  res.setHeader(
    'Content-Type',
    `multipart/related; type="application/xop+xml"; boundary="${boundary}"; start="<${rootId}>"; start-info="text/xml"`,
  );
  res.setHeader('MIME-Version', '1.0');
  res.removeHeader('Content-Length');

  const rootHead =
    `--${boundary}\r\n` +
    'Content-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n' +
    'Content-Transfer-Encoding: binary\r\n' +
    `Content-ID: <${rootId}>\r\n\r\n`;
  if (!(await send(res, Buffer.from(rootHead + envelopeXml, 'utf8')))) {
    return;
  }
  for (const attachment of attachments) {
    const head =
      `\r\n--${boundary}\r\n` +
      `Content-Type: ${headerValue(attachment.contentType)}\r\n` +
      'Content-Transfer-Encoding: binary\r\n' +
      `Content-ID: <${headerValue(attachment.contentId)}>\r\n\r\n`;
    if (!(await send(res, Buffer.from(head, 'latin1')))) {
      return;
    }
    if (!(await sendAttachment(res, attachment))) {
      return;
    }
  }
  if (!(await send(res, Buffer.from(`\r\n--${boundary}--\r\n`, 'latin1')))) {
    return;
  }
  await new Promise<void>((resolve) => {
    res.end(resolve);
    res.once('close', resolve);
  });
}

/** Streams one attachment; false when the client has gone. */
async function sendAttachment(res: ServerResponse, attachment: MtomAttachment): Promise<boolean> {
  let source: Readable;
  try {
    source = await attachment.open();
  } catch (error) {
    res.destroy(asError(error));
    throw error;
  }
  try {
    // Leaving the loop early (client gone) destroys the source, which closes its file.
    for await (const chunk of source as AsyncIterable<Buffer | string>) {
      if (!(await send(res, typeof chunk === 'string' ? Buffer.from(chunk) : chunk))) {
        return false;
      }
    }
    return true;
  } catch (error) {
    res.destroy(asError(error));
    throw error;
  }
}

/** Writes a chunk and waits for the socket to take it when it is behind; false if the client went. */
async function send(res: ServerResponse, chunk: Buffer): Promise<boolean> {
  if (res.destroyed || res.writableEnded) {
    return false;
  }
  if (res.write(chunk)) {
    return true;
  }
  return new Promise<boolean>((resolve) => {
    const onDrain = (): void => settle(true);
    const onClose = (): void => settle(false);
    const settle = (open: boolean): void => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(open && !res.destroyed);
    };
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}

/** Header values are ours, but a CR or LF in one would end the part header early. */
function headerValue(value: string): string {
  if (/[\r\n]/.test(value)) {
    throw new Error(`an MTOM part header value holds a line break: ${JSON.stringify(value)}`);
  }
  return value;
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
