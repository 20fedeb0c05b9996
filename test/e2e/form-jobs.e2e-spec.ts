import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CatalogService } from '../../src/catalog/catalog.service';
import { explodeZip } from '../../src/jobs/job-archive';
import { fileField, FormPart, postForm, textField } from '../support/form-client';
import { Answer, parseXml, request, REST, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';
import { makeZip } from '../support/zip-fixtures';

const MAX_REQUEST_BYTES = 1024 * 1024;
const MAX_FILES = 4;
const MAX_FIELDS = 12;

/** Writes the job's file names, then the configuration.txt it got, into seen.txt. */
const SHOW_JOB = `
files <- sort(setdiff(list.files(), "out.log"), method = "radix")
conf <- readLines("configuration.txt")
writeLines(c(files, "--", sort(conf[nzchar(conf)], method = "radix")), "seen.txt")
`;

const APP = textField('X-SVC-Application-Name', 'demo');
const SCRIPT = fileField('show.R', SHOW_JOB, 'text/plain');

interface Seen {
  files: string[];
  configuration: string[];
}

async function expectXml(answer: Answer, status: number): Promise<Record<string, string>> {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toBe('application/xml; charset=utf-8');
  expect((await validateAgainstSchema(answer.text, 'rest-data.xsd')).errors).toEqual([]);
  const document = parseXml(answer.text);
  return status === 202 ? document.jobToken : document.error;
}

/** A 4xx answer in the plain XML type with the `error` body; returns its message. */
async function expectError(answer: Answer, status: number): Promise<string> {
  const error = await expectXml(answer, status);
  expect(error.status).toBe(String(status));
  return String(error.message);
}

/** Runs a form job to its end; returns what SHOW_JOB saw. */
async function runFormJob(base: string, parts: FormPart[]): Promise<Seen> {
  const token = await expectXml(await postForm(base, parts), 202);
  const result = parseXml((await waitForResult(token.resultUri)).text).result;
  const data = await request(result.dataUri);
  if (result.success !== 'true') {
    throw new Error(`the job failed: ${data.text}`);
  }
  const files = await explodeZip(data.body, {
    maxEntries: 10,
    maxUncompressedBytes: 1e8,
    maxCompressionRatio: 1e6,
  });
  const seen = files.find((file) => file.name === 'seen.txt')?.content.toString('utf8') ?? '';
  const [names, configuration] = seen.trimEnd().split('\n--');
  return {
    files: names.split('\n').filter(Boolean),
    configuration: (configuration ?? '').split('\n').filter(Boolean),
  };
}

const BOUNDARY = 'svc-test-boundary';

/** A form of application demo with one file big.csv of `count` chunks of `chunkBytes` each. */
function bigFormChunks(chunkBytes: number, count: number): Buffer[] {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="X-SVC-Application-Name"\r\n\r\ndemo\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="X-SVC-JobFile[]"; filename="big.csv"\r\n` +
      'Content-Type: text/csv\r\n\r\n',
  );
  const chunk = Buffer.alloc(chunkBytes, 'y');
  return [
    head,
    ...Array.from({ length: count }, () => chunk),
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ];
}

/**
 * A form sent in chunks, one after the other: with no Content-Length (so only the streaming
 * limits can stop it), or with one (`strict`: then a failed write, such as the EPIPE of a
 * connection closed under the client, fails the request as it fails a browser's).
 */
async function postChunked(
  url: string,
  boundary: string,
  chunks: Buffer[],
  strict = false,
): Promise<{ status: number; text: string }> {
  let sent: () => void = () => undefined;
  let sendFailed: (error: Error) => void = () => undefined;
  // Strict: the answer counts once the whole body is also sent, as fetch counts it.
  const allSent = strict
    ? new Promise<void>((resolve, reject) => {
        sent = resolve;
        sendFailed = reject;
      })
    : Promise.resolve();
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          'Content-Type': `multipart/form-data; boundary=${boundary}`,
          ...(strict
            ? { 'Content-Length': String(chunks.reduce((sum, chunk) => sum + chunk.length, 0)) }
            : { 'Transfer-Encoding': 'chunked' }),
        },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (chunk: Buffer) => parts.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    // Chunked: the service may answer and close before the whole body is sent, that is the point.
    req.on('error', (error) => {
      if (strict) {
        reject(error);
        sendFailed(error);
      }
    });
    const write = (index: number): void => {
      if (index === chunks.length) {
        req.end(() => sent());
        return;
      }
      req.write(chunks[index], () => write(index + 1));
    };
    write(0);
  });
  const [result] = await Promise.all([answer, allSent]);
  return result;
}

describe('multipart/form-data job submissions (SPEC §3.1, §6)', () => {
  let service: TestService;
  let tempDir: string;

  beforeAll(async () => {
    tempDir = mkdtempSync(join(tmpdir(), 'svc-form-test-'));
    service = await startTestService({
      MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES),
      FORM_MAX_FILES: String(MAX_FILES),
      FORM_MAX_FIELDS: String(MAX_FIELDS),
      FORM_TEMP_DIR: tempDir,
    });
    await service.app
      .get(CatalogService)
      .putFile('demo', 'R_SCRIPTS', 'show.R', Buffer.from(SHOW_JOB));
  });
  afterEach(() => {
    // Uploaded files live only while their request is handled, whatever its outcome.
    expect(readdirSync(tempDir)).toEqual([]);
  });
  afterAll(async () => {
    await service.stop();
    rmSync(tempDir, { recursive: true, force: true });
  });

  describe('accepted forms', () => {
    it('runs two files with meta type A and type B given as form fields', async () => {
      const seen = await runFormJob(service.url, [
        APP,
        SCRIPT,
        fileField('data.csv', 'x\n1\n', 'text/csv'),
        textField('X-SVC-Meta-Colour', 'blue'),
        textField('X-SVC-Meta-#1', 'Size = 3'),
      ]);
      expect(seen.files).toEqual(['configuration.txt', 'data.csv', 'show.R']);
      // Type A names from form fields keep their case (headers would lower-case them).
      expect(seen.configuration).toEqual(['Colour = blue', 'Size = 3']);
    });

    it('explodes a ZIP sent as application/octet-stream and adds the other files as they are', async () => {
      const zip = await makeZip([
        { name: 'a.csv', content: 'a\n1\n' },
        { name: 'configuration.txt', content: 'fromZip = yes\n' },
      ]);
      const seen = await runFormJob(service.url, [
        APP,
        fileField('bundle.ZIP', zip, 'application/octet-stream'),
        fileField('C:\\fakepath\\b.txt', 'plain'),
        fileField('show.R', SHOW_JOB),
      ]);
      expect(seen.files).toEqual(['a.csv', 'b.txt', 'configuration.txt', 'show.R']);
      expect(seen.configuration).toEqual(['fromZip = yes']);
    });

    it('explodes a ZIP recognised by its content type whatever its name', async () => {
      const zip = await makeZip([{ name: 'inside.csv', content: 'x\n' }]);
      const seen = await runFormJob(service.url, [
        APP,
        fileField('archive.bin', zip, 'application/x-zip-compressed'),
        SCRIPT,
      ]);
      expect(seen.files).toEqual(['configuration.txt', 'inside.csv', 'show.R']);
    });

    it('runs a catalog script for a form with no file, matching field names in any case', async () => {
      const seen = await runFormJob(service.url, [
        textField('x-svc-application-name', 'demo'),
        textField('x-svc-meta-RSCRIPT', 'show.R'),
        // What a browser sends for a file input with nothing chosen, and for empty inputs.
        fileField('', Buffer.alloc(0), 'application/octet-stream', 'x-svc-jobfile[]'),
        textField('X-SVC-Meta-sweaveFile', ''),
        textField('X-SVC-Meta-#2', ''),
        textField('jobSubmitButton', 'Submit job'),
      ]);
      expect(seen.files).toEqual(['configuration.txt', 'show.R']);
      expect(seen.configuration).toEqual(['rScript = show.R']);
    });

    it('answers application/json when Accept asks for JSON, with the jobToken element (the seed’s browser contract)', async () => {
      for (const accept of [
        'application/json',
        'application/vnd.svc+json',
        'text/html;q=0.5, application/json',
      ]) {
        const answer = await postForm(service.url, [APP, SCRIPT], { Accept: accept });
        expect(answer.status).toBe(202);
        expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
        const body = JSON.parse(answer.text) as Record<string, unknown>;
        expect(Object.keys(body)).toEqual(['jobToken']);
        const jobToken = body.jobToken as Record<string, string>;
        expect(jobToken.applicationName).toBe('demo');
        expect(answer.headers.get('location')).toBe(jobToken.resultUri);
      }
    });

    it('answers application/xml to a browser, to no Accept and to one it cannot meet (never 406)', async () => {
      for (const accept of [
        'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
        'image/png',
        '',
      ]) {
        const answer = await postForm(service.url, [APP, SCRIPT], accept ? { Accept: accept } : {});
        const token = await expectXml(answer, 202);
        expect(token.applicationName).toBe('demo');
      }
    });
  });

  describe('refused forms: 400', () => {
    it.each<[string, FormPart[], RegExp]>([
      ['no application name', [SCRIPT], /X-SVC-Application-Name is missing/],
      [
        'an invalid application name',
        [textField('X-SVC-Application-Name', 'not valid!'), SCRIPT],
        /"not valid!" is invalid/,
      ],
      [
        'the application name twice',
        [APP, textField('x-svc-application-name', 'demo'), SCRIPT],
        /given 2 times/,
      ],
      [
        'a type B meta field without "="',
        [APP, SCRIPT, textField('X-SVC-Meta-#1', 'no equals sign')],
        /must have the form "name = value"/,
      ],
      [
        'the same meta parameter twice',
        [APP, SCRIPT, textField('X-SVC-Meta-size', '1'), textField('X-SVC-Meta-#1', 'size = 2')],
        /"size" is given more than once/,
      ],
      ['two R scripts', [APP, SCRIPT, fileField('other.R', '1')], /at most one R script/],
      [
        'a .zip part that is no ZIP',
        [APP, fileField('broken.zip', 'not a zip')],
        /in the file "broken.zip"/,
      ],
      ['a file in another field', [APP, fileField('x.R', '1', 'text/plain', 'upload')], /"upload"/],
      ['neither a file nor a catalog script', [APP], /no job file and no X-SVC-Meta-rScript/],
    ])('%s', async (_what, parts, message) => {
      expect(await expectError(await postForm(service.url, parts), 400)).toMatch(message);
    });

    it('refuses a ZIP part whose entries are in a directory, naming the part', async () => {
      const zip = await makeZip([{ name: 'dir/a.csv', content: 'x' }]);
      const message = await expectError(
        await postForm(service.url, [APP, fileField('data.zip', zip)]),
        400,
      );
      expect(message).toMatch(/in the file "data.zip".*nested directories are not supported/);
    });

    it('answers errors in JSON when asked, never with a vnd type', async () => {
      const answer = await postForm(service.url, [SCRIPT], { Accept: 'application/vnd.svc+json' });
      expect(answer.status).toBe(400);
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(JSON.parse(answer.text)).toMatchObject({ error: { status: 400 } });
    });

    it('answers a multipart body without a boundary 400, not 415', async () => {
      const answer = await request(`${service.url}${REST}/jobs`, {
        method: 'POST',
        headers: { 'Content-Type': 'multipart/form-data' },
        body: 'x',
      });
      expect(await expectError(answer, 400)).toMatch(/cannot be read/);
    });
  });

  describe('limits: 413', () => {
    it('refuses a file over the request size limit', async () => {
      const big = fileField('big.csv', Buffer.alloc(MAX_REQUEST_BYTES + 1, 'x'));
      expect(await expectError(await postForm(service.url, [APP, big]), 413)).toMatch(
        new RegExp(`larger than ${MAX_REQUEST_BYTES} bytes`),
      );
    });

    it('answers a client still sending a body declared over the limit with the 413, not a reset', async () => {
      // Declared too large (6 MiB, under the 8 MiB read on), refused before a byte is read; the
      // client keeps sending, a chunk at a time. A connection closed under it fails its next
      // write (EPIPE): the 413 never arrives.
      const chunks = bigFormChunks(16 * 1024, 384);
      for (let attempt = 0; attempt < 3; attempt++) {
        const answer = await postChunked(`${service.url}${REST}/jobs`, BOUNDARY, chunks, true);
        expect(answer.status).toBe(413);
        expect(parseXml(answer.text).error.message).toMatch(/larger than 1048576 bytes/);
      }
    });

    it('refuses an over-limit file streamed without a Content-Length', async () => {
      const chunks = bigFormChunks(64 * 1024, 20);
      const answer = await postChunked(`${service.url}${REST}/jobs`, BOUNDARY, chunks);
      expect(answer.status).toBe(413);
      expect(parseXml(answer.text).error.status).toBe('413');
    });

    it('refuses a form with too many files', async () => {
      const files = Array.from({ length: MAX_FILES + 1 }, (_, i) => fileField(`f${i}.csv`, 'x'));
      expect(await expectError(await postForm(service.url, [APP, ...files]), 413)).toMatch(
        new RegExp(`more than ${MAX_FILES} files`),
      );
    });

    it('refuses a form with too many fields', async () => {
      const fields = Array.from({ length: MAX_FIELDS + 1 }, (_, i) =>
        textField(`X-SVC-Meta-p${i}`, 'v'),
      );
      expect(await expectError(await postForm(service.url, [APP, SCRIPT, ...fields]), 413)).toMatch(
        new RegExp(`more than ${MAX_FIELDS} fields`),
      );
    });
  });
});
