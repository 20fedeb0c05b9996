import * as sax from 'sax';
import { Base64Decoder, Base64Error } from './base64-decoder';
import type { FileSpool } from './file-spool';
import { SOAP12_ENVELOPE_NAMESPACE, SOAP_ENVELOPE_NAMESPACE, SoapFault } from './soap-fault';
import { XOP_NAMESPACE, contentIdFromHref } from './xop';

export const SOAP_TYPES_NAMESPACE = 'urn:svc:soap:types';

/** A payload's bytes: decoded inline base64 in a spool, or a reference to an MTOM part. */
export type PayloadData =
  { kind: 'inline'; spool: FileSpool } | { kind: 'include'; contentId: string };

export interface PayloadDraft {
  name: string;
  contentType: string;
  data: PayloadData;
}

export interface JobDraft {
  applicationName: string;
  /** The text of the optional priority element; null: none. */
  priority: string | null;
  parameters: Array<{ name: string; value: string }>;
  payloads: PayloadDraft[];
}

export interface EnvelopeContent {
  operation: { namespace: string; localName: string };
  /** Set when the operation element is `{urn:svc:soap:types}job`. */
  job: JobDraft | null;
}

export interface EnvelopeLimits {
  maxPayloads: number;
  maxParameters: number;
}

type Context =
  | 'envelope'
  | 'header'
  | 'body'
  | 'skipped'
  | 'job'
  | 'applicationName'
  | 'priority'
  | 'parameter'
  | 'payload'
  | 'data'
  | 'include';

/** sax's buffer limit (its MAX_BUFFER_LENGTH) for one attribute value. */
const MAX_ATTRIBUTE_LENGTH = 64 * 1024;

/** Longer text is not a priority (a whole number from -1000 to 1000). */
const MAX_PRIORITY_LENGTH = 32;

/** Longer names are not application names; the cap keeps a hostile text node out of memory. */
const MAX_APPLICATION_NAME_LENGTH = 1024;

interface OpenPayload {
  name: string;
  contentType: string;
  data?: PayloadData;
  decoder?: Base64Decoder;
}

/**
 * Reads a SOAP 1.1 envelope from text that arrives in pieces (sax emits long text nodes in
 * pieces too, unlike saxes, which gathers each whole), checks its structure, and decodes
 * inline base64 payload data into spools as it goes. Errors are SoapFaults.
 */
export class EnvelopeReader {
  private readonly parser: sax.SAXParser;
  private readonly stack: Context[] = [];
  private sawEnvelope = false;
  private sawHeader = false;
  private sawBody = false;
  private operation: EnvelopeContent['operation'] | undefined;
  private job: JobDraft | null = null;
  private applicationNames = 0;
  private payload: OpenPayload | undefined;

  constructor(
    private readonly limits: EnvelopeLimits,
    private readonly newSpool: () => FileSpool,
  ) {
    this.parser = sax.parser(true, { xmlns: true, trim: false, normalize: false });
    this.parser.onerror = (error) => {
      throw malformed(error);
    };
    this.parser.ondoctype = () => {
      throw new SoapFault('Client', 'a SOAP message must not contain a document type declaration');
    };
    this.parser.onopentag = (tag) => this.open(tag as sax.QualifiedTag);
    this.parser.onclosetag = () => this.close();
    this.parser.ontext = (text) => this.text(text);
    this.parser.oncdata = (text) => this.text(text);
  }

  /** Parses the next piece; errors in the XML throw as the handlers' SoapFaults. */
  write(text: string): void {
    this.parser.write(text);
  }

  /** Ends the document and returns what it holds; spools still need ending by the caller. */
  end(): EnvelopeContent {
    this.parser.close();
    if (!this.sawEnvelope) {
      throw new SoapFault('Client', 'the request holds no soap:Envelope');
    }
    if (!this.sawBody) {
      throw new SoapFault('Client', 'the soap:Envelope holds no soap:Body');
    }
    if (!this.operation) {
      throw new SoapFault('Client', 'the soap:Body is empty');
    }
    return { operation: this.operation, job: this.job };
  }

  private open(tag: sax.QualifiedTag): void {
    const context = this.childContext(tag);
    this.stack.push(context);
  }

  private childContext(tag: sax.QualifiedTag): Context {
    const parent = this.stack.at(-1);
    switch (parent) {
      case undefined:
        return this.openEnvelope(tag);
      case 'envelope':
        if (
          tag.uri === SOAP_ENVELOPE_NAMESPACE &&
          tag.local === 'Header' &&
          !this.sawHeader &&
          !this.sawBody
        ) {
          this.sawHeader = true;
          return 'header';
        }
        if (tag.uri === SOAP_ENVELOPE_NAMESPACE && tag.local === 'Body' && !this.sawBody) {
          this.sawBody = true;
          return 'body';
        }
        throw new SoapFault('Client', `unexpected element ${describe(tag)} in the soap:Envelope`);
      case 'header':
      case 'skipped':
        // Header entries are not interpreted (no header is defined for this service).
        return 'skipped';
      case 'body':
        if (this.operation) {
          throw new SoapFault('Client', 'the soap:Body holds more than one element');
        }
        this.operation = { namespace: tag.uri, localName: tag.local };
        if (tag.uri === SOAP_TYPES_NAMESPACE && tag.local === 'job') {
          this.job = { applicationName: '', priority: null, parameters: [], payloads: [] };
          return 'job';
        }
        return 'skipped';
      case 'job':
        return this.openJobChild(tag);
      case 'payload':
        return this.openData(tag);
      case 'data':
        return this.openInclude(tag);
      case 'applicationName':
      case 'priority':
      case 'parameter':
      case 'include':
        throw new SoapFault('Client', `unexpected element ${describe(tag)} in ${parent}`);
    }
  }

  private openEnvelope(tag: sax.QualifiedTag): Context {
    if (tag.local !== 'Envelope') {
      throw new SoapFault('Client', `the root element ${describe(tag)} is not a soap:Envelope`);
    }
    if (tag.uri === SOAP12_ENVELOPE_NAMESPACE) {
      throw new SoapFault(
        'VersionMismatch',
        'this is a SOAP 1.2 envelope; the service speaks SOAP 1.1 (namespace http://schemas.xmlsoap.org/soap/envelope/)',
      );
    }
    if (tag.uri !== SOAP_ENVELOPE_NAMESPACE) {
      throw new SoapFault('VersionMismatch', `the Envelope namespace '${tag.uri}' is not SOAP 1.1`);
    }
    this.sawEnvelope = true;
    return 'envelope';
  }

  private openJobChild(tag: sax.QualifiedTag): Context {
    const job = this.job as JobDraft;
    if (tag.uri === SOAP_TYPES_NAMESPACE) {
      switch (tag.local) {
        case 'applicationName':
          if (++this.applicationNames > 1) {
            throw new SoapFault('Client', 'the job holds more than one applicationName');
          }
          return 'applicationName';
        case 'priority':
          if (job.priority !== null) {
            throw new SoapFault('Client', 'the job holds more than one priority');
          }
          job.priority = '';
          return 'priority';
        case 'parameter': {
          const name = attribute(tag, 'name');
          const value = attribute(tag, 'value');
          if (name === undefined || value === undefined) {
            throw new SoapFault('Client', 'a parameter needs both a name and a value attribute');
          }
          if (value.length > MAX_ATTRIBUTE_LENGTH) {
            // sax faults on longer values only when they span its input pieces; this makes it certain.
            throw new SoapFault(
              'Client',
              `parameter '${name}' has a value longer than ${MAX_ATTRIBUTE_LENGTH} characters`,
            );
          }
          if (job.parameters.length >= this.limits.maxParameters) {
            throw new SoapFault(
              'Client',
              `the job holds more than ${this.limits.maxParameters} parameters`,
            );
          }
          job.parameters.push({ name, value });
          return 'parameter';
        }
        case 'payload': {
          const name = attribute(tag, 'name');
          const contentType = attribute(tag, 'contentType');
          if (!name || !contentType) {
            throw new SoapFault('Client', 'a payload needs a name and a contentType attribute');
          }
          if (job.payloads.length >= this.limits.maxPayloads) {
            throw new SoapFault(
              'Client',
              `the job holds more than ${this.limits.maxPayloads} payloads`,
            );
          }
          this.payload = { name, contentType };
          return 'payload';
        }
      }
    }
    throw new SoapFault('Client', `unexpected element ${describe(tag)} in the job`);
  }

  private openData(tag: sax.QualifiedTag): Context {
    const payload = this.payload as OpenPayload;
    if (
      tag.uri !== SOAP_TYPES_NAMESPACE ||
      tag.local !== 'data' ||
      payload.decoder ||
      payload.data
    ) {
      throw new SoapFault(
        'Client',
        `unexpected element ${describe(tag)} in payload '${payload.name}'`,
      );
    }
    payload.decoder = new Base64Decoder();
    return 'data';
  }

  private openInclude(tag: sax.QualifiedTag): Context {
    const payload = this.payload as OpenPayload;
    if (tag.uri !== XOP_NAMESPACE || tag.local !== 'Include') {
      throw new SoapFault(
        'Client',
        `unexpected element ${describe(tag)} in the data of payload '${payload.name}'`,
      );
    }
    if (payload.data) {
      throw new SoapFault(
        'Client',
        `the data of payload '${payload.name}' mixes xop:Include with other content`,
      );
    }
    const href = attribute(tag, 'href');
    const contentId = href === undefined ? undefined : contentIdFromHref(href);
    if (contentId === undefined) {
      throw new SoapFault(
        'Client',
        `the xop:Include of payload '${payload.name}' has no valid cid: href`,
      );
    }
    payload.data = { kind: 'include', contentId };
    return 'include';
  }

  private close(): void {
    const context = this.stack.pop();
    if (context === 'data') {
      this.closeData();
    } else if (context === 'payload') {
      const payload = this.payload as OpenPayload;
      this.payload = undefined;
      if (!payload.data) {
        throw new SoapFault('Client', `payload '${payload.name}' has no data element`);
      }
      this.job?.payloads.push({
        name: payload.name,
        contentType: payload.contentType,
        data: payload.data,
      });
    } else if (context === 'job') {
      if (this.applicationNames !== 1) {
        throw new SoapFault('Client', 'the job holds no applicationName');
      }
      if (this.job?.payloads.length === 0) {
        throw new SoapFault('Client', 'the job holds no payload');
      }
    }
  }

  private closeData(): void {
    const payload = this.payload as OpenPayload;
    const decoder = payload.decoder as Base64Decoder;
    if (payload.data?.kind === 'include') {
      return;
    }
    // No text at all is an empty payload, which is still a file.
    const spool = payload.data?.spool ?? this.newSpool();
    payload.data = { kind: 'inline', spool };
    spool.write(decodeOrFault(() => decoder.end(), payload.name));
  }

  private text(text: string): void {
    switch (this.stack.at(-1)) {
      case 'applicationName': {
        const job = this.job as JobDraft;
        if (job.applicationName.length + text.length > MAX_APPLICATION_NAME_LENGTH) {
          throw new SoapFault(
            'Client',
            `the applicationName is longer than ${MAX_APPLICATION_NAME_LENGTH} characters`,
          );
        }
        job.applicationName += text;
        return;
      }
      case 'priority': {
        const job = this.job as JobDraft;
        if ((job.priority ?? '').length + text.length > MAX_PRIORITY_LENGTH) {
          throw new SoapFault('Client', 'the priority is not a whole number such as 5 or -2');
        }
        job.priority = (job.priority ?? '') + text;
        return;
      }
      case 'data':
        this.inlineData(text);
        return;
      case 'envelope':
      case 'body':
      case 'job':
      case 'parameter':
      case 'payload':
      case 'include':
        if (/\S/.test(text)) {
          throw new SoapFault('Client', `unexpected text in ${this.stack.at(-1)}`);
        }
        return;
      case 'header':
      case 'skipped':
      case undefined:
        return;
    }
  }

  private inlineData(text: string): void {
    const payload = this.payload as OpenPayload;
    if (payload.data?.kind === 'include') {
      if (/\S/.test(text)) {
        throw new SoapFault(
          'Client',
          `the data of payload '${payload.name}' mixes xop:Include with other content`,
        );
      }
      return;
    }
    const decoder = payload.decoder as Base64Decoder;
    const bytes = decodeOrFault(() => decoder.write(text), payload.name);
    if (!payload.data && bytes.length === 0 && !/\S/.test(text)) {
      return; // whitespace before a possible xop:Include
    }
    if (!payload.data) {
      payload.data = { kind: 'inline', spool: this.newSpool() };
    }
    payload.data.spool.write(bytes);
  }
}

function decodeOrFault(decode: () => Buffer, payloadName: string): Buffer {
  try {
    return decode();
  } catch (error) {
    if (error instanceof Base64Error) {
      throw new SoapFault('Client', `payload '${payloadName}': ${error.message}`);
    }
    throw error;
  }
}

/** An unqualified attribute (the schema's attributeFormDefault is unqualified). */
function attribute(tag: sax.QualifiedTag, localName: string): string | undefined {
  const found = tag.attributes[localName];
  return found && found.uri === '' ? found.value : undefined;
}

function describe(tag: sax.QualifiedTag): string {
  return tag.uri ? `{${tag.uri}}${tag.local}` : tag.local;
}

function malformed(error: Error): SoapFault {
  // sax appends "Line: n Column: n Char: c" on further lines; the first line is the reason.
  const [saxReason, ...position] = error.message.split('\n');
  const reason = saxReason.startsWith('Max buffer length exceeded')
    ? `a name or attribute value is longer than ${MAX_ATTRIBUTE_LENGTH} characters`
    : saxReason;
  const where = position.filter((line) => /^(Line|Column):/.test(line)).join(', ');
  return new SoapFault('Client', `malformed XML: ${reason}${where ? ` (${where})` : ''}`);
}
