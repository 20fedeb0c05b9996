import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import {
  createServer,
  request,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { HttpClient } from 'soap/lib/http';
import { parseMTOMResp } from 'soap/lib/utils';
import { writeMtomResponse } from '../../test/support/mtom-answer';
import { newContentId, xopInclude, type MtomAttachment } from './mtom-writer';
import { SoapFault } from './soap-fault';
import { readSoapRequest, type ReceivedSoapRequest } from './soap-request-reader';

const SOAP11 = 'http://schemas.xmlsoap.org/soap/envelope/';
const LIMITS = { maxRequestBytes: 256 * 1024 * 1024, maxPayloads: 10, maxParameters: 10 };

let server: Server;
let baseUrl: string;
let tempDir: string;
/** What the server does with the next request; set by each test. */
let respond: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
let responding: Array<Promise<unknown>>;

beforeAll(async () => {
  tempDir = await mkdtemp(join(tmpdir(), 'svc-mtom-writer-spec-'));
  server = createServer((req, res) => {
    responding.push(
      respond(req, res).then(
        () => 'resolved',
        (error: unknown) => error,
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  // A failed test may leave a response unread: end its connection so that close() returns.
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(tempDir, { recursive: true, force: true });
});

beforeEach(() => {
  responding = [];
});

function get(): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}/`, { method: 'POST' }, resolve);
    req.on('error', reject);
    req.end();
  });
}

async function bodyOf(res: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function jobEnvelope(payloads: Array<{ name: string; contentId: string }>): string {
  const items = payloads
    .map(
      (p) =>
        `<t:payload name="${p.name}" contentType="application/octet-stream"><t:data>${xopInclude(p.contentId)}</t:data></t:payload>`,
    )
    .join('');
  return `<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="${SOAP11}"><soap:Body><t:job xmlns:t="urn:svc:soap:types"><t:applicationName>écho</t:applicationName>${items}</t:job></soap:Body></soap:Envelope>`;
}

function bufferAttachment(
  contentId: string,
  data: Buffer,
  contentType = 'application/octet-stream',
): MtomAttachment {
  return { contentId, contentType, open: () => Readable.from([data]) };
}

describe('xopInclude and newContentId', () => {
  it('makes unique ids and URL-encodes them in the cid: href', () => {
    const ids = new Set(Array.from({ length: 100 }, () => newContentId()));
    expect(ids.size).toBe(100);
    expect([...ids][0]).toMatch(/^[0-9a-f-]{36}@svc$/);
    expect(xopInclude('a b/ü@x')).toBe(
      '<xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:a%20b%2F%C3%BC@x"/>',
    );
  });
});

describe('writeMtomResponse', () => {
  it('frames the root part and the attachments with CRLF, chunked, under a random boundary', async () => {
    respond = (_req, res) =>
      writeMtomResponse(res, 200, '<env/>', [
        bufferAttachment('a@svc', Buffer.from('AAA'), 'text/plain'),
      ]);
    const res = await get();
    const body = (await bodyOf(res)).toString('latin1');
    const contentType = res.headers['content-type'] as string;
    const boundary = /boundary="([^"]+)"/.exec(contentType)![1];
    const start = /start="<([^>]+)>"/.exec(contentType)![1];
    expect(contentType).toMatch(/^multipart\/related; type="application\/xop\+xml"; /);
    expect(contentType).toContain('start-info="text/xml"');
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(body).toBe(
      `--${boundary}\r\n` +
        'Content-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n' +
        'Content-Transfer-Encoding: binary\r\n' +
        `Content-ID: <${start}>\r\n\r\n<env/>\r\n` +
        `--${boundary}\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: binary\r\nContent-ID: <a@svc>\r\n\r\nAAA\r\n` +
        `--${boundary}--\r\n`,
    );
    const second = await get();
    await bodyOf(second);
    expect(second.headers['content-type']).not.toContain(boundary);
    expect(await Promise.all(responding)).toEqual(['resolved', 'resolved']);
  });

  it('round-trips through readSoapRequest: attachments from files and streams, any order', async () => {
    const files = await Promise.all(
      [randomBytes(3 * 1024 * 1024 + 17), randomBytes(10), Buffer.alloc(0)].map(
        async (data, index) => {
          const path = join(tempDir, `source-${index}`);
          await writeFile(path, data);
          return { data, path, contentId: newContentId() };
        },
      ),
    );
    // The envelope refers to the attachments in another order than they are sent.
    const envelope = jobEnvelope([
      { name: 'empty', contentId: files[2].contentId },
      { name: 'big', contentId: files[0].contentId },
      { name: 'small', contentId: files[1].contentId },
    ]);
    respond = (_req, res) =>
      writeMtomResponse(
        res,
        200,
        envelope,
        files.map((file) => ({
          contentId: file.contentId,
          contentType: 'application/octet-stream',
          open: async () => {
            await new Promise((resolve) => setImmediate(resolve));
            return createReadStream(file.path);
          },
        })),
      );
    const res = await get();
    let received: ReceivedSoapRequest | undefined;
    try {
      received = await readSoapRequest(res, { ...LIMITS, tempDir });
      const payloads = received.call!.payloads;
      expect(received.call!.applicationName).toBe('écho');
      expect(payloads.map((p) => [p.name, p.size])).toEqual([
        ['empty', 0],
        ['big', files[0].data.length],
        ['small', 10],
      ]);
      expect(sha256(await readFile(payloads[1].path))).toBe(sha256(files[0].data));
      expect(sha256(await readFile(payloads[2].path))).toBe(sha256(files[1].data));
    } finally {
      await received?.cleanup();
      await Promise.all(files.map((file) => rm(file.path)));
    }
    expect(await Promise.all(responding)).toEqual(['resolved']);
    expect(await readdir(tempDir)).toEqual([]);
  });

  it("is read by node-soap's MTOM response parser", async () => {
    const data = randomBytes(100000);
    const contentId = newContentId();
    respond = (_req, res) =>
      writeMtomResponse(res, 200, jobEnvelope([{ name: 'p', contentId }]), [
        bufferAttachment(contentId, data),
      ]);
    const res = await get();
    const body = await bodyOf(res);
    const boundary = /boundary="([^"]+)"/.exec(res.headers['content-type'] as string)![1];
    const parsed = await new Promise<{
      parts: Array<{ body: Buffer; headers: Record<string, string> }>;
    }>((resolve, reject) => {
      void parseMTOMResp(body, boundary, (error, resp) => (error ? reject(error) : resolve(resp!)));
    });
    expect(parsed.parts).toHaveLength(2);
    expect(parsed.parts[0].body.toString('utf8')).toContain(`href="cid:${contentId}"`);
    expect(parsed.parts[1].headers['content-id']).toBe(`<${contentId}>`);
    expect(sha256(parsed.parts[1].body)).toBe(sha256(data));
  });

  it('streams with backpressure: a client that stops reading stops the source', async () => {
    const chunk = randomBytes(64 * 1024);
    const chunks = 1536; // 96 MiB
    let pulled = 0;
    const source = new Readable({
      read() {
        if (pulled === chunks) {
          this.push(null);
          return;
        }
        pulled++;
        this.push(chunk);
      },
    });
    respond = (_req, res) =>
      writeMtomResponse(res, 200, '<env/>', [
        { contentId: 'big@svc', contentType: 'application/octet-stream', open: () => source },
      ]);
    const res = await get();
    res.pause();
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Socket buffers and stream high-water marks hold some MiB (loopback receive buffers grow up
    // to net.ipv4.tcp_rmem's maximum, 32 MiB here), never the whole 96.
    expect(pulled * chunk.length).toBeLessThan(48 * 1024 * 1024);
    const hash = createHash('sha256');
    let size = 0;
    for await (const piece of res) {
      hash.update(piece as Buffer);
      size += (piece as Buffer).length;
    }
    expect(pulled).toBe(chunks);
    expect(size).toBeGreaterThan(chunks * chunk.length);
    expect(await Promise.all(responding)).toEqual(['resolved']);
  });

  it('resolves and closes the source when the client disconnects', async () => {
    const source = new Readable({
      read() {
        this.push(randomBytes(64 * 1024));
      },
    });
    respond = (_req, res) =>
      writeMtomResponse(res, 200, '<env/>', [
        { contentId: 'endless@svc', contentType: 'application/octet-stream', open: () => source },
        { contentId: 'never@svc', contentType: 'text/plain', open: () => Readable.from(['x']) },
      ]);
    const res = await get();
    await new Promise((resolve) => res.once('data', resolve));
    res.destroy();
    expect(await Promise.all(responding)).toEqual(['resolved']);
    expect(source.destroyed).toBe(true);
  });

  it('destroys the response and rejects when an attachment cannot be read', async () => {
    let sent = 0;
    const failing = new Readable({
      read() {
        if (sent++ < 3) {
          this.push(Buffer.alloc(1024, 1));
        } else {
          this.destroy(new Error('disk gone'));
        }
      },
    });
    respond = (_req, res) =>
      writeMtomResponse(res, 200, jobEnvelope([{ name: 'p', contentId: 'f@svc' }]), [
        { contentId: 'f@svc', contentType: 'application/octet-stream', open: () => failing },
      ]);
    const res = await get();
    // The client sees a truncated multipart body, never a complete-looking answer.
    const fault = await readSoapRequest(res, { ...LIMITS, tempDir }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(fault).toBeInstanceOf(SoapFault);
    const outcome = (await Promise.all(responding))[0];
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toBe('disk gone');
    expect(await readdir(tempDir)).toEqual([]);
  });

  it('destroys the response and rejects when an attachment cannot be opened', async () => {
    respond = (_req, res) =>
      writeMtomResponse(res, 200, '<env/>', [
        {
          contentId: 'missing@svc',
          contentType: 'application/octet-stream',
          open: () => Promise.reject(new Error('no such file')),
        },
      ]);
    const res = await get();
    await expect(bodyOf(res)).rejects.toThrow();
    const outcome = (await Promise.all(responding))[0];
    expect((outcome as Error).message).toBe('no such file');
  });
});

describe("readSoapRequest reads node-soap's MTOM requests", () => {
  it('takes the attachments that node-soap sends with an xop:Include envelope', async () => {
    const data = randomBytes(200000);
    let received: ReceivedSoapRequest | undefined;
    respond = async (req, res) => {
      received = await readSoapRequest(req, { ...LIMITS, tempDir });
      res.end();
    };
    const envelope = jobEnvelope([{ name: 'sent', contentId: 'att-1' }]);
    await new Promise<void>((resolve, reject) => {
      void new HttpClient().request(
        `${baseUrl}/`,
        envelope,
        (error: unknown) =>
          error ? reject(error instanceof Error ? error : new Error('request failed')) : resolve(),
        { 'Content-Type': 'text/xml; charset=utf-8', SOAPAction: '"Process"' },
        {
          attachments: [
            {
              name: 'sent.bin',
              contentId: 'att-1',
              mimetype: 'application/octet-stream',
              body: data as unknown as NodeJS.ReadableStream,
            },
          ],
        },
      );
    });
    expect(await Promise.all(responding)).toEqual(['resolved']);
    try {
      expect(received!.soapAction).toBe('Process');
      const [payload] = received!.call!.payloads;
      expect(sha256(await readFile(payload.path))).toBe(sha256(data));
    } finally {
      await received?.cleanup();
    }
  });
});
