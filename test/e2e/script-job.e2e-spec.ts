/**
 * Script jobs end to end: a ZIP in, its result out.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { explodeZip } from '../../src/jobs/job-archive';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { validateAgainstSchema } from '../support/xml-schema';

const PDF_SCRIPT = `
pdf("plot.pdf")
plot(1:10, main = "svc")
invisible(dev.off())
writeLines(c("mean", as.character(mean(read.csv("data.csv")$x))), "summary.txt")
cat("finished\\n")
`;

async function zipEntries(zip: Buffer): Promise<Map<string, Buffer>> {
  const files = await explodeZip(zip, {
    maxEntries: 100,
    maxUncompressedBytes: 1e9,
    maxCompressionRatio: 1e6,
  });
  return new Map(files.map((file) => [file.name, file.content]));
}

describe('a script job over REST (SPEC §3.2, §5.1)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.stop();
  });

  it('runs a ZIP job that writes a PDF: 202 token, 404 until ready, result, data, delete', async () => {
    const zip = await makeZip([
      { name: 'plot.R', content: PDF_SCRIPT },
      { name: 'data.csv', content: 'x\n1\n2\n3\n' },
    ]);
    const submitted = await postZip(service.url, zip);
    expect(submitted.status).toBe(202);
    expect(submitted.headers.get('content-type')).toMatch(/^application\/vnd\.svc\+xml/);
    expect((await validateAgainstSchema(submitted.text, 'rest-data.xsd')).errors).toEqual([]);
    const token = parseXml(submitted.text).jobToken;
    expect(token.jobId).toMatch(/^[0-9a-f-]{36}$/);
    expect(token.applicationName).toBe('demo');
    expect(token.submissionTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(token.resultUri).toBe(`${service.url}/svc/api/rest/results/demo/${token.jobId}`);
    expect(token.applicationResultsUri).toBe(`${service.url}/svc/api/rest/results/demo`);
    expect(submitted.headers.get('location')).toBe(token.resultUri);

    const early = await request(token.resultUri);
    if (early.status === 404) {
      expect(parseXml(early.text).result).toBeUndefined();
      expect(parseXml(early.text).error.status).toBe('404');
    }

    const ready = await waitForResult(token.resultUri);
    expect((await validateAgainstSchema(ready.text, 'rest-data.xsd')).errors).toEqual([]);
    const result = parseXml(ready.text).result;
    expect(result).toMatchObject({
      jobId: token.jobId,
      applicationName: 'demo',
      success: 'true',
      type: 'zip',
    });
    expect(result.selfUri).toBe(token.resultUri);
    expect(result.dataUri).toBe(`${service.url}/svc/api/rest/result/demo/${token.jobId}.zip`);

    const data = await request(result.dataUri);
    expect(data.status).toBe(200);
    expect(data.headers.get('content-type')).toBe('application/zip');
    expect(Number(data.headers.get('content-length'))).toBe(data.body.length);
    const entries = await zipEntries(data.body);
    expect([...entries.keys()].sort()).toEqual(['plot.pdf', 'summary.txt']);
    expect(entries.get('plot.pdf')?.subarray(0, 5).toString()).toBe('%PDF-');
    expect(entries.get('summary.txt')?.toString()).toBe('mean\n2\n');

    const status = await request(`${service.url}/svc/api/rest/jobs/demo/${token.jobId}`);
    expect(status.status).toBe(200);
    expect((await validateAgainstSchema(status.text, 'rest-data.xsd')).errors).toEqual([]);
    expect(parseXml(status.text).jobStatus).toMatchObject({ state: 'DONE', attempts: '1' });

    const deleted = await request(token.resultUri, { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    expect((await request(token.resultUri)).status).toBe(404);
    expect((await request(result.dataUri)).status).toBe(404);
    expect((await request(token.resultUri, { method: 'DELETE' })).status).toBe(404);
  });

  it('leaves no working directory behind: plain files, a subdirectory, an R error', async () => {
    const scripts = [
      'writeLines("a", "a.txt")',
      'dir.create("sub")\nwriteLines("b", "sub/b.txt")',
      'writeLines("c", "c.txt")\nstop("on purpose")',
    ];
    for (const script of scripts) {
      const submitted = await postZip(
        service.url,
        await makeZip([{ name: 'job.R', content: script }]),
      );
      expect(submitted.status).toBe(202);
      const token = parseXml(submitted.text).jobToken;
      await waitForResult(token.resultUri);
      // The directory is removed before the result is stored.
      expect(existsSync(join(tmpdir(), 'svc-jobs', `${token.jobId}-1`))).toBe(false);
    }
  });
});
