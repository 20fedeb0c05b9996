/**
 * Large inputs and results streamed through the database in pieces.
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { createHash, randomBytes } from 'node:crypto';
import { explodeZip } from '../../src/jobs/job-archive';
import { BLOB_INLINE_MAX_BYTES } from '../../src/storage/blob-chunks';
import { fileField, postForm, textField } from '../support/form-client';
import { parseXml, postZip, request, waitForResult } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/** Copies the job's data file: the result ZIP then holds the same (incompressible) bytes. */
const COPY_SCRIPT = 'stopifnot(file.copy("big.bin", "copy.bin"))\n';

async function resultEntries(zip: Buffer): Promise<Map<string, Buffer>> {
  const files = await explodeZip(zip, {
    maxEntries: 10,
    maxUncompressedBytes: 1e9,
    maxCompressionRatio: 1e6,
  });
  return new Map(files.map((file) => [file.name, file.content]));
}

/** Job files and results larger than the inline limit, end to end (issue 5, SPEC §7). */
describe('large job files and results', () => {
  let service: TestService;
  // Random bytes do not compress, so the result ZIP is larger than the limit too.
  const big = randomBytes(3 * BLOB_INLINE_MAX_BYTES + 12345);

  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.stop();
  });

  async function resultDataUri(submitted: { status: number; text: string }): Promise<string> {
    expect(submitted.status).toBe(202);
    const token = parseXml(submitted.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri)).text).result;
    expect(result.success).toBe('true');
    return result.dataUri;
  }

  it('runs a form job with a large file; its result downloads whole, in ranges, with HEAD and 304', async () => {
    const dataUri = await resultDataUri(
      await postForm(service.url, [
        textField('X-SVC-Application-Name', 'demo'),
        fileField('copy.R', COPY_SCRIPT),
        fileField('big.bin', big),
      ]),
    );
    const whole = await request(dataUri);
    expect(whole.status).toBe(200);
    expect(Number(whole.headers.get('content-length'))).toBe(whole.body.length);
    expect(whole.body.length).toBeGreaterThan(BLOB_INLINE_MAX_BYTES);
    const etag = whole.headers.get('etag');
    expect(etag).toBe(`"${createHash('sha256').update(whole.body).digest('hex')}"`);
    expect((await resultEntries(whole.body)).get('copy.bin')?.equals(big)).toBe(true);

    // A range across the 1 MiB piece boundaries, and a suffix range.
    const start = 1000;
    const end = 2 * BLOB_INLINE_MAX_BYTES + 5;
    const part = await request(dataUri, { headers: { Range: `bytes=${start}-${end}` } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes ${start}-${end}/${whole.body.length}`);
    expect(part.body.equals(whole.body.subarray(start, end + 1))).toBe(true);
    const tail = await request(dataUri, { headers: { Range: 'bytes=-100' } });
    expect(tail.status).toBe(206);
    expect(tail.body.equals(whole.body.subarray(-100))).toBe(true);
    const outside = await request(dataUri, {
      headers: { Range: `bytes=${whole.body.length}-` },
    });
    expect(outside.status).toBe(416);

    const head = await request(dataUri, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(whole.body.length));
    expect(head.headers.get('etag')).toBe(etag);
    expect(head.body.length).toBe(0);
    const unchanged = await request(dataUri, { headers: { 'If-None-Match': etag ?? '' } });
    expect(unchanged.status).toBe(304);
    expect(unchanged.body.length).toBe(0);
  });

  it('runs a ZIP job with a large entry', async () => {
    const zip = await makeZip([
      { name: 'copy.R', content: COPY_SCRIPT },
      { name: 'big.bin', content: big },
    ]);
    const dataUri = await resultDataUri(await postZip(service.url, zip));
    const whole = await request(dataUri);
    expect((await resultEntries(whole.body)).get('copy.bin')?.equals(big)).toBe(true);
  });
});
