import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  envelope,
  include,
  job,
  mtomBody,
  mtomHeaders,
  ROOT_TYPE,
  serveSoapReader,
  sha256,
  SOAP11,
  TEXT_XML,
} from '../../test/support/soap-request-harness';

/** readSoapRequest reading what clients send: plain SOAP 1.1 with inline base64, and MTOM. */
const reader = serveSoapReader();
const { readOk } = reader;

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
    reader.limits.maxRequestBytes = 128 * 1024 * 1024;
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
    reader.limits.maxRequestBytes = 128 * 1024 * 1024;
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
