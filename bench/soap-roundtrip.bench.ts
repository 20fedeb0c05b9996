/**
 * Memory of one ROLE=all node during a large SOAP `Process` round trip (issue 5, SPEC §7: a
 * 100 MiB ZIP round trip must not grow the service's memory by more than 64 MiB). The request is
 * MTOM streamed from disk with `http.request`; the answer is read as it arrives, its attachments
 * written to disk. Two shapes: `zip` (one stored ZIP payload: an R script copying a random file,
 * plus that file; the answer is the result ZIP) and `files` (the script and the file as two
 * payloads; the answer is one payload per result file, so the node splits the result ZIP).
 * Each run starts its own node, so one shape's garbage does not hide the other's growth.
 * Memory: VmHWM (peak RSS, reset before the call) after the call minus VmRSS before it, and the
 * peak of VmRSS sampled every 100 ms, both from /proc/<pid>/status.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import {
  closeSync,
  createReadStream,
  createWriteStream,
  openSync,
  readFileSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import * as yauzl from 'yauzl';
import * as yazl from 'yazl';
import { MultipartSplitter, type PartHeaders } from '../src/soap/multipart-related';
import { bareContentId, contentIdFromHref } from '../src/soap/xop';
import { BenchDatabase } from './bench-database';
import { benchNodeEnv, RssSampler, rssBytes, writeRandomFile } from './large-job.bench';
import { ServiceNode } from './service-node';
import { round } from './stats';

const SOAP_PATH = '/svc/api/soap/mtom-jobs';
const ENVELOPE_NS = 'http://schemas.xmlsoap.org/soap/envelope/';
const TYPES_NS = 'urn:svc:soap:types';
const XOP_NS = 'http://www.w3.org/2004/08/xop/include';
const APPLICATION = 'bench';
const MiB = 1024 * 1024;
const COPY_SCRIPT = 'stopifnot(file.copy("big.bin", "copy.bin"))\n';
const SAMPLE_INTERVAL_MS = 100;

export type SoapShape = 'zip' | 'files';

export interface SoapRoundTripRun {
  run: number;
  shape: SoapShape;
  requestBytes: number;
  answerBytes: number;
  baselineRssMiB: number;
  /** VmHWM after the call minus VmRSS before it. */
  hwmGrowthMiB: number;
  /** The largest VmRSS sampled every 100 ms during the call minus VmRSS before it. */
  sampledGrowthMiB: number;
  /** The same, split at the answer's head: request read, job stored and run, result stored... */
  untilAnswerGrowthMiB: number;
  /** ... and the answer written. */
  answerGrowthMiB: number;
  seconds: number;
  intact: boolean;
}

/** One request payload: a file on disk sent as an MTOM attachment. */
interface RequestFile {
  name: string;
  contentType: string;
  path: string;
}

interface AnswerPayload {
  name: string;
  path: string;
  bytes: number;
  sha256: string;
}

interface Answer {
  status: number;
  envelope: string;
  success: boolean;
  payloads: AnswerPayload[];
  bytes: number;
}

async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) {
    hash.update(chunk as Buffer);
  }
  return hash.digest('hex');
}

/** A ZIP written to disk by yazl from files on disk, entries stored (not deflated). */
async function writeStoredZip(path: string, entries: RequestFile[]): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const entry of entries) {
    zip.addFile(entry.path, entry.name, { compress: false });
  }
  zip.end();
  const out = createWriteStream(path);
  zip.outputStream.pipe(out);
  await once(out, 'finish');
}

/** The SHA-256 of one entry of a ZIP on disk, inflated as it is read. */
async function zipEntrySha256(path: string, name: string): Promise<string | undefined> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(path, { lazyEntries: true }, (error, file) =>
      error ? reject(error) : resolve(file),
    ),
  );
  try {
    for (;;) {
      const entry = await new Promise<yauzl.Entry | undefined>((resolve, reject) => {
        zip.once('entry', resolve);
        zip.once('end', () => resolve(undefined));
        zip.once('error', reject);
        zip.readEntry();
      });
      zip.removeAllListeners();
      if (!entry) {
        return undefined;
      }
      if (entry.fileName === name) {
        const stream = await new Promise<Readable>((resolve, reject) =>
          zip.openReadStream(entry, (error, s) => (error ? reject(error) : resolve(s))),
        );
        const hash = createHash('sha256');
        for await (const chunk of stream) {
          hash.update(chunk as Buffer);
        }
        return hash.digest('hex');
      }
    }
  } finally {
    zip.close();
  }
}

/** The MTOM request body, each attachment streamed from its file. */
async function* mtomBody(boundary: string, files: RequestFile[]): AsyncGenerator<Buffer> {
  const cid = (index: number): string => `payload-${index}@bench`;
  const payloads = files
    .map(
      (file, index) =>
        `<t:payload name="${file.name}" contentType="${file.contentType}"><t:data>` +
        `<xop:Include xmlns:xop="${XOP_NS}" href="cid:${encodeURIComponent(cid(index))}"/>` +
        '</t:data></t:payload>',
    )
    .join('');
  const envelope =
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<soapenv:Envelope xmlns:soapenv="${ENVELOPE_NS}" xmlns:t="${TYPES_NS}"><soapenv:Body><t:job>` +
    `<t:applicationName>${APPLICATION}</t:applicationName>${payloads}</t:job></soapenv:Body></soapenv:Envelope>`;
  yield Buffer.from(
    `--${boundary}\r\nContent-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n` +
      `Content-ID: <root@bench>\r\n\r\n${envelope}\r\n`,
  );
  for (const [index, file] of files.entries()) {
    yield Buffer.from(
      `--${boundary}\r\nContent-Type: ${file.contentType}\r\n` +
        `Content-Transfer-Encoding: binary\r\nContent-ID: <${cid(index)}>\r\n\r\n`,
    );
    for await (const chunk of createReadStream(file.path, { highWaterMark: 256 * 1024 })) {
      yield chunk as Buffer;
    }
    yield Buffer.from('\r\n');
  }
  yield Buffer.from(`--${boundary}--\r\n`);
}

/**
 * POSTs a `Process` request in MTOM and reads the answer as it arrives: the root part in memory,
 * each attachment to a file in `dir`, hashed on the way.
 */
async function processMtom(
  baseUrl: string,
  files: RequestFile[],
  dir: string,
  onAnswerHead: () => void = () => undefined,
): Promise<Answer> {
  const boundary = `bench_${randomBytes(8).toString('hex')}`;
  const response = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
    const req = request(`${baseUrl}${SOAP_PATH}`, {
      method: 'POST',
      headers: {
        'Content-Type':
          `multipart/related; type="application/xop+xml"; start="<root@bench>"; ` +
          `start-info="text/xml"; boundary="${boundary}"`,
        SOAPAction: '"urn:svc:soap:Process"',
      },
    });
    req.on('response', resolve);
    req.on('error', reject);
    Readable.from(mtomBody(boundary, files)).pipe(req);
  });
  onAnswerHead();
  const contentType = response.headers['content-type'] ?? '';
  const status = response.statusCode ?? 0;
  const boundaryMatch = /boundary="?([^";]+)"?/.exec(contentType);
  if (status !== 200 || !contentType.startsWith('multipart/related') || !boundaryMatch) {
    let text = '';
    for await (const chunk of response) {
      text += (chunk as Buffer).toString();
    }
    throw new Error(`Process answered ${status} ${contentType}: ${text.slice(0, 500)}`);
  }
  let root: Buffer[] | undefined;
  const attachments = new Map<string, { path: string; bytes: number; sha256: string }>();
  let count = 0;
  const splitter = new MultipartSplitter(boundaryMatch[1], (headers: PartHeaders) => {
    if (!root) {
      const chunks: Buffer[] = [];
      root = chunks;
      return { write: (chunk) => chunks.push(Buffer.from(chunk)), end: () => undefined };
    }
    const path = join(dir, `answer-${count++}`);
    const fd = openSync(path, 'w');
    const hash = createHash('sha256');
    let bytes = 0;
    const contentId = bareContentId(headers.get('content-id') ?? '');
    return {
      write: (chunk) => {
        writeSync(fd, chunk);
        hash.update(chunk);
        bytes += chunk.length;
      },
      end: () => {
        closeSync(fd);
        attachments.set(contentId, { path, bytes, sha256: hash.digest('hex') });
      },
    };
  });
  let answerBytes = 0;
  for await (const chunk of response) {
    answerBytes += (chunk as Buffer).length;
    splitter.write(chunk as Buffer);
  }
  splitter.end();
  const envelope = Buffer.concat(root ?? []).toString('utf8');
  const payloads: AnswerPayload[] = [];
  for (const match of envelope.matchAll(/<payload name="([^"]*)"[^>]*>.*?href="([^"]*)"/g)) {
    const attachment = attachments.get(contentIdFromHref(match[2]) ?? '');
    if (!attachment) {
      throw new Error(`payload ${match[1]} refers to no attachment: ${envelope}`);
    }
    payloads.push({ name: match[1], ...attachment });
  }
  return {
    status,
    envelope,
    success: /<success>true<\/success>/.test(envelope),
    payloads,
    bytes: answerBytes,
  };
}

export async function soapRoundTripRun(
  database: BenchDatabase,
  options: {
    run: number;
    sizeMiB: number;
    shape: SoapShape;
    main: string;
    log: (line: string) => void;
    track: (node: ServiceNode | null) => void;
  },
): Promise<SoapRoundTripRun> {
  const { shape } = options;
  const dir = await mkdtemp(join(tmpdir(), 'svc-bench-soap-'));
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: database.url,
    scriptSlots: 1,
    main: options.main,
    env: {
      MAX_REQUEST_BYTES: String((options.sizeMiB + 16) * MiB),
      SOAP_TIMEOUT_SECONDS: '600',
      LOG_LEVEL: 'warn',
      ...benchNodeEnv(),
    },
  });
  options.track(node);
  try {
    const script: RequestFile = {
      name: 'copy.R',
      contentType: 'text/plain',
      path: join(dir, 'copy.R'),
    };
    writeFileSync(script.path, COPY_SCRIPT);
    // Warm-up: both shapes once with a small file, so the baseline includes what any call loads.
    const small: RequestFile = {
      name: 'big.bin',
      contentType: 'application/octet-stream',
      path: join(dir, 'small.bin'),
    };
    writeFileSync(small.path, randomBytes(64 * 1024));
    const smallZip: RequestFile = {
      name: 'job.zip',
      contentType: 'application/zip',
      path: join(dir, 'small.zip'),
    };
    await writeStoredZip(smallZip.path, [script, small]);
    for (const files of [[smallZip], [script, small]]) {
      const answer = await processMtom(node.url, files, dir);
      if (!answer.success) {
        throw new Error(`the warm-up call failed: ${answer.envelope}`);
      }
    }
    const big: RequestFile = {
      name: 'big.bin',
      contentType: 'application/octet-stream',
      path: join(dir, 'big.bin'),
    };
    const fileBytes = options.sizeMiB * MiB;
    await writeRandomFile(big.path, fileBytes);
    const bigSha256 = await sha256OfFile(big.path);
    const bigZip: RequestFile = {
      name: 'job.zip',
      contentType: 'application/zip',
      path: join(dir, 'job.zip'),
    };
    if (shape === 'zip') {
      await writeStoredZip(bigZip.path, [script, big]);
    }

    const files = shape === 'zip' ? [bigZip] : [script, big];
    const requestBytes = files.reduce((sum, file) => sum + statSync(file.path).size, 0);
    await sleep(1000);
    const baseline = rssBytes(node.pid);
    // "5" resets the peak resident set (VmHWM) to the current one (proc(5), clear_refs).
    writeFileSync(`/proc/${node.pid}/clear_refs`, '5');
    const sampler = new RssSampler(node.pid, SAMPLE_INTERVAL_MS);
    const t0 = performance.now();
    let untilAnswerPeak = 0;
    const answer = await processMtom(node.url, files, dir, () => {
      untilAnswerPeak = sampler.lap();
    });
    const seconds = (performance.now() - t0) / 1000;
    const answerPeak = sampler.stop();
    const sampledPeak = Math.max(untilAnswerPeak, answerPeak);
    const hwm =
      Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${node.pid}/status`, 'utf8'))?.[1]) *
      1024;
    let intact = answer.success && answer.payloads.length === 1;
    if (intact && shape === 'zip') {
      intact = (await zipEntrySha256(answer.payloads[0].path, 'copy.bin')) === bigSha256;
    } else if (intact) {
      intact = answer.payloads[0].name === 'copy.bin' && answer.payloads[0].sha256 === bigSha256;
    }
    for (const payload of answer.payloads) {
      await rm(payload.path, { force: true });
    }
    const run: SoapRoundTripRun = {
      run: options.run,
      shape,
      requestBytes,
      answerBytes: answer.bytes,
      baselineRssMiB: round(baseline / MiB, 1),
      hwmGrowthMiB: round((hwm - baseline) / MiB, 1),
      sampledGrowthMiB: round((sampledPeak - baseline) / MiB, 1),
      untilAnswerGrowthMiB: round((untilAnswerPeak - baseline) / MiB, 1),
      answerGrowthMiB: round((answerPeak - baseline) / MiB, 1),
      seconds: round(seconds, 2),
      intact,
    };
    options.log(
      `  run ${run.run} ${shape}: ${round(requestBytes / MiB, 1)} MiB sent, ${round(run.answerBytes / MiB, 1)} MiB ` +
        `answered in ${run.seconds} s; RSS ${run.baselineRssMiB} MiB, growth +${run.hwmGrowthMiB} MiB (VmHWM), ` +
        `+${run.sampledGrowthMiB} MiB (sampled; until the answer +${run.untilAnswerGrowthMiB}, ` +
        `answer +${run.answerGrowthMiB})${intact ? '' : ` (ANSWER WRONG: ${answer.envelope.slice(0, 300)})`}`,
    );
    return run;
  } finally {
    await node.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
