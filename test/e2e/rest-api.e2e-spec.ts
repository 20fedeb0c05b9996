/**
 * The REST API of jobs and results, the seed's contract.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { CatalogService } from '../../src/catalog/catalog.service';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip, ZipFixtureEntry } from '../support/zip-fixtures';
import { Answer, parseXml, postZip, request, REST, waitForResult } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';

type Attributes = Record<string, string>;

const JSON_TYPE = 'application/vnd.svc+json';
const ACCEPT_JSON = { Accept: JSON_TYPE };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const WRITE_HI = 'writeLines("hi", "out.txt")\n';
const HI_JOB: ZipFixtureEntry[] = [{ name: 'hi.R', content: WRITE_HI }];

/** Reads configuration.txt the simple way and writes what it saw, sorted by name. */
const READ_CONFIGURATION = `
lines <- readLines("configuration.txt")
lines <- lines[nzchar(lines) & !startsWith(lines, "#")]
pairs <- strsplit(lines, " = ", fixed = TRUE)
seen <- vapply(pairs, function(p) paste0(p[1], "=", p[2]), "")
writeLines(sort(seen, method = "radix"), "seen.txt")
`;

interface FinishedJob {
  token: Attributes;
  result: Attributes;
  data: Answer;
}

async function expectValidXml(answer: Answer): Promise<void> {
  expect(answer.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+xml/);
  expect((await validateAgainstSchema(answer.text, 'rest-data.xsd')).errors).toEqual([]);
}

/** Submits a ZIP job and waits for its result and data (XML answers, links as the service builds them). */
async function runJob(
  base: string,
  files: ZipFixtureEntry[],
  headers: Record<string, string> = {},
  application = 'demo',
): Promise<FinishedJob> {
  const submitted = await postZip(base, await makeZip(files), {
    'X-SVC-Application-Name': application,
    ...headers,
  });
  if (submitted.status !== 202) {
    throw new Error(`submission answered ${submitted.status}: ${submitted.text}`);
  }
  const token = parseXml(submitted.text).jobToken;
  const result = parseXml((await waitForResult(token.resultUri)).text).result;
  return { token, result, data: await request(result.dataUri) };
}

async function zipEntries(zip: Buffer): Promise<Map<string, string>> {
  const files = await explodeZip(zip, {
    maxEntries: 100,
    maxUncompressedBytes: 1e9,
    maxCompressionRatio: 1e6,
  });
  return new Map(files.map((file) => [file.name, file.content.toString('utf8')]));
}

/** The `result` children of an XML `results` answer, as a list whatever their number. */
function xmlResultList(text: string): Attributes[] {
  const results = parseXml(text).results as unknown;
  if (typeof results !== 'object' || results === null || !('result' in results)) {
    return [];
  }
  const items = (results as { result: Attributes | Attributes[] }).result;
  return Array.isArray(items) ? items : [items];
}

/**
 * One request through node:http, which (unlike fetch) lets a test choose the Host header.
 * No agent: the socket is closed afterwards, so the service can stop at once.
 */
async function requestWithHost(
  url: string,
  host: string,
  init: { method?: string; headers?: Record<string, string>; body?: Buffer } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: init.method ?? 'GET', headers: { ...init.headers, Host: host }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            for (const item of Array.isArray(value) ? value : [value ?? '']) {
              headers.append(name, item);
            }
          }
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, headers, body, text: body.toString('utf8') });
        });
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

describe('the REST API over HTTP (SPEC §3–§5.1)', () => {
  let service: TestService;
  let ok: FinishedJob;

  beforeAll(async () => {
    // The tests' requests come from the loopback, here a proxy whose forwarded headers count.
    service = await startTestService({ TRUST_PROXY: 'loopback' });
    ok = await runJob(service.url, HI_JOB);
  });
  afterAll(async () => {
    await service.stop();
  });

  describe('JSON and XML representations (SPEC §4)', () => {
    it('answers a submission and its result in the JSON forms of SPEC §4', async () => {
      const submitted = await postZip(service.url, await makeZip(HI_JOB), ACCEPT_JSON);
      expect(submitted.status).toBe(202);
      expect(submitted.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+json(;|$)/);
      const { jobToken } = JSON.parse(submitted.text) as { jobToken: Record<string, unknown> };
      expect(Object.keys(JSON.parse(submitted.text) as object)).toEqual(['jobToken']);
      expect(Object.keys(jobToken)).toEqual([
        'jobId',
        'applicationName',
        'submissionTime',
        'applicationResultsUri',
        'resultUri',
      ]);
      const jobId = String(jobToken.jobId);
      expect(jobId).toMatch(UUID);
      const resultUri = `${service.url}${REST}/results/demo/${jobId}`;
      expect(jobToken).toEqual({
        jobId,
        applicationName: 'demo',
        submissionTime: expect.stringMatching(ISO_TIME),
        applicationResultsUri: `${service.url}${REST}/results/demo`,
        resultUri,
      });
      expect(submitted.headers.get('location')).toBe(resultUri);

      const ready = await waitForResult(resultUri, ACCEPT_JSON);
      expect(ready.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+json(;|$)/);
      const { result } = JSON.parse(ready.text) as { result: Record<string, unknown> };
      expect(result.resultTime).toMatch(ISO_TIME);
      // Key order, a JSON boolean and nothing else: the text itself is compared.
      expect(ready.text).toBe(
        `{"result":{"jobId":"${jobId}","applicationName":"demo",` +
          `"resultTime":"${String(result.resultTime)}","success":true,"type":"zip",` +
          `"selfUri":"${resultUri}","dataUri":"${service.url}${REST}/result/demo/${jobId}.zip"}}`,
      );
    });

    it('answers jobToken, result, jobStatus and error in XML that validates against rest-data.xsd', async () => {
      const submitted = await postZip(service.url, await makeZip(HI_JOB));
      expect(submitted.status).toBe(202);
      await expectValidXml(submitted);
      const token = parseXml(submitted.text).jobToken;

      const ready = await waitForResult(token.resultUri);
      await expectValidXml(ready);
      expect(parseXml(ready.text).result).toMatchObject({
        jobId: token.jobId,
        success: 'true',
        type: 'zip',
      });

      const status = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`);
      expect(status.status).toBe(200);
      await expectValidXml(status);

      const missing = await request(`${service.url}${REST}/results/demo/${randomUUID()}`);
      expect(missing.status).toBe(404);
      await expectValidXml(missing);
      expect(parseXml(missing.text).error).toMatchObject({ status: '404' });

      const badId = await request(`${service.url}${REST}/results/demo/not-a-uuid`);
      expect(badId.status).toBe(400);
      await expectValidXml(badId);
      expect(parseXml(badId.text).error).toMatchObject({ status: '400' });
    });

    it('answers a jobStatus in JSON with attempts as a number', async () => {
      const status = await request(`${service.url}${REST}/jobs/demo/${ok.token.jobId}`, {
        headers: ACCEPT_JSON,
      });
      expect(status.status).toBe(200);
      expect(status.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+json(;|$)/);
      expect(JSON.parse(status.text)).toEqual({
        jobStatus: {
          jobId: ok.token.jobId,
          applicationName: 'demo',
          state: 'DONE',
          submissionTime: ok.token.submissionTime,
          startTime: expect.stringMatching(ISO_TIME),
          finishTime: expect.stringMatching(ISO_TIME),
          attempts: 1,
          resultUri: ok.token.resultUri,
        },
      });
    });
  });

  describe('listing an application’s results (GET /results/{app})', () => {
    /** Oldest first; one result per job, finished one after the other. */
    let listed: FinishedJob[];
    let other: FinishedJob;
    const listUri = (app: string, query = ''): string =>
      `${service.url}${REST}/results/${app}${query}`;

    beforeAll(async () => {
      listed = [];
      for (let i = 0; i < 3; i += 1) {
        listed.push(await runJob(service.url, HI_JOB, {}, 'listing'));
      }
      other = await runJob(service.url, HI_JOB, {}, 'listing_other');
    });

    it('lists newest first, only the application’s own results, with the links of each result', async () => {
      const answer = await request(listUri('listing'));
      expect(answer.status).toBe(200);
      await expectValidXml(answer);
      const items = xmlResultList(answer.text);
      expect(items.map((item) => item.jobId)).toEqual(
        [...listed].reverse().map((job) => job.token.jobId),
      );
      expect(items).toEqual([...listed].reverse().map((job) => job.result));
      const times = items.map((item) => Date.parse(item.resultTime));
      expect([...times].sort((a, b) => b - a)).toEqual(times);

      const others = xmlResultList((await request(listUri('listing_other'))).text);
      expect(others).toEqual([other.result]);
    });

    it('pages with limit and offset', async () => {
      const newestFirst = [...listed].reverse().map((job) => job.token.jobId);
      const page = async (query: string): Promise<string[]> => {
        const answer = await request(listUri('listing', query));
        expect(answer.status).toBe(200);
        await expectValidXml(answer);
        return xmlResultList(answer.text).map((item) => item.jobId);
      };
      expect(await page('?limit=2&offset=1')).toEqual(newestFirst.slice(1, 3));
      expect(await page('?limit=2')).toEqual(newestFirst.slice(0, 2));
      expect(await page('?offset=2')).toEqual(newestFirst.slice(2));
      expect(await page('?limit=1&offset=1')).toEqual(newestFirst.slice(1, 2));
      expect(await page('?limit=0')).toEqual([]);
      expect(await page('?offset=3')).toEqual([]);
    });

    it.each(['limit=-1', 'limit=abc', 'offset=-1', 'limit=1.5'])(
      'refuses %s with 400 and an error body',
      async (query) => {
        const answer = await request(listUri('listing', `?${query}`));
        expect(answer.status).toBe(400);
        await expectValidXml(answer);
        expect(parseXml(answer.text).error).toMatchObject({ status: '400' });
      },
    );

    it('renders no result as "", one as an object and several as an array in JSON', async () => {
      const json = async (app: string): Promise<unknown> => {
        const answer = await request(listUri(app), { headers: ACCEPT_JSON });
        expect(answer.status).toBe(200);
        expect(answer.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+json(;|$)/);
        return JSON.parse(answer.text);
      };
      const asJson = (result: Attributes): Record<string, unknown> => ({
        ...result,
        success: result.success === 'true',
      });
      expect(await json('nothing_here')).toEqual({ results: '' });
      expect(await json('listing_other')).toEqual({ results: { result: asJson(other.result) } });
      expect(await json('listing')).toEqual({
        results: { result: [...listed].reverse().map((job) => asJson(job.result)) },
      });
    });

    it('renders zero, one and several results as XML valid against rest-data.xsd', async () => {
      for (const [app, count] of [
        ['nothing_here', 0],
        ['listing_other', 1],
        ['listing', 3],
      ] as const) {
        const answer = await request(listUri(app));
        expect(answer.status).toBe(200);
        await expectValidXml(answer);
        expect(xmlResultList(answer.text)).toHaveLength(count);
      }
    });
  });

  describe('absolute URIs (SPEC §3.2)', () => {
    const forwarded = { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com' };

    it('builds links from Host when nothing is forwarded', async () => {
      const host = 'svc.internal:8080';
      const submitted = await requestWithHost(`${service.url}${REST}/jobs`, host, {
        method: 'POST',
        headers: { 'Content-Type': 'application/zip', 'X-SVC-Application-Name': 'demo' },
        body: await makeZip(HI_JOB),
      });
      expect(submitted.status).toBe(202);
      const token = parseXml(submitted.text).jobToken;
      const resultUri = `http://${host}${REST}/results/demo/${token.jobId}`;
      expect(token.resultUri).toBe(resultUri);
      expect(token.applicationResultsUri).toBe(`http://${host}${REST}/results/demo`);
      expect(submitted.headers.get('location')).toBe(resultUri);

      await waitForResult(`${service.url}${REST}/results/demo/${token.jobId}`);
      const result = parseXml(
        (await requestWithHost(`${service.url}${REST}/results/demo/${token.jobId}`, host)).text,
      ).result;
      expect(result.selfUri).toBe(resultUri);
      expect(result.dataUri).toBe(`http://${host}${REST}/result/demo/${token.jobId}.zip`);
    });

    it('builds links from X-Forwarded-Proto and X-Forwarded-Host of a proxy TRUST_PROXY trusts', async () => {
      const submitted = await postZip(service.url, await makeZip(HI_JOB), forwarded);
      expect(submitted.status).toBe(202);
      const token = parseXml(submitted.text).jobToken;
      const resultUri = `https://api.example.com${REST}/results/demo/${token.jobId}`;
      expect(token).toMatchObject({
        resultUri,
        applicationResultsUri: `https://api.example.com${REST}/results/demo`,
      });
      expect(submitted.headers.get('location')).toBe(resultUri);

      const local = `${service.url}${REST}/results/demo/${token.jobId}`;
      await waitForResult(local);
      const result = parseXml((await request(local, { headers: forwarded })).text).result;
      expect(result.selfUri).toBe(resultUri);
      expect(result.dataUri).toBe(`https://api.example.com${REST}/result/demo/${token.jobId}.zip`);

      const listed = xmlResultList(
        (await request(`${service.url}${REST}/results/demo`, { headers: forwarded })).text,
      ).find((item) => item.jobId === token.jobId);
      expect(listed).toEqual(result);

      const status = parseXml(
        (await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, { headers: forwarded }))
          .text,
      ).jobStatus;
      expect(status.resultUri).toBe(resultUri);
    });

    it('takes the first of several forwarded values (the client-facing proxy)', async () => {
      const result = parseXml(
        (
          await request(ok.token.resultUri, {
            headers: {
              'X-Forwarded-Proto': 'https, http',
              'X-Forwarded-Host': 'api.example.com, proxy.internal',
            },
          })
        ).text,
      ).result;
      expect(result.selfUri).toBe(`https://api.example.com${REST}/results/demo/${ok.token.jobId}`);
    });

    it('honours X-Forwarded-Protocol as RSB did', async () => {
      const result = parseXml(
        (
          await request(ok.token.resultUri, {
            headers: { 'X-Forwarded-Protocol': 'https', 'X-Forwarded-Host': 'api.example.com' },
          })
        ).text,
      ).result;
      expect(result.selfUri).toBe(`https://api.example.com${REST}/results/demo/${ok.token.jobId}`);
      expect(result.dataUri).toBe(
        `https://api.example.com${REST}/result/demo/${ok.token.jobId}.zip`,
      );

      const schemeOnly = parseXml(
        (await request(ok.token.resultUri, { headers: { 'X-Forwarded-Protocol': 'https' } })).text,
      ).result;
      expect(schemeOnly.selfUri).toBe(ok.token.resultUri.replace(/^http:/, 'https:'));
    });

    it.each([
      'evil.example.com/steal',
      'evil.example.com?x=1',
      'a b.example.com',
      'evil.example.com"><x',
      'user@evil.example.com',
    ])('ignores a malformed X-Forwarded-Host %j', async (host) => {
      const answer = await request(ok.token.resultUri, {
        headers: { 'X-Forwarded-Host': host, 'X-Forwarded-Proto': 'javascript' },
      });
      expect(answer.status).toBe(200);
      const result = parseXml(answer.text).result;
      expect(result.selfUri).toBe(ok.token.resultUri);
      expect(result.dataUri).toBe(ok.result.dataUri);
      expect(answer.text).not.toContain('evil');
    });
  });

  describe('result data (GET and HEAD /result/{app}/{jobId}.{ext})', () => {
    it('sends the data with Content-Type, Content-Length and a strong ETag', () => {
      expect(ok.data.status).toBe(200);
      expect(ok.data.headers.get('content-type')).toBe('application/zip');
      expect(Number(ok.data.headers.get('content-length'))).toBe(ok.data.body.length);
      expect(ok.data.body.length).toBeGreaterThan(10);
      expect(ok.data.headers.get('etag')).toMatch(/^"[^"]+"$/);
    });

    it('answers If-None-Match with the ETag by 304 without a body', async () => {
      const etag = ok.data.headers.get('etag') ?? '';
      const notModified = await request(ok.result.dataUri, { headers: { 'If-None-Match': etag } });
      expect(notModified.status).toBe(304);
      expect(notModified.body.length).toBe(0);
      expect(notModified.headers.get('etag')).toBe(etag);

      const changed = await request(ok.result.dataUri, {
        headers: { 'If-None-Match': '"something-else"' },
      });
      expect(changed.status).toBe(200);
      expect(changed.body.equals(ok.data.body)).toBe(true);
    });

    it('answers a byte range with 206 and an unsatisfiable one with 416', async () => {
      const size = ok.data.body.length;
      const partial = await request(ok.result.dataUri, { headers: { Range: 'bytes=0-9' } });
      expect(partial.status).toBe(206);
      expect(partial.headers.get('content-range')).toBe(`bytes 0-9/${size}`);
      expect(partial.headers.get('content-length')).toBe('10');
      expect(partial.body.equals(ok.data.body.subarray(0, 10))).toBe(true);

      const tail = await request(ok.result.dataUri, { headers: { Range: 'bytes=-4' } });
      expect(tail.status).toBe(206);
      expect(tail.body.equals(ok.data.body.subarray(size - 4))).toBe(true);

      const unsatisfiable = await request(ok.result.dataUri, {
        headers: { Range: `bytes=${size + 10}-${size + 20}` },
      });
      expect(unsatisfiable.status).toBe(416);
      expect(unsatisfiable.headers.get('content-range')).toBe(`bytes */${size}`);
    });

    it('answers HEAD with the headers of GET and no body', async () => {
      const head = await request(ok.result.dataUri, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      expect(head.headers.get('content-type')).toBe('application/zip');
      expect(head.headers.get('content-length')).toBe(String(ok.data.body.length));
      expect(head.headers.get('etag')).toBe(ok.data.headers.get('etag'));
    });

    it('sends the data whatever Accept asks for: its type is fixed', async () => {
      for (const accept of ['application/zip', 'text/html', 'application/vnd.svc+json']) {
        const answer = await request(ok.result.dataUri, { headers: { Accept: accept } });
        expect(answer.status).toBe(200);
        expect(answer.body.equals(ok.data.body)).toBe(true);
      }
    });

    it('answers 404 for a wrong extension or an unknown job', async () => {
      const wrongExtension = await request(ok.result.dataUri.replace(/\.zip$/, '.txt'));
      expect(wrongExtension.status).toBe(404);
      await expectValidXml(wrongExtension);
      const noExtension = await request(ok.result.dataUri.replace(/\.zip$/, ''));
      expect(noExtension.status).toBe(404);
      const unknown = await request(`${service.url}${REST}/result/demo/${randomUUID()}.zip`);
      expect(unknown.status).toBe(404);
      const otherApplication = await request(ok.result.dataUri.replace('/demo/', '/listing/'));
      expect(otherApplication.status).toBe(404);
    });
  });

  describe('job status (GET /jobs/{app}/{jobId})', () => {
    it('shows QUEUED, RUNNING and DONE with attempts and the resultUri', async () => {
      // One more sleeping job than there are slots: the last one must wait its turn.
      const count = service.config.scriptSlots + 1;
      const zip = await makeZip([{ name: 'sleep.R', content: 'Sys.sleep(2)\n' + WRITE_HI }]);
      const tokens: Attributes[] = [];
      for (let i = 0; i < count; i += 1) {
        const submitted = await postZip(service.url, zip);
        expect(submitted.status).toBe(202);
        tokens.push(parseXml(submitted.text).jobToken);
      }
      const statusOf = async (token: Attributes): Promise<Attributes> => {
        const answer = await request(`${service.url}${REST}/jobs/demo/${token.jobId}`);
        expect(answer.status).toBe(200);
        await expectValidXml(answer);
        return parseXml(answer.text).jobStatus;
      };
      /** Polls until DONE; returns the distinct states seen, in order, and the final status. */
      const follow = async (token: Attributes): Promise<[string[], Attributes[]]> => {
        const states: string[] = [];
        const seen: Attributes[] = [];
        await waitFor(
          async () => {
            const status = await statusOf(token);
            if (states[states.length - 1] !== status.state) {
              states.push(status.state);
              seen.push(status);
            }
            return status.state === 'DONE';
          },
          60000,
          `job ${token.jobId} to be DONE`,
        );
        return [states, seen];
      };

      const last = tokens[tokens.length - 1];
      const [[firstStates], [lastStates, lastSeen]] = await Promise.all([
        follow(tokens[0]),
        follow(last),
      ]);
      // The first job may already have been claimed when it is first looked at.
      expect(firstStates.slice(-2)).toEqual(['RUNNING', 'DONE']);
      expect(lastStates).toEqual(['QUEUED', 'RUNNING', 'DONE']);
      const [queued, running, done] = lastSeen;
      expect(queued).toMatchObject({
        jobId: last.jobId,
        applicationName: 'demo',
        submissionTime: last.submissionTime,
        attempts: '0',
        resultUri: last.resultUri,
      });
      expect(queued.startTime).toBeUndefined();
      expect(queued.finishTime).toBeUndefined();
      expect(running).toMatchObject({ attempts: '1', resultUri: last.resultUri });
      expect(running.startTime).toMatch(ISO_TIME);
      expect(running.finishTime).toBeUndefined();
      expect(done).toMatchObject({ attempts: '1', resultUri: last.resultUri });
      expect(Date.parse(done.finishTime)).toBeGreaterThanOrEqual(Date.parse(done.startTime));
      expect(Date.parse(done.startTime)).toBeGreaterThanOrEqual(Date.parse(done.submissionTime));

      for (const token of tokens) {
        await follow(token);
        const result = parseXml((await request(token.resultUri)).text).result;
        expect(result).toMatchObject({ jobId: token.jobId, success: 'true' });
      }
    });

    it('answers 404 for an unknown job and for a job of another application', async () => {
      expect((await request(`${service.url}${REST}/jobs/demo/${randomUUID()}`)).status).toBe(404);
      expect((await request(`${service.url}${REST}/jobs/listing/${ok.token.jobId}`)).status).toBe(
        404,
      );
    });
  });

  describe('failed jobs (SPEC §5.1)', () => {
    it('turns an R error into a plain-text error result naming the job, its submission time and R’s message', async () => {
      const failed = await runJob(service.url, [
        { name: 'fail.R', content: 'stop("custom failure 42")\n' },
      ]);
      expect(failed.result).toMatchObject({
        jobId: failed.token.jobId,
        success: 'false',
        type: 'txt',
      });
      expect(failed.result.dataUri).toBe(
        `${service.url}${REST}/result/demo/${failed.token.jobId}.txt`,
      );
      expect(failed.data.status).toBe(200);
      expect(failed.data.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(failed.data.text).toContain(failed.token.jobId);
      expect(failed.data.text).toContain(failed.token.submissionTime);
      expect(failed.data.text).toContain('custom failure 42');
      expect((await request(failed.result.dataUri.replace(/\.txt$/, '.zip'))).status).toBe(404);

      const json = await request(failed.token.resultUri, { headers: ACCEPT_JSON });
      expect((JSON.parse(json.text) as { result: { success: unknown } }).result.success).toBe(
        false,
      );
    });

    it('fails a job that has no R script at all', async () => {
      const failed = await runJob(service.url, [{ name: 'data.csv', content: 'x\n1\n' }]);
      expect(failed.result).toMatchObject({ success: 'false', type: 'txt' });
      expect(failed.data.text).toContain(failed.token.jobId);
      expect(failed.data.text).toMatch(/no R script/i);
    });

    it('fails a job whose rScript names no catalog script', async () => {
      const failed = await runJob(service.url, [{ name: 'data.csv', content: 'x\n1\n' }], {
        'X-SVC-Meta-rScript': 'not-in-the-catalog.R',
      });
      expect(failed.result).toMatchObject({ success: 'false', type: 'txt' });
      expect(failed.data.text).toContain(failed.token.jobId);
      expect(failed.data.text).toContain('not-in-the-catalog.R');
    });
  });

  describe('meta parameters and the catalog (SPEC §5.1)', () => {
    let catalog: CatalogService;

    beforeAll(async () => {
      catalog = service.app.get(CatalogService);
      await catalog.putFile(
        'demo',
        'R_SCRIPTS',
        'hello.R',
        Buffer.from('writeLines(c("hello", readLines("data.csv")), "hello.txt")\n'),
      );
      await catalog.putFile(
        'demo',
        'SWEAVE_FILES',
        'report.Rnw',
        Buffer.from('\\documentclass{article}\n\\begin{document}\nsvc\n\\end{document}\n'),
      );
    });

    it('writes the merged meta to configuration.txt (headers win) and keeps service files out of the result', async () => {
      const job = await runJob(
        service.url,
        [
          { name: 'read.R', content: READ_CONFIGURATION },
          { name: 'configuration.txt', content: 'colour = red\nshape = round\n' },
          { name: 'data.csv', content: 'x\n1\n' },
        ],
        { 'X-SVC-Meta-colour': 'blue', 'X-SVC-Meta-#1': 'Size = 3' },
      );
      expect(job.result).toMatchObject({ success: 'true', type: 'zip' });
      const entries = await zipEntries(job.data.body);
      expect([...entries.keys()]).toEqual(['seen.txt']);
      expect(entries.get('seen.txt')).toBe('Size=3\ncolour=blue\nshape=round\n');
    });

    it.each(['X-SVC-Meta-rScript', 'X-SVC-Meta-RSCRIPT'])(
      'runs the catalog script named by %s',
      async (header) => {
        const job = await runJob(service.url, [{ name: 'data.csv', content: 'x\n1\n' }], {
          [header]: 'hello.R',
        });
        expect(job.result).toMatchObject({ success: 'true', type: 'zip' });
        const entries = await zipEntries(job.data.body);
        expect([...entries.keys()]).toEqual(['hello.txt']);
        expect(entries.get('hello.txt')).toBe('hello\nx\n1\n');
      },
    );

    it('copies the catalog Sweave file named by sweaveFile into the working directory', async () => {
      const job = await runJob(
        service.url,
        [
          {
            name: 'check.R',
            content: 'writeLines(as.character(file.exists("report.Rnw")), "sweave.txt")\n',
          },
        ],
        { 'X-SVC-Meta-sweaveFile': 'report.Rnw' },
      );
      expect(job.result).toMatchObject({ success: 'true', type: 'zip' });
      const entries = await zipEntries(job.data.body);
      expect([...entries.keys()]).toEqual(['sweave.txt']);
      expect(entries.get('sweave.txt')).toBe('TRUE\n');
    });
  });
});

describe('PUBLIC_BASE_URL overrides the request (SPEC §3.2)', () => {
  const PUBLIC = 'https://svc.example.org/base';
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ PUBLIC_BASE_URL: `${PUBLIC}/` });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('builds every link from the configured base, whatever the headers say', async () => {
    const headers = { 'X-Forwarded-Proto': 'http', 'X-Forwarded-Host': 'api.example.com' };
    const submitted = await postZip(service.url, await makeZip(HI_JOB), headers);
    expect(submitted.status).toBe(202);
    const token = parseXml(submitted.text).jobToken;
    const resultUri = `${PUBLIC}${REST}/results/demo/${token.jobId}`;
    expect(token.resultUri).toBe(resultUri);
    expect(token.applicationResultsUri).toBe(`${PUBLIC}${REST}/results/demo`);
    expect(submitted.headers.get('location')).toBe(resultUri);

    // The proxy in front maps PUBLIC to the service; the test does the same.
    const local = (uri: string): string => uri.replace(PUBLIC, service.url);
    const ready = await waitForResult(local(resultUri), headers);
    const result = parseXml(ready.text).result;
    expect(result.selfUri).toBe(resultUri);
    expect(result.dataUri).toBe(`${PUBLIC}${REST}/result/demo/${token.jobId}.zip`);
    expect((await request(local(result.dataUri))).status).toBe(200);

    const listed = xmlResultList(
      (await request(local(token.applicationResultsUri), { headers })).text,
    );
    expect(listed).toEqual([result]);

    const status = parseXml(
      (await request(`${service.url}${REST}/jobs/demo/${token.jobId}`, { headers })).text,
    ).jobStatus;
    expect(status.resultUri).toBe(resultUri);

    for (const uri of [token.resultUri, token.applicationResultsUri, result.dataUri]) {
      expect(uri.slice('https://'.length)).not.toContain('//');
    }
  });
});
