import { parse as parseContentType } from 'content-type';
import { mkdtemp, rm, unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { Base64Decoder, Base64Error } from './base64-decoder';
import { EnvelopeReader, type EnvelopeContent } from './envelope-reader';
import { FileSpool } from './file-spool';
import {
  MultipartSplitter,
  MultipartSyntaxError,
  type PartHeaders,
  type PartSink,
} from './multipart-related';
import { SoapFault } from './soap-fault';
import { bareContentId } from './xop';

/** A payload's bytes, spooled to a temp file (never held whole in memory). */
export interface SoapPayload {
  name: string;
  contentType: string;
  path: string;
  size: number;
}

export interface SoapProcessCall {
  applicationName: string;
  /** The priority element's text; null: none. */
  priority?: string | null;
  parameters: Array<{ name: string; value: string }>;
  payloads: SoapPayload[];
}

export interface SoapRequestLimits {
  /** Body bytes, counted as they arrive (MTOM framing and base64 text included). */
  maxRequestBytes: number;
  maxPayloads: number;
  maxParameters: number;
  /** Where the request's temp directory is made; the OS temp directory by default. */
  tempDir?: string;
}

export interface ReceivedSoapRequest {
  /** The SOAPAction header without its quotes; undefined when absent. */
  soapAction: string | undefined;
  /** The first child element of soap:Body. */
  operation: { namespace: string; localName: string };
  /** Null unless the operation element is {urn:svc:soap:types}job. */
  call: SoapProcessCall | null;
  /** Removes the temp files; the caller calls it when done with the payloads. */
  cleanup(): Promise<void>;
}

type RequestFormat =
  { kind: 'plain' } | { kind: 'mtom'; boundary: string; start: string | undefined };

/**
 * Reads a SOAP 1.1 request, plain (`text/xml`, payload data inline base64) or MTOM
 * (`multipart/related; type="application/xop+xml"`), streaming: attachments and decoded
 * inline data go to temp files as they arrive, and the input is paused while a file
 * catches up. Every problem with the request is a SoapFault, and no temp file outlives a
 * fault. On a fault the rest of the body is left unread: answer with `Connection: close`.
 */
export async function readSoapRequest(
  req: IncomingMessage,
  limits: SoapRequestLimits,
): Promise<ReceivedSoapRequest> {
  const format = requestFormat(req);
  const declaredLength = Number(req.headers['content-length']);
  if (Number.isFinite(declaredLength) && declaredLength > limits.maxRequestBytes) {
    throw tooLarge(limits);
  }
  let directory: string;
  try {
    directory = await mkdtemp(join(limits.tempDir ?? tmpdir(), 'svc-soap-'));
  } catch (error) {
    throw asFault(error);
  }
  const reading = new RequestReading(directory, limits);
  try {
    const content = await reading.read(req, format);
    const call = content.job ? await reading.resolveCall(content) : null;
    await reading.finish();
    return {
      soapAction: unquote(req.headers.soapaction),
      operation: content.operation,
      call,
      cleanup: () => rm(directory, { recursive: true, force: true }),
    };
  } catch (error) {
    // Removing the files must not hide the fault, so its own failure is ignored.
    await reading
      .abandon()
      .then(() => rm(directory, { recursive: true, force: true }))
      .catch(() => undefined);
    throw asFault(error);
  }
}

function requestFormat(req: IncomingMessage): RequestFormat {
  const header = req.headers['content-type'];
  if (!header) {
    throw new SoapFault('Client', 'the request has no Content-Type; send text/xml or MTOM');
  }
  let type: string;
  let parameters: Record<string, string>;
  try {
    ({ type, parameters } = parseContentType(header));
  } catch {
    throw new SoapFault('Client', `the Content-Type '${header}' cannot be parsed`);
  }
  const encoding = req.headers['content-encoding'];
  if (encoding && encoding.toLowerCase() !== 'identity') {
    throw new SoapFault('Client', `the Content-Encoding '${encoding}' is not supported`);
  }
  switch (type) {
    case 'text/xml':
      checkCharset(parameters.charset);
      return { kind: 'plain' };
    case 'application/soap+xml':
      throw new SoapFault(
        'VersionMismatch',
        'application/soap+xml is SOAP 1.2; the service speaks SOAP 1.1 (text/xml or MTOM)',
      );
    case 'multipart/related': {
      if (parameters.type?.toLowerCase() !== 'application/xop+xml') {
        throw new SoapFault(
          'Client',
          'a multipart/related request must have type="application/xop+xml" (MTOM)',
        );
      }
      if (!parameters.boundary) {
        throw new SoapFault('Client', 'the multipart/related Content-Type has no boundary');
      }
      return { kind: 'mtom', boundary: parameters.boundary, start: parameters.start };
    }
    default:
      throw new SoapFault(
        'Client',
        `the Content-Type '${type}' is not accepted; send text/xml or multipart/related; type="application/xop+xml"`,
      );
  }
}

/** Only UTF-8 is read (WS-I allows UTF-16 too; no SOAP stack we know of sends it). */
function checkCharset(charset: string | undefined): void {
  if (charset && !/^utf-?8$/i.test(charset)) {
    throw new SoapFault('Client', `the charset '${charset}' is not supported; send UTF-8`);
  }
}

/** The state of one request being read: its temp files and the parsers feeding them. */
class RequestReading {
  private readonly spools: FileSpool[] = [];
  /** MTOM attachments by bare Content-ID. */
  private readonly attachments = new Map<string, FileSpool>();
  private readonly referenced = new Set<FileSpool>();
  private received = 0;

  constructor(
    private readonly directory: string,
    private readonly limits: SoapRequestLimits,
  ) {}

  async read(req: IncomingMessage, format: RequestFormat): Promise<EnvelopeContent> {
    const envelope = new EnvelopeReader(this.limits, () => this.newSpool('payload'));
    if (format.kind === 'plain') {
      const text = new StringDecoder('utf8');
      await this.pump(req, (chunk) => envelope.write(text.write(chunk)));
      envelope.write(text.end());
      return envelope.end();
    }
    let content: EnvelopeContent | undefined;
    let parts = 0;
    let rootSeen = false;
    const start = format.start === undefined ? undefined : bareContentId(format.start);
    const splitter = new MultipartSplitter(format.boundary, (headers) => {
      // The root part plus one attachment per payload is the most a valid request needs.
      if (++parts > this.limits.maxPayloads + 1) {
        throw new SoapFault(
          'Client',
          `the request holds more than ${this.limits.maxPayloads + 1} MIME parts`,
        );
      }
      const contentId = headers.has('content-id')
        ? bareContentId(headers.get('content-id') as string)
        : undefined;
      const isRoot = !rootSeen && (start === undefined || contentId === start);
      if (isRoot) {
        rootSeen = true;
        return rootSink(headers, envelope, (result) => (content = result));
      }
      return this.attachmentSink(contentId, headers);
    });
    await this.pump(req, (chunk) => splitter.write(chunk));
    splitter.end();
    if (!rootSeen) {
      throw new SoapFault(
        'Client',
        `the MTOM request has no root part (start '${format.start ?? ''}')`,
      );
    }
    return content as EnvelopeContent;
  }

  /** Payloads with their files, once every part has arrived and every file is flushed. */
  async resolveCall(content: EnvelopeContent): Promise<SoapProcessCall> {
    const job = content.job as NonNullable<EnvelopeContent['job']>;
    await Promise.all(this.spools.map((spool) => spool.end()));
    const payloads = job.payloads.map((payload): SoapPayload => {
      let spool: FileSpool;
      if (payload.data.kind === 'inline') {
        spool = payload.data.spool;
      } else {
        const attachment = this.attachments.get(payload.data.contentId);
        if (!attachment) {
          throw new SoapFault(
            'Client',
            `payload '${payload.name}' refers to cid:${payload.data.contentId}, which is not a part of the request`,
          );
        }
        spool = attachment;
      }
      this.referenced.add(spool);
      return {
        name: payload.name,
        contentType: payload.contentType,
        path: spool.path,
        size: spool.size,
      };
    });
    return {
      applicationName: job.applicationName.trim(),
      priority: job.priority,
      parameters: job.parameters,
      payloads,
    };
  }

  /** Flushes the files and removes the attachments no payload refers to. */
  async finish(): Promise<void> {
    await Promise.all(this.spools.map((spool) => spool.end()));
    await Promise.all(
      this.spools.filter((spool) => !this.referenced.has(spool)).map((spool) => unlink(spool.path)),
    );
  }

  async abandon(): Promise<void> {
    await Promise.all(this.spools.map((spool) => spool.abandon()));
  }

  private newSpool(prefix: string): FileSpool {
    const spool = new FileSpool(join(this.directory, `${prefix}-${this.spools.length + 1}`));
    this.spools.push(spool);
    return spool;
  }

  private attachmentSink(contentId: string | undefined, headers: PartHeaders): PartSink {
    if (contentId === undefined) {
      // Nothing can refer to a part without a Content-ID: its bytes are dropped.
      return { write: () => undefined, end: () => undefined };
    }
    if (this.attachments.has(contentId)) {
      throw new SoapFault('Client', `two MIME parts have the Content-ID <${contentId}>`);
    }
    const spool = this.newSpool('attachment');
    this.attachments.set(contentId, spool);
    const encoding = (headers.get('content-transfer-encoding') ?? 'binary').toLowerCase();
    switch (encoding) {
      case 'binary':
      case '8bit':
      case '7bit':
        return { write: (chunk) => spool.write(chunk), end: () => undefined };
      case 'base64': {
        const decoder = new Base64Decoder();
        return {
          write: (chunk) => spool.write(decoder.write(chunk.toString('latin1'))),
          end: () => spool.write(decoder.end()),
        };
      }
      default:
        throw new SoapFault(
          'Client',
          `the Content-Transfer-Encoding '${encoding}' is not supported`,
        );
    }
  }

  /**
   * Feeds the body to `consume` chunk by chunk. `consume` is synchronous; after each chunk
   * the input is paused until every file has drained, so memory stays at a few chunks.
   */
  private pump(req: IncomingMessage, consume: (chunk: Buffer) => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (error?: Error): void => {
        if (settled) {
          return;
        }
        settled = true;
        req.off('data', onData);
        req.off('end', onEnd);
        req.off('error', onError);
        req.off('close', onClose);
        if (error === undefined) {
          resolve();
        } else {
          // Stop reading; the rest of the body stays unread.
          req.pause();
          reject(error);
        }
      };
      const onData = (chunk: Buffer): void => {
        this.received += chunk.length;
        if (this.received > this.limits.maxRequestBytes) {
          settle(tooLarge(this.limits));
          return;
        }
        try {
          consume(chunk);
        } catch (error) {
          settle(toError(error));
          return;
        }
        const waits = this.spools
          .map((spool) => spool.drained())
          .filter((wait) => wait !== undefined);
        if (waits.length > 0) {
          req.pause();
          Promise.all(waits).then(
            () => {
              if (!settled) {
                req.resume();
              }
            },
            (error: unknown) => settle(toError(error)),
          );
        }
      };
      const onEnd = (): void => settle();
      const onError = (error: Error): void =>
        settle(new SoapFault('Client', `the request body could not be read: ${error.message}`));
      const onClose = (): void => {
        if (!req.complete) {
          settle(
            new SoapFault(
              'Client',
              'the client closed the connection before the end of the request',
            ),
          );
        }
      };
      // The connection may have gone while the temp directory was being made.
      if (req.destroyed || req.readableAborted) {
        settle(
          new SoapFault('Client', 'the client closed the connection before the end of the request'),
        );
        return;
      }
      if (req.readableEnded) {
        // Something (a body parser) consumed the body before: a wiring mistake, not the client's.
        settle(new SoapFault('Server', 'the request body was read before the SOAP reader got it'));
        return;
      }
      req.on('data', onData);
      req.on('end', onEnd);
      req.on('error', onError);
      req.on('close', onClose);
      req.resume();
    });
  }
}

/** The root part's bytes go to the envelope parser as UTF-8 text. */
function rootSink(
  headers: PartHeaders,
  envelope: EnvelopeReader,
  done: (content: EnvelopeContent) => void,
): PartSink {
  const header = headers.get('content-type');
  if (header) {
    let parsed: ReturnType<typeof parseContentType>;
    try {
      parsed = parseContentType(header);
    } catch {
      throw new SoapFault('Client', `the root part's Content-Type '${header}' cannot be parsed`);
    }
    if (
      parsed.type === 'application/xop+xml' &&
      parsed.parameters.type?.toLowerCase() === 'application/soap+xml'
    ) {
      throw new SoapFault(
        'VersionMismatch',
        'the root part is SOAP 1.2; the service speaks SOAP 1.1',
      );
    }
    if (parsed.type !== 'application/xop+xml' && parsed.type !== 'text/xml') {
      throw new SoapFault(
        'Client',
        `the root part's Content-Type '${parsed.type}' is not application/xop+xml`,
      );
    }
    checkCharset(parsed.parameters.charset);
  }
  const text = new StringDecoder('utf8');
  return {
    write: (chunk) => envelope.write(text.write(chunk)),
    end: () => {
      envelope.write(text.end());
      done(envelope.end());
    },
  };
}

function unquote(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) {
    return undefined;
  }
  const trimmed = value.trim();
  return trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"')
    ? trimmed.slice(1, -1)
    : trimmed;
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error('unknown error');
}

function tooLarge(limits: SoapRequestLimits): SoapFault {
  return new SoapFault('Client', `the request is larger than ${limits.maxRequestBytes} bytes`);
}

function asFault(error: unknown): SoapFault {
  if (error instanceof SoapFault) {
    return error;
  }
  if (error instanceof MultipartSyntaxError) {
    return new SoapFault('Client', `malformed MTOM request: ${error.message}`);
  }
  if (error instanceof Base64Error) {
    return new SoapFault('Client', `an attachment holds ${error.message}`);
  }
  // A temp file could not be written: the service's problem, not the client's.
  const reason = error instanceof Error ? error.message : 'unknown error';
  return new SoapFault('Server', `the request could not be stored: ${reason}`);
}
