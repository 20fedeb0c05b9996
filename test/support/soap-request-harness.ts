import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { SoapFault, soapFaultEnvelope } from '../../src/soap/soap-fault';
import {
  readSoapRequest,
  type ReceivedSoapRequest,
  type SoapRequestLimits,
} from '../../src/soap/soap-request-reader';

/** The SOAP request reader's unit specs: a server that reads each request, and the requests. */

export const SOAP11 = 'http://schemas.xmlsoap.org/soap/envelope/';
export const SOAP12 = 'http://www.w3.org/2003/05/soap-envelope';
const XOP = 'http://www.w3.org/2004/08/xop/include';

/** What the server side of a test request produced: the reading, or the fault it threw. */
export type Outcome = { received: ReceivedSoapRequest } | { fault: unknown };

export interface HttpAnswer {
  status: number;
  body: string;
}

type Body = Buffer | string | Readable;

export interface SoapReaderServer {
  baseUrl: string;
  tempDir: string;
  /** The reader's limits, fresh in every test (a test may change them). */
  limits: SoapRequestLimits;
  /** The server side of each request of the test, in order. */
  outcomes: Array<Promise<Outcome>>;
  /** Resolves when the server may start reading; lets a test act on the connection first. */
  readGate: Promise<void>;
  post: (headers: Record<string, string>, body: Body) => Promise<HttpAnswer>;
  readOk: (headers: Record<string, string>, body: Body) => Promise<ReceivedSoapRequest>;
  readFault: (
    headers: Record<string, string>,
    body: Body,
  ) => Promise<{ fault: SoapFault; answer: HttpAnswer }>;
}

/**
 * Registers a server that reads every request with readSoapRequest (beforeAll, afterAll), fresh
 * limits for each test, and the check after each that nothing received is left behind.
 */
export function serveSoapReader(): SoapReaderServer {
  let server: Server;
  const fixture: SoapReaderServer = {
    baseUrl: '',
    tempDir: '',
    limits: { maxRequestBytes: 0, maxPayloads: 0, maxParameters: 0, tempDir: '' },
    outcomes: [],
    readGate: Promise.resolve(),
    post,
    readOk,
    readFault,
  };

  beforeAll(async () => {
    fixture.tempDir = await mkdtemp(join(tmpdir(), 'svc-soap-reader-spec-'));
    server = createServer((req, res) => {
      const outcome = fixture.readGate
        .then(() => readSoapRequest(req, fixture.limits))
        .then(
          (received): Outcome => {
            res.end('read');
            return { received };
          },
          (fault: unknown): Outcome => {
            const body = fault instanceof SoapFault ? soapFaultEnvelope(fault) : String(fault);
            res.writeHead(500, { 'content-type': 'text/xml; charset=utf-8', connection: 'close' });
            res.end(body);
            return { fault };
          },
        );
      fixture.outcomes.push(outcome);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    fixture.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(fixture.tempDir, { recursive: true, force: true });
  });

  beforeEach(() => {
    fixture.limits = {
      maxRequestBytes: 1024 * 1024,
      maxPayloads: 10,
      maxParameters: 10,
      tempDir: fixture.tempDir,
    };
    fixture.outcomes = [];
    fixture.readGate = Promise.resolve();
  });

  afterEach(async () => {
    // Every test cleans up what it received: nothing may be left behind, faults included.
    expect(await readdir(fixture.tempDir)).toEqual([]);
  });

  function post(headers: Record<string, string>, body: Body): Promise<HttpAnswer> {
    return new Promise((resolve, reject) => {
      const req = request(`${fixture.baseUrl}/soap`, { method: 'POST', headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      });
      req.on('error', reject);
      if (body instanceof Readable) {
        body.pipe(req);
      } else {
        req.end(body);
      }
    });
  }

  async function readOk(headers: Record<string, string>, body: Body): Promise<ReceivedSoapRequest> {
    const answer = await post(headers, body);
    const outcome = await fixture.outcomes[fixture.outcomes.length - 1];
    if ('fault' in outcome) {
      throw outcome.fault;
    }
    expect(answer.status).toBe(200);
    return outcome.received;
  }

  async function readFault(
    headers: Record<string, string>,
    body: Body,
  ): Promise<{ fault: SoapFault; answer: HttpAnswer }> {
    const answer = await post(headers, body);
    const outcome = await fixture.outcomes[fixture.outcomes.length - 1];
    if (!('fault' in outcome)) {
      await outcome.received.cleanup();
      throw new Error('expected a fault');
    }
    expect(outcome.fault).toBeInstanceOf(SoapFault);
    return { fault: outcome.fault as SoapFault, answer };
  }

  return fixture;
}

export const TEXT_XML = { 'content-type': 'text/xml; charset=utf-8' };

export function envelope(body: string, namespace = SOAP11): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<soap:Envelope xmlns:soap="${namespace}"><soap:Body>${body}</soap:Body></soap:Envelope>`;
}

interface JobSpec {
  applicationName?: string;
  parameters?: Array<[string, string]>;
  payloads: Array<{ name: string; contentType: string; data: string }>;
}

export function job(spec: JobSpec): string {
  const name =
    spec.applicationName === undefined
      ? ''
      : `<t:applicationName>${spec.applicationName}</t:applicationName>`;
  const parameters = (spec.parameters ?? [])
    .map(([key, value]) => `<t:parameter name="${key}" value="${value}"/>`)
    .join('');
  const payloads = spec.payloads
    .map(
      (p) =>
        `<t:payload name="${p.name}" contentType="${p.contentType}"><t:data>${p.data}</t:data></t:payload>`,
    )
    .join('');
  return `<t:job xmlns:t="urn:svc:soap:types">${name}${parameters}${payloads}</t:job>`;
}

export function include(href: string): string {
  return `<xop:Include xmlns:xop="${XOP}" href="${href}"/>`;
}

interface MimePart {
  headers: Record<string, string>;
  body: Buffer | string;
}

export function mtomBody(
  boundary: string,
  parts: MimePart[],
  preamble = '',
  epilogue = '\r\n',
): Buffer {
  const pieces: Buffer[] = [Buffer.from(preamble)];
  parts.forEach((part, index) => {
    const head = Object.entries(part.headers)
      .map(([key, value]) => `${key}: ${value}\r\n`)
      .join('');
    pieces.push(
      Buffer.from(`${index === 0 && !preamble ? '' : '\r\n'}--${boundary}\r\n${head}\r\n`),
    );
    pieces.push(Buffer.isBuffer(part.body) ? part.body : Buffer.from(part.body));
  });
  pieces.push(Buffer.from(`\r\n--${boundary}--${epilogue}`));
  return Buffer.concat(pieces);
}

export function mtomHeaders(boundary: string, start?: string): Record<string, string> {
  const startParameter = start === undefined ? '' : `; start="${start}"`;
  return {
    'content-type': `multipart/related; type="application/xop+xml"; boundary="${boundary}"${startParameter}; start-info="text/xml"`,
  };
}

export const ROOT_TYPE = 'application/xop+xml; charset=UTF-8; type="text/xml"';

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export async function listFiles(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true });
  return entries.map((entry) => entry.split('/').pop() ?? entry);
}

export async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (await condition()) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('condition not met in time');
}
