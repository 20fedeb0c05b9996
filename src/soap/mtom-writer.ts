import { randomBytes, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { XOP_NAMESPACE, hrefForContentId } from './xop';
import { xmlAttributeValue } from '../common/representation/xml-text';

/** One binary part of an MTOM answer; `open` is called when its turn comes, not before. */
export interface MtomAttachment {
  /** Bare Content-ID (without angle brackets), e.g. from newContentId(). */
  contentId: string;
  contentType: string;
  open(): Readable | Promise<Readable>;
}

/** The element content that points at an attachment (an `xop:Include` with a `cid:` href). */
export function xopInclude(contentId: string): string {
  return `<xop:Include xmlns:xop="${XOP_NAMESPACE}" href="${xmlAttributeValue(hrefForContentId(contentId))}"/>`;
}

/** A unique Content-ID for an attachment or the root part. */
export function newContentId(): string {
  return `${randomUUID()}@svc`;
}

/** An MTOM answer: its headers, and its body to stream. */
export interface MtomAnswer {
  headers: Record<string, string>;
  /**
   * The multipart/related body, read lazily (an attachment is opened when its turn comes, and
   * read as fast as the client takes it). Destroying it (the client has gone) closes the
   * attachment being read; it fails if an attachment cannot be opened or read, which cuts the
   * answer: the client then sees a truncated body rather than a complete-looking one.
   */
  body: Readable;
}

/**
 * An MTOM answer: a multipart/related body whose root part is the envelope (application/xop+xml)
 * followed by each attachment. No Content-Length, so the response is chunked. The boundary is
 * 192 random bits; the data is not scanned for it, since a collision is as likely as guessing
 * the bits.
 */
export function mtomAnswer(envelopeXml: string, attachments: MtomAttachment[]): MtomAnswer {
  for (const attachment of attachments) {
    headerValue(attachment.contentType);
    headerValue(attachment.contentId);
  }
  const boundary = `MIMEBoundary_${randomBytes(24).toString('hex')}`;
  const rootId = newContentId();
  const rootHead =
    `--${boundary}\r\n` +
    'Content-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n' +
    'Content-Transfer-Encoding: binary\r\n' +
    `Content-ID: <${rootId}>\r\n\r\n`;
  async function* parts(): AsyncGenerator<Buffer> {
    yield Buffer.from(rootHead + envelopeXml, 'utf8');
    for (const attachment of attachments) {
      yield Buffer.from(
        `\r\n--${boundary}\r\n` +
          `Content-Type: ${attachment.contentType}\r\n` +
          'Content-Transfer-Encoding: binary\r\n' +
          `Content-ID: <${attachment.contentId}>\r\n\r\n`,
        'latin1',
      );
      const source = await attachment.open();
      try {
        for await (const chunk of source as AsyncIterable<Buffer | string>) {
          yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        }
      } finally {
        // Also when the body is destroyed midway: the attachment's file is closed.
        source.destroy();
      }
    }
    yield Buffer.from(`\r\n--${boundary}--\r\n`, 'latin1');
  }
  return {
    headers: {
      'Content-Type': `multipart/related; type="application/xop+xml"; boundary="${boundary}"; start="<${rootId}>"; start-info="text/xml"`,
      'MIME-Version': '1.0',
    },
    body: Readable.from(parts(), { objectMode: false }),
  };
}

/** Header values are ours, but a CR or LF in one would end the part header early. */
function headerValue(value: string): string {
  if (/[\r\n]/.test(value)) {
    throw new Error(`an MTOM part header value holds a line break: ${JSON.stringify(value)}`);
  }
  return value;
}
