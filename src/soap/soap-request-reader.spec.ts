import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { SoapFault, soapFaultEnvelope, type SoapFaultCode } from './soap-fault';
import {
  readSoapRequest,
  type ReceivedSoapRequest,
  type SoapRequestLimits,
} from './soap-request-reader';

const SOAP11 = 'http://schemas.xmlsoap.org/soap/envelope/';
const SOAP12 = 'http://www.w3.org/2003/05/soap-envelope';
const XOP = 'http://www.w3.org/2004/08/xop/include';

/** What the server side of a test request produced: the reading, or the fault it threw. */
type Outcome = { received: ReceivedSoapRequest } | { fault: unknown };

let server: Server;
let baseUrl: string;
let tempDir: string;
let limits: SoapRequestLimits;
let outcomes: Array<Promise<Outcome>>;
/** Resolves when the server may start reading; lets a test act on the connection first. */
let readGate: Promise<void>;

beforeAll(async () => {
  tempDir = await mkdtemp(join(tmpdir(), 'svc-soap-reader-spec-'));
  server = createServer((req, res) => {
    const outcome = readGate
      .then(() => readSoapRequest(req, limits))
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
    outcomes.push(outcome);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(tempDir, { recursive: true, force: true });
});

beforeEach(() => {
  limits = { maxRequestBytes: 1024 * 1024, maxPayloads: 10, maxParameters: 10, tempDir };
  outcomes = [];
  readGate = Promise.resolve();
});

afterEach(async () => {
  // Every test cleans up what it received: nothing may be left behind, faults included.
  expect(await readdir(tempDir)).toEqual([]);
});

interface HttpAnswer {
  status: number;
  body: string;
}

function post(
  headers: Record<string, string>,
  body: Buffer | string | Readable,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}/soap`, { method: 'POST', headers }, (res) => {
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

async function readOk(
  headers: Record<string, string>,
  body: Buffer | string | Readable,
): Promise<ReceivedSoapRequest> {
  const answer = await post(headers, body);
  const outcome = await outcomes[outcomes.length - 1];
  if ('fault' in outcome) {
    throw outcome.fault;
  }
  expect(answer.status).toBe(200);
  return outcome.received;
}

async function readFault(
  headers: Record<string, string>,
  body: Buffer | string | Readable,
): Promise<{ fault: SoapFault; answer: HttpAnswer }> {
  const answer = await post(headers, body);
  const outcome = await outcomes[outcomes.length - 1];
  if (!('fault' in outcome)) {
    await outcome.received.cleanup();
    throw new Error('expected a fault');
  }
  expect(outcome.fault).toBeInstanceOf(SoapFault);
  return { fault: outcome.fault as SoapFault, answer };
}

const TEXT_XML = { 'content-type': 'text/xml; charset=utf-8' };

function envelope(body: string, namespace = SOAP11): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<soap:Envelope xmlns:soap="${namespace}"><soap:Body>${body}</soap:Body></soap:Envelope>`;
}

interface JobSpec {
  applicationName?: string;
  parameters?: Array<[string, string]>;
  payloads: Array<{ name: string; contentType: string; data: string }>;
}

function job(spec: JobSpec): string {
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

function include(href: string): string {
  return `<xop:Include xmlns:xop="${XOP}" href="${href}"/>`;
}

interface MimePart {
  headers: Record<string, string>;
  body: Buffer | string;
}

function mtomBody(boundary: string, parts: MimePart[], preamble = '', epilogue = '\r\n'): Buffer {
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

function mtomHeaders(boundary: string, start?: string): Record<string, string> {
  const startParameter = start === undefined ? '' : `; start="${start}"`;
  return {
    'content-type': `multipart/related; type="application/xop+xml"; boundary="${boundary}"${startParameter}; start-info="text/xml"`,
  };
}

const ROOT_TYPE = 'application/xop+xml; charset=UTF-8; type="text/xml"';

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

describe('readSoapRequest, plain SOAP 1.1 with inline base64', () => {
  it('reads the job, its parameters and decodes payload data wrapped over lines', async () => {
    const bytes = randomBytes(3000);
    const wrapped = bytes
      .toString('base64')
      .replace(/.{76}/g, '$&\r\n')
      .replace(/\r\n(.{10})/, '\r\n\t $1');
    const received = await readOk(
      { ...TEXT_XML, soapaction: '"urn:svc:soap:Process"' },
      envelope(
        job({
          applicationName: ' stats ',
          parameters: [
            ['alpha', '1'],
            ['beta', 'x &amp; y'],
            ['gamma', 'g'.repeat(64 * 1024)],
          ],
          payloads: [
            { name: 'data.bin', contentType: 'application/octet-stream', data: `\n${wrapped}\n` },
            {
              name: 'note.txt',
              contentType: 'text/plain',
              data: Buffer.from('hello').toString('base64'),
            },
          ],
        }),
      ),
    );
    try {
      expect(received.soapAction).toBe('urn:svc:soap:Process');
      expect(received.operation).toEqual({ namespace: 'urn:svc:soap:types', localName: 'job' });
      const call = received.call!;
      expect(call.applicationName).toBe('stats');
      expect(call.parameters).toEqual([
        { name: 'alpha', value: '1' },
        { name: 'beta', value: 'x & y' },
        { name: 'gamma', value: 'g'.repeat(64 * 1024) },
      ]);
      expect(call.payloads.map((p) => [p.name, p.contentType, p.size])).toEqual([
        ['data.bin', 'application/octet-stream', 3000],
        ['note.txt', 'text/plain', 5],
      ]);
      expect(sha256(await readFile(call.payloads[0].path))).toBe(sha256(bytes));
      expect((await readFile(call.payloads[1].path)).toString()).toBe('hello');
    } finally {
      await received.cleanup();
    }
  });

  it('accepts a request without SOAPAction, an empty data element, CDATA and a soap:Header', async () => {
    const body = `<soap:Envelope xmlns:soap="${SOAP11}"><soap:Header><h:any xmlns:h="urn:x">ignored</h:any></soap:Header><soap:Body>${job(
      {
        applicationName: 'a',
        payloads: [
          { name: 'empty', contentType: 'text/plain', data: '' },
          { name: 'cdata', contentType: 'text/plain', data: '<![CDATA[aGk=]]>' },
        ],
      },
    )}</soap:Body></soap:Envelope>`;
    const received = await readOk({ 'content-type': 'text/xml' }, body);
    try {
      expect(received.soapAction).toBeUndefined();
      const [empty, cdata] = received.call!.payloads;
      expect(empty.size).toBe(0);
      expect(await readFile(empty.path)).toEqual(Buffer.alloc(0));
      expect((await readFile(cdata.path)).toString()).toBe('hi');
    } finally {
      await received.cleanup();
    }
  });

  it('returns another operation element with call=null', async () => {
    const received = await readOk(
      { ...TEXT_XML, soapaction: '' },
      envelope('<o:Other xmlns:o="urn:other"><o:x>1</o:x></o:Other>'),
    );
    expect(received.soapAction).toBe('');
    expect(received.operation).toEqual({ namespace: 'urn:other', localName: 'Other' });
    expect(received.call).toBeNull();
    await received.cleanup();
  });

  it('streams a 64 MiB inline base64 payload to its file', async () => {
    limits.maxRequestBytes = 128 * 1024 * 1024;
    const block = randomBytes(3 * 1024 * 1024);
    const blocks = 21; // 63 MiB, a multiple of 3 bytes per block so the base64 can be cut per block
    const hash = createHash('sha256');
    function* body(): Generator<Buffer> {
      const [head, tail] = envelope(
        job({
          applicationName: 'big',
          payloads: [{ name: 'big.bin', contentType: 'application/octet-stream', data: '@' }],
        }),
      ).split('@');
      yield Buffer.from(head);
      for (let i = 0; i < blocks; i++) {
        block.writeUInt32BE(i, 0);
        hash.update(block);
        yield Buffer.from(block.toString('base64').replace(/.{76}/g, '$&\n'));
      }
      yield Buffer.from(tail);
    }
    const received = await readOk(TEXT_XML, Readable.from(body()));
    try {
      const [payload] = received.call!.payloads;
      expect(payload.size).toBe(blocks * block.length);
      expect(sha256(await readFile(payload.path))).toBe(hash.digest('hex'));
    } finally {
      await received.cleanup();
    }
  });
});

describe('readSoapRequest, MTOM', () => {
  it('resolves xop:Include references in any order, a root part that is not first, encoded cids', async () => {
    const boundary = 'uuid:5b1e-boundary';
    const first = randomBytes(70000);
    const second = randomBytes(1000);
    const oddId = 'a b/ü@example.org';
    const root = envelope(
      job({
        applicationName: 'mtom',
        payloads: [
          {
            name: 'one',
            contentType: 'application/zip',
            data: include(`cid:${encodeURIComponent(oddId)}`),
          },
          { name: 'two', contentType: 'text/csv', data: `\n  ${include('cid:second@x')}\n` },
          {
            name: 'three',
            contentType: 'text/plain',
            data: Buffer.from('inline').toString('base64'),
          },
        ],
      }),
    );
    const body = mtomBody(
      boundary,
      [
        {
          headers: { 'Content-Type': 'application/octet-stream', 'Content-ID': '<second@x>' },
          body: second,
        },
        { headers: { 'Content-Type': ROOT_TYPE, 'Content-ID': '<root@x>' }, body: root },
        {
          headers: { 'content-id': `<${oddId}>`, 'Content-Transfer-Encoding': 'binary' },
          body: first,
        },
        { headers: { 'Content-ID': '<unused@x>' }, body: 'not referenced' },
      ],
      'preamble to ignore\r\n',
    );
    const received = await readOk(mtomHeaders(boundary, '<root@x>'), body);
    try {
      const payloads = received.call!.payloads;
      expect(payloads.map((p) => [p.name, p.size])).toEqual([
        ['one', first.length],
        ['two', second.length],
        ['three', 6],
      ]);
      expect(sha256(await readFile(payloads[0].path))).toBe(sha256(first));
      expect(sha256(await readFile(payloads[1].path))).toBe(sha256(second));
      expect((await readFile(payloads[2].path)).toString()).toBe('inline');
      // The attachment nothing refers to is not kept.
      const directory = join(payloads[0].path, '..');
      expect((await readdir(directory)).length).toBe(3);
    } finally {
      await received.cleanup();
    }
  });

  it('takes the first part as the root without a start parameter, and reads base64 attachments', async () => {
    const boundary = 'b1';
    const data = randomBytes(5000);
    const body = mtomBody(boundary, [
      {
        headers: { 'Content-Type': ROOT_TYPE },
        body: envelope(
          job({
            applicationName: 'a',
            payloads: [{ name: 'p', contentType: 'x/y', data: include('cid:p1') }],
          }),
        ),
      },
      {
        headers: { 'Content-ID': '<p1>', 'Content-Transfer-Encoding': 'base64' },
        body: data.toString('base64').replace(/.{76}/g, '$&\r\n'),
      },
    ]);
    const received = await readOk(mtomHeaders(boundary), body);
    try {
      expect(sha256(await readFile(received.call!.payloads[0].path))).toBe(sha256(data));
    } finally {
      await received.cleanup();
    }
  });

  it('reads the framing .NET (WCF) sends: URL content-ids, a boundary with + and =, a BOM', async () => {
    const boundary = 'uuid:0b4f1d27-8f1e-4d3c-9a55-2b1f3f0e1a2c+id=2';
    const attachmentId = 'http://tempuri.org/1/638000000000000000';
    const data = randomBytes(4096);
    const body = mtomBody(boundary, [
      {
        headers: {
          'Content-ID': '<http://tempuri.org/0>',
          'Content-Transfer-Encoding': '8bit',
          'Content-Type': ROOT_TYPE,
        },
        body: `\uFEFF${envelope(
          job({
            applicationName: 'a',
            payloads: [
              {
                name: 'p',
                contentType: 'x/y',
                data: include(`cid:${encodeURIComponent(attachmentId)}`),
              },
            ],
          }),
        )}`,
      },
      {
        headers: {
          'Content-ID': `<${attachmentId}>`,
          'Content-Transfer-Encoding': 'binary',
          'Content-Type': 'application/octet-stream',
        },
        body: data,
      },
    ]);
    const received = await readOk(
      {
        'content-type': `multipart/related; type="application/xop+xml";start="<http://tempuri.org/0>";boundary="${boundary}";start-info="text/xml"`,
        soapaction: '"urn:svc:soap:Process"',
      },
      body,
    );
    try {
      expect(sha256(await readFile(received.call!.payloads[0].path))).toBe(sha256(data));
    } finally {
      await received.cleanup();
    }
  });

  it('reads a body delivered one byte at a time, with delimiter look-alikes in the data', async () => {
    const boundary = 'MIME_boundary';
    const tricky = Buffer.from(
      'a\r\n--MIME_boundar\r\n--MIME_b\r\r\n-\r\n--MIME_boundaryX'.replace('X', ''),
    );
    const data = Buffer.concat([tricky.subarray(0, tricky.length - 1), Buffer.from('!')]);
    const body = mtomBody(boundary, [
      {
        headers: { 'Content-Type': ROOT_TYPE },
        body: envelope(
          job({
            applicationName: 'a',
            payloads: [{ name: 'p', contentType: 'x/y', data: include('cid:p') }],
          }),
        ),
      },
      { headers: { 'Content-ID': '<p>' }, body: data },
    ]);
    async function* oneByteAtATime(): AsyncGenerator<Buffer> {
      for (const byte of body) {
        yield Buffer.from([byte]);
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    const received = await readOk(mtomHeaders(boundary), Readable.from(oneByteAtATime()));
    try {
      expect(sha256(await readFile(received.call!.payloads[0].path))).toBe(sha256(data));
    } finally {
      await received.cleanup();
    }
  });

  it('streams a 64 MiB attachment to its file', async () => {
    limits.maxRequestBytes = 128 * 1024 * 1024;
    const boundary = 'big-boundary';
    const block = randomBytes(1024 * 1024);
    const blocks = 64;
    const hash = createHash('sha256');
    const root = envelope(
      job({
        applicationName: 'big',
        payloads: [
          { name: 'big.zip', contentType: 'application/zip', data: include('cid:big@svc') },
        ],
      }),
    );
    function* body(): Generator<Buffer> {
      yield Buffer.from(`--${boundary}\r\nContent-Type: ${ROOT_TYPE}\r\n\r\n${root}`);
      yield Buffer.from(
        `\r\n--${boundary}\r\nContent-ID: <big@svc>\r\nContent-Type: application/zip\r\n\r\n`,
      );
      for (let i = 0; i < blocks; i++) {
        block.writeUInt32BE(i, 0);
        hash.update(block);
        yield Buffer.from(block);
      }
      yield Buffer.from(`\r\n--${boundary}--\r\n`);
    }
    const received = await readOk(mtomHeaders(boundary), Readable.from(body()));
    try {
      const [payload] = received.call!.payloads;
      expect(payload.size).toBe(blocks * block.length);
      expect(sha256(await readFile(payload.path))).toBe(hash.digest('hex'));
    } finally {
      await received.cleanup();
    }
  });
});

describe('readSoapRequest faults', () => {
  const validJob = job({
    applicationName: 'a',
    payloads: [{ name: 'p', contentType: 'text/plain', data: 'aGk=' }],
  });
  const cases: Array<[string, Record<string, string>, string | Buffer, SoapFaultCode, RegExp]> = [
    ['no Content-Type', {}, envelope(validJob), 'Client', /no Content-Type/],
    ['a JSON Content-Type', { 'content-type': 'application/json' }, '{}', 'Client', /not accepted/],
    [
      'SOAP 1.2 media type',
      { 'content-type': 'application/soap+xml' },
      envelope(validJob, SOAP12),
      'VersionMismatch',
      /SOAP 1\.2/,
    ],
    ['a SOAP 1.2 envelope', TEXT_XML, envelope(validJob, SOAP12), 'VersionMismatch', /SOAP 1\.2/],
    [
      'multipart/related that is not XOP',
      { 'content-type': 'multipart/related; boundary=x; type="text/xml"' },
      '--x--',
      'Client',
      /application\/xop\+xml/,
    ],
    [
      'multipart/related without boundary',
      { 'content-type': 'multipart/related; type="application/xop+xml"' },
      '--x--',
      'Client',
      /no boundary/,
    ],
    [
      'a Latin-1 charset',
      { 'content-type': 'text/xml; charset=iso-8859-1' },
      envelope(validJob),
      'Client',
      /charset/,
    ],
    [
      'malformed XML',
      TEXT_XML,
      '<soap:Envelope xmlns:soap="' + SOAP11 + '"><soap:Body></soap:Envelope>',
      'Client',
      /malformed XML/,
    ],
    ['an unbound prefix', TEXT_XML, envelope('<x:job/>'), 'Client', /malformed XML/],
    ['an empty body of the request', TEXT_XML, '', 'Client', /no soap:Envelope/],
    [
      'a root element that is not Envelope',
      TEXT_XML,
      `<soap:Body xmlns:soap="${SOAP11}"/>`,
      'Client',
      /not a soap:Envelope/,
    ],
    [
      'no soap:Body',
      TEXT_XML,
      `<soap:Envelope xmlns:soap="${SOAP11}"><soap:Header/></soap:Envelope>`,
      'Client',
      /no soap:Body/,
    ],
    ['an empty soap:Body', TEXT_XML, envelope('  '), 'Client', /soap:Body is empty/],
    [
      'two operation elements',
      TEXT_XML,
      envelope(validJob + validJob),
      'Client',
      /more than one element/,
    ],
    [
      'a DTD',
      TEXT_XML,
      `<!DOCTYPE x [<!ENTITY e "x">]>${envelope(validJob)}`,
      'Client',
      /document type declaration/,
    ],
    [
      'no applicationName',
      TEXT_XML,
      envelope(job({ payloads: [{ name: 'p', contentType: 't/p', data: '' }] })),
      'Client',
      /no applicationName/,
    ],
    [
      'two applicationNames',
      TEXT_XML,
      envelope(
        validJob.replace(
          '<t:applicationName>a</t:applicationName>',
          '<t:applicationName>a</t:applicationName><t:applicationName>b</t:applicationName>',
        ),
      ),
      'Client',
      /more than one applicationName/,
    ],
    [
      'no payload',
      TEXT_XML,
      envelope(job({ applicationName: 'a', payloads: [] })),
      'Client',
      /no payload/,
    ],
    [
      'a payload without name',
      TEXT_XML,
      envelope(validJob.replace(' name="p"', '')),
      'Client',
      /name and a contentType/,
    ],
    [
      'a payload without contentType',
      TEXT_XML,
      envelope(validJob.replace(' contentType="text/plain"', '')),
      'Client',
      /name and a contentType/,
    ],
    [
      'a payload without data',
      TEXT_XML,
      envelope(validJob.replace('<t:data>aGk=</t:data>', '')),
      'Client',
      /no data element/,
    ],
    [
      'a parameter without value',
      TEXT_XML,
      envelope(
        job({ applicationName: 'a', payloads: [] }).replace(
          '</t:applicationName>',
          '</t:applicationName><t:parameter name="x"/>',
        ),
      ),
      'Client',
      /name and a value/,
    ],
    [
      'a parameter value over 64 KiB',
      TEXT_XML,
      envelope(
        job({
          applicationName: 'a',
          parameters: [['long', 'v'.repeat(64 * 1024 + 1)]],
          payloads: [],
        }),
      ),
      'Client',
      /longer than 65536 characters/,
    ],
    [
      'an unknown element in the job',
      TEXT_XML,
      envelope(validJob.replace('<t:payload', '<t:extra/><t:payload')),
      'Client',
      /unexpected element/,
    ],
    [
      'base64 with a bad character',
      TEXT_XML,
      envelope(validJob.replace('aGk=', 'aG*k')),
      'Client',
      /base64/,
    ],
    [
      'base64 with a bad length',
      TEXT_XML,
      envelope(validJob.replace('aGk=', 'aGk')),
      'Client',
      /multiple of 4/,
    ],
    [
      'base64 with misplaced padding',
      TEXT_XML,
      envelope(validJob.replace('aGk=', 'aG==aGk=')),
      'Client',
      /padding/,
    ],
    [
      'an xop:Include in a plain request',
      TEXT_XML,
      envelope(validJob.replace('aGk=', include('cid:x'))),
      'Client',
      /not a part of the request/,
    ],
    [
      'an xop:Include without cid: href',
      TEXT_XML,
      envelope(validJob.replace('aGk=', include('http://x'))),
      'Client',
      /valid cid/,
    ],
    [
      'an xop:Include mixed with base64',
      TEXT_XML,
      envelope(validJob.replace('aGk=', `aGk=${include('cid:x')}`)),
      'Client',
      /mixes xop:Include/,
    ],
  ];

  it.each(cases)('answers %s with a fault', async (_name, headers, body, code, message) => {
    const { fault, answer } = await readFault(headers, body);
    expect(fault.code).toBe(code);
    expect(fault.message).toMatch(message);
    expect(answer.status).toBe(500);
    expect(answer.body).toContain(`<faultcode>soap:${code}</faultcode>`);
  });

  it('answers a temp directory that cannot be made with a Server fault', async () => {
    limits.tempDir = join(tempDir, 'missing', 'deeper');
    const { fault } = await readFault(TEXT_XML, envelope(validJob));
    expect(fault.code).toBe('Server');
    expect(fault.message).toMatch(/could not be stored/);
  });

  it('faults on more payloads or parameters than the limits allow', async () => {
    limits.maxPayloads = 2;
    limits.maxParameters = 1;
    const payload = { name: 'p', contentType: 't/p', data: 'aGk=' };
    const tooManyPayloads = await readFault(
      TEXT_XML,
      envelope(job({ applicationName: 'a', payloads: [payload, payload, payload] })),
    );
    expect(tooManyPayloads.fault.message).toMatch(/more than 2 payloads/);
    const tooManyParameters = await readFault(
      TEXT_XML,
      envelope(
        job({
          applicationName: 'a',
          parameters: [
            ['a', '1'],
            ['b', '2'],
          ],
          payloads: [payload],
        }),
      ),
    );
    expect(tooManyParameters.fault.message).toMatch(/more than 1 parameters/);
  });

  it('faults on a request over maxRequestBytes, declared or counted while streaming', async () => {
    limits.maxRequestBytes = 64 * 1024;
    const big = envelope(
      job({
        applicationName: 'a',
        payloads: [{ name: 'p', contentType: 't/p', data: randomBytes(100000).toString('base64') }],
      }),
    );
    const declared = await readFault(TEXT_XML, big);
    expect(declared.fault.message).toMatch(/larger than 65536 bytes/);
    // Chunked: no Content-Length to look at, so the limit trips while reading.
    const streamed = await readFault(TEXT_XML, Readable.from([Buffer.from(big)]));
    expect(streamed.fault.message).toMatch(/larger than 65536 bytes/);
  });

  it('faults on a truncated multipart body, a body without the boundary, and a missing part', async () => {
    const boundary = 'bnd';
    const root = {
      headers: { 'Content-Type': ROOT_TYPE },
      body: envelope(
        job({
          applicationName: 'a',
          payloads: [{ name: 'p', contentType: 'x/y', data: include('cid:p') }],
        }),
      ),
    };
    const complete = mtomBody(boundary, [
      root,
      { headers: { 'Content-ID': '<p>' }, body: randomBytes(2000) },
    ]);
    const truncated = await readFault(
      mtomHeaders(boundary),
      complete.subarray(0, complete.length - 600),
    );
    expect(truncated.fault.message).toMatch(/truncated/);
    const noBoundary = await readFault(mtomHeaders('other'), complete);
    expect(noBoundary.fault.message).toMatch(/no boundary delimiter/);
    const missing = await readFault(mtomHeaders(boundary), mtomBody(boundary, [root]));
    expect(missing.fault.message).toMatch(/refers to cid:p, which is not a part/);
    const noRoot = await readFault(mtomHeaders(boundary, '<nowhere>'), complete);
    expect(noRoot.fault.message).toMatch(/no root part/);
    const duplicate = await readFault(
      mtomHeaders(boundary),
      mtomBody(boundary, [
        root,
        { headers: { 'Content-ID': '<p>' }, body: 'a' },
        { headers: { 'Content-ID': '<p>' }, body: 'b' },
      ]),
    );
    expect(duplicate.fault.message).toMatch(/two MIME parts/);
    const soap12Root = await readFault(
      mtomHeaders(boundary),
      mtomBody(boundary, [
        {
          headers: {
            'Content-Type': 'application/xop+xml; charset=UTF-8; type="application/soap+xml"',
          },
          body: root.body,
        },
      ]),
    );
    expect(soap12Root.fault.code).toBe('VersionMismatch');
  });

  it('removes the temp files of a client that disconnects mid-upload, without an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const boundary = 'gone';
      const head = Buffer.from(
        `--${boundary}\r\nContent-Type: ${ROOT_TYPE}\r\n\r\n${envelope(job({ applicationName: 'a', payloads: [{ name: 'p', contentType: 'x/y', data: include('cid:p') }] }))}` +
          `\r\n--${boundary}\r\nContent-ID: <p>\r\n\r\n`,
      );
      const req = request(`${baseUrl}/soap`, { method: 'POST', headers: mtomHeaders(boundary) });
      req.on('error', () => undefined);
      req.write(head);
      req.write(randomBytes(512 * 1024));
      // Wait until the server has spooled some of the attachment, then drop the connection.
      await waitFor(async () =>
        (await listFiles(tempDir)).some((file) => file.startsWith('attachment')),
      );
      req.destroy();
      const outcome = await outcomes[outcomes.length - 1];
      expect('fault' in outcome && outcome.fault instanceof SoapFault).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('readSoapRequest and connections', () => {
  it('faults on a connection that closed before reading started', async () => {
    let openGate = (): void => undefined;
    readGate = new Promise((resolve) => (openGate = resolve));
    const req = request(`${baseUrl}/soap`, { method: 'POST', headers: TEXT_XML });
    req.on('error', () => undefined);
    req.write('<soap:Envelope');
    await waitFor(() => Promise.resolve(outcomes.length === 1));
    req.destroy();
    await new Promise((resolve) => setTimeout(resolve, 50));
    openGate();
    const outcome = await outcomes[0];
    expect('fault' in outcome && (outcome.fault as SoapFault).message).toMatch(
      /closed the connection/,
    );
  });
});

async function listFiles(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true });
  return entries.map((entry) => entry.split('/').pop() ?? entry);
}

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (await condition()) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('condition not met in time');
}
