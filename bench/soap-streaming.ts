/**
 * Memory of the SOAP streaming paths: a 100 MiB payload read as an MTOM attachment, read as
 * inline base64, and written back as an MTOM attachment, each through a loopback HTTP server
 * in a child process whose RSS is sampled every 20 ms. The growth over the idle RSS is what
 * SPEC §7's "streamed, not held in memory" is checked against (issue 5: under 64 MiB).
 *
 *   npm run build --silent && npx tsc -p tsconfig.bench.json && node dist/bench/soap-streaming.js [--mib 100]
 */
import { fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { newContentId, xopInclude } from '../src/soap/mtom-writer';
import { writeMtomResponse } from '../test/support/mtom-answer';
import { readSoapRequest } from '../src/soap/soap-request-reader';

const MIB = 1024 * 1024;
const SOAP11 = 'http://schemas.xmlsoap.org/soap/envelope/';

interface ServerReport {
  idleRssMiB: number;
  peakRssGrowthMiB: number;
  seconds: number;
  size: number;
  sha256: string;
}

function envelope(data: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="${SOAP11}"><soap:Body>` +
    '<t:job xmlns:t="urn:svc:soap:types"><t:applicationName>bench</t:applicationName>' +
    `<t:payload name="big.bin" contentType="application/octet-stream"><t:data>${data}</t:data></t:payload>` +
    '</t:job></soap:Body></soap:Envelope>'
  );
}

/** The child: a server that reads each request (or, on /answer, writes a file) and reports its memory. */
async function serve(mib: number): Promise<void> {
  const tempDir = await mkdtemp(join(tmpdir(), 'svc-soap-bench-'));
  // The file the answer sends is made before anything is measured.
  const path = join(tempDir, 'answer.bin');
  const hash = createHash('sha256');
  await writeFile(path, Readable.from(blocks(mib, hash)));
  const answerFile = { size: mib * MIB, sha256: hash.digest('hex') };
  const server = createServer((req, res) => {
    void (async () => {
      global.gc?.();
      const idle = process.memoryUsage.rss();
      let peak = idle;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
      const started = process.hrtime.bigint();
      const report = (size: number, sha256: string): ServerReport => ({
        idleRssMiB: idle / MIB,
        peakRssGrowthMiB: (Math.max(peak, process.memoryUsage.rss()) - idle) / MIB,
        seconds: Number(process.hrtime.bigint() - started) / 1e9,
        size,
        sha256,
      });
      if (req.url === '/answer') {
        const contentId = newContentId();
        await writeMtomResponse(res, 200, envelope(xopInclude(contentId)), [
          {
            contentId,
            contentType: 'application/octet-stream',
            open: () => createReadStream(path),
          },
        ]);
        clearInterval(sampler);
        process.send?.(report(answerFile.size, answerFile.sha256));
        return;
      }
      const received = await readSoapRequest(req, {
        maxRequestBytes: 1024 * MIB,
        maxPayloads: 10,
        maxParameters: 10,
        tempDir,
      });
      clearInterval(sampler);
      const [payload] = received.call?.payloads ?? [];
      const hash = createHash('sha256');
      for await (const chunk of createReadStream(payload.path)) {
        hash.update(chunk as Buffer);
      }
      const result = report(payload.size, hash.digest('hex'));
      await received.cleanup();
      res.end(JSON.stringify(result));
    })();
  });
  server.listen(0, '127.0.0.1', () =>
    process.send?.({ port: (server.address() as AddressInfo).port }),
  );
  process.on('message', () => {
    server.close();
    void rm(tempDir, { recursive: true, force: true }).then(() => process.exit(0));
  });
}

/** The payload: `mib` blocks of 1 MiB, each random block stamped with its index. */
function* blocks(mib: number, hash: ReturnType<typeof createHash>): Generator<Buffer> {
  const block = randomBytes(MIB);
  for (let i = 0; i < mib; i++) {
    block.writeUInt32BE(i, 0);
    hash.update(block);
    yield Buffer.from(block); // a copy: the stream may still hold the last one
  }
}

function post(port: number, headers: Record<string, string>, body: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    body.pipe(req);
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { mib: { type: 'string', default: '100' } } });
  const mib = Number(values.mib);
  const child = fork(__filename, ['serve', String(mib)], { execArgv: ['--expose-gc'] });
  const port = await new Promise<number>((resolve) =>
    child.once('message', (m: { port: number }) => resolve(m.port)),
  );
  const rows: Array<[string, ServerReport, string]> = [];

  const boundary = `bench_${randomBytes(8).toString('hex')}`;
  const mtomHash = createHash('sha256');
  const root = envelope(xopInclude('big@bench'));
  const mtomBody = Readable.from(
    (function* () {
      yield Buffer.from(
        `--${boundary}\r\nContent-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n\r\n${root}`,
      );
      yield Buffer.from(
        `\r\n--${boundary}\r\nContent-ID: <big@bench>\r\nContent-Type: application/octet-stream\r\n\r\n`,
      );
      yield* blocks(mib, mtomHash);
      yield Buffer.from(`\r\n--${boundary}--\r\n`);
    })(),
  );
  const mtom = JSON.parse(
    await post(
      port,
      { 'content-type': `multipart/related; type="application/xop+xml"; boundary="${boundary}"` },
      mtomBody,
    ),
  ) as ServerReport;
  rows.push(['MTOM request, one attachment', mtom, mtomHash.digest('hex')]);

  const inlineHash = createHash('sha256');
  const [before, after] = envelope('\u0000').split('\u0000');
  const inlineBody = Readable.from(
    (function* () {
      yield Buffer.from(before);
      // 1 MiB is not a multiple of 3 bytes: carry the remainder so the base64 text is one stream.
      let carry = Buffer.alloc(0);
      for (const block of blocks(mib, inlineHash)) {
        const bytes = Buffer.concat([carry, block]);
        const whole = bytes.length - (bytes.length % 3);
        carry = bytes.subarray(whole);
        yield Buffer.from(bytes.subarray(0, whole).toString('base64').replace(/.{76}/g, '$&\n'));
      }
      yield Buffer.from(carry.toString('base64') + after);
    })(),
  );
  const inline = JSON.parse(
    await post(port, { 'content-type': 'text/xml; charset=utf-8' }, inlineBody),
  ) as ServerReport;
  rows.push(['plain request, inline base64', inline, inlineHash.digest('hex')]);

  const answerReport = new Promise<ServerReport>((resolve) => child.once('message', resolve));
  const answerHash = createHash('sha256');
  const received = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/answer',
        headers: { 'x-mib': String(mib) },
      },
      resolve,
    );
    req.on('error', reject);
    req.end();
  });
  const answer = await readSoapRequest(received, {
    maxRequestBytes: 1024 * MIB,
    maxPayloads: 10,
    maxParameters: 10,
  });
  for await (const chunk of createReadStream(answer.call!.payloads[0].path)) {
    answerHash.update(chunk as Buffer);
  }
  await answer.cleanup();
  rows.push(['MTOM answer, one attachment', await answerReport, answerHash.digest('hex')]);
  child.send('stop');

  console.log(`SOAP streaming, ${mib} MiB payload (server RSS sampled every 20 ms)`);
  console.log('| path | idle RSS MiB | peak RSS growth MiB | seconds | bytes intact |');
  console.log('|---|---|---|---|---|');
  for (const [name, report, clientHash] of rows) {
    const intact = report.size === mib * MIB && report.sha256 === clientHash ? 'yes' : 'NO';
    console.log(
      `| ${name} | ${report.idleRssMiB.toFixed(0)} | ${report.peakRssGrowthMiB.toFixed(1)} | ${report.seconds.toFixed(2)} | ${intact} |`,
    );
  }
}

if (process.argv[2] === 'serve') {
  void serve(Number(process.argv[3]));
} else {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
