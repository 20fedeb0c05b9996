/**
 * Blob pieces: inputs and results written to and read from the database as streams.
 *
 * @ci-pass node24
 */
import { CallbackUrlPolicy } from '../../src/callbacks/callback-url.policy';
import { AccessPolicyService } from '../../src/security/access-policy.service';
import { AuthenticationService } from '../../src/security/authentication.service';
import { OidcTokenVerifier } from '../../src/security/oidc-token.verifier';
import { RequestAccessService } from '../../src/security/request-access.service';
import { HostLookup } from '../../src/callbacks/host-lookup';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { ApiError } from '../../src/common/api-error';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { resultDataFile } from '../../src/job-core/job-result';
import { SubmissionBucketRepository } from '../../src/jobs/submission-bucket.repository';
import { SubmissionLimits } from '../../src/jobs/submission-limits';
import { JobsService } from '../../src/jobs/jobs.service';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { NodeIdentity } from '../../src/storage/node-identity';
import { inProcessEvents } from '../support/in-process-events';
import { QueueRepository } from '../../src/queue/queue.repository';
import { JobRecordsRepository } from '../../src/queue/job-records.repository';
import { ResultRepository } from '../../src/results/result.repository';
import {
  BLOB_CHUNK_BYTES,
  BLOB_INLINE_MAX_BYTES,
  copyChunksToFile,
  JOB_FILE_CHUNKS,
  readChunks,
  RESULT_CHUNKS,
  writeChunks,
} from '../../src/storage/blob-chunks';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { makeZip } from '../support/zip-fixtures';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';

const MiB = 1024 * 1024;

async function collect(stream: Readable): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of stream) {
    pieces.push(piece as Buffer);
  }
  return Buffer.concat(pieces);
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Chunked storage of job files and results against the real database (server or PGlite). */
describe('chunked job files and results', () => {
  const node = new NodeIdentity();
  let database: TestDatabase;
  let dataSource: DataSource;
  let close: () => Promise<void>;
  let config: AppConfig;
  let jobsService: JobsService;
  let results: ResultRepository;
  let dir: string;
  /** Where JobsService inflates large ZIP entries (FORM_TEMP_DIR). */
  let spillParent: string;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    dir = await mkdtemp(join(tmpdir(), 'svc-blob-test-'));
    spillParent = join(dir, 'spill');
    await mkdir(spillParent);
    config = loadConfig(testEnvironment(database, { FORM_TEMP_DIR: spillParent }));
    ({ dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA));
    // An embedded target: the notifier wakes in-process listeners only (there are none here).
    const queue = new QueueRepository(dataSource, node);
    jobsService = new JobsService(
      config,
      queue,
      new QueueNotifier(inProcessEvents(undefined, node)),
      new CallbackUrlPolicy(config, new HostLookup()),
      new SubmissionLimits(config, queue, new SubmissionBucketRepository(dataSource)),
      new RequestAccessService(
        config,
        config,
        new AccessPolicyService(config),
        new AuthenticationService(config, new OidcTokenVerifier(config)),
      ),
    );
    results = new ResultRepository(dataSource, new JobRecordsRepository(dataSource));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await close();
    await database.drop();
  });

  async function onDisk(name: string, content: Buffer): Promise<{ name: string; path: string }> {
    const path = join(dir, `${randomUUID()}-${name}`);
    await writeFile(path, content);
    return { name, path };
  }

  async function submit(files: Array<{ name: string; path: string }>): Promise<string> {
    const job = await jobsService.submit({
      caller: { kind: 'service' },
      applicationName: 'demo',
      source: 'rest',
      meta: {},
      callback: null,
      parts: files.map((file) => ({ ...file, label: `The file "${file.name}"`, zip: false })),
    });
    return job.jobId;
  }

  async function storedFiles(
    jobId: string,
  ): Promise<Array<{ id: string; name: string; size: string; chunked: boolean; pieces: number }>> {
    return dataSource.query(
      `SELECT f.id, f.name, f.size, f.chunked,
              (SELECT count(*)::int FROM job_file_chunk c WHERE c.file_id = f.id) AS pieces
         FROM job_file f WHERE f.job_id = $1 ORDER BY f.name`,
      [jobId],
    );
  }

  async function fileBytes(jobId: string, name: string): Promise<Buffer> {
    const [row] = await dataSource.query<
      Array<{ id: string; size: string; chunked: boolean; content: Buffer }>
    >('SELECT id, size, chunked, content FROM job_file WHERE job_id = $1 AND name = $2', [
      jobId,
      name,
    ]);
    return row.chunked
      ? collect(readChunks(dataSource, JOB_FILE_CHUNKS, row.id, Number(row.size)))
      : row.content;
  }

  async function countRowsWhere(table: 'result_chunk', jobId: string): Promise<number> {
    const [row] = await dataSource.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM ${table} WHERE job_id = $1`,
      [jobId],
    );
    return row.n;
  }

  async function countRows(table: string): Promise<number> {
    const [row] = await dataSource.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM ${table}`,
    );
    return row.n;
  }

  it('keeps files up to the threshold inline and chunks larger ones at chunk boundaries', async () => {
    const contents: Record<string, Buffer> = {
      'empty.txt': Buffer.alloc(0),
      'at-threshold.bin': randomBytes(BLOB_INLINE_MAX_BYTES),
      'over-threshold.bin': randomBytes(BLOB_INLINE_MAX_BYTES + 1),
      'two-chunks.bin': randomBytes(2 * BLOB_CHUNK_BYTES),
      'two-and-a-half.bin': randomBytes(2.5 * BLOB_CHUNK_BYTES),
      'job.R': Buffer.from('x <- 1\n'),
    };
    const jobId = await submit(
      await Promise.all(Object.entries(contents).map(([name, data]) => onDisk(name, data))),
    );
    const rows = await storedFiles(jobId);
    expect(rows.map((r) => [r.name, Number(r.size), r.chunked, r.pieces])).toEqual([
      ['at-threshold.bin', BLOB_INLINE_MAX_BYTES, false, 0],
      ['empty.txt', 0, false, 0],
      ['job.R', 7, false, 0],
      ['over-threshold.bin', BLOB_INLINE_MAX_BYTES + 1, true, 2],
      ['two-and-a-half.bin', 2.5 * BLOB_CHUNK_BYTES, true, 3],
      ['two-chunks.bin', 2 * BLOB_CHUNK_BYTES, true, 2],
    ]);
    for (const [name, data] of Object.entries(contents)) {
      expect((await fileBytes(jobId, name)).equals(data)).toBe(true);
    }
  });

  it('reads byte ranges within one piece, across pieces and at the edges', async () => {
    const data = randomBytes(3 * BLOB_CHUNK_BYTES + 123);
    const jobId = await submit([await onDisk('big.bin', data)]);
    const [row] = await storedFiles(jobId);
    const ranges = [
      [0, 0],
      [0, BLOB_CHUNK_BYTES - 1],
      [BLOB_CHUNK_BYTES - 10, BLOB_CHUNK_BYTES + 9],
      [100, 2 * BLOB_CHUNK_BYTES + 500],
      [3 * BLOB_CHUNK_BYTES, data.length - 1],
      [data.length - 1, data.length - 1],
    ];
    for (const [start, end] of ranges) {
      const part = await collect(
        readChunks(dataSource, JOB_FILE_CHUNKS, row.id, data.length, { start, end }),
      );
      expect(part.equals(data.subarray(start, end + 1))).toBe(true);
    }
  });

  it('stores nothing when a file fails part-way (the transaction rolls back)', async () => {
    const before = [await countRows('job'), await countRows('job_file_chunk')];
    const big = await onDisk('big.bin', randomBytes(2 * MiB));
    const missing = { name: 'gone.bin', path: join(dir, 'does-not-exist.bin') };
    await expect(submit([big, missing])).rejects.toThrow(/ENOENT/);
    // A source that fails after a piece was written.
    const failing = dataSource.transaction(async (manager) => {
      const jobId = randomUUID();
      await manager.query(
        `INSERT INTO job (id, application_name, kind, state, meta, source, submitted_at, run_after)
         VALUES ($1, 'demo', 'script', 'QUEUED', '{}', 'test', now(), now())`,
        [jobId],
      );
      const [file] = await manager.query<Array<{ id: string }>>(
        `INSERT INTO job_file (job_id, name, content, size, chunked)
         VALUES ($1, 'x', ''::bytea, 0, true) RETURNING id`,
        [jobId],
      );
      function* breaksAfterOnePiece(): Generator<Buffer> {
        yield randomBytes(BLOB_CHUNK_BYTES + 5);
        throw new Error('the upload broke');
      }
      await writeChunks(manager, JOB_FILE_CHUNKS, file.id, breaksAfterOnePiece());
    });
    await expect(failing).rejects.toThrow(/the upload broke/);
    expect([await countRows('job'), await countRows('job_file_chunk')]).toEqual(before);
  });

  it('deletes the pieces with the job (cascade)', async () => {
    const jobId = await submit([await onDisk('big.bin', randomBytes(3 * MiB))]);
    expect((await storedFiles(jobId))[0].pieces).toBe(3);
    const [{ id }] = await storedFiles(jobId);
    await dataSource.query('DELETE FROM job WHERE id = $1', [jobId]);
    const [left] = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM job_file_chunk WHERE file_id = $1',
      [id],
    );
    expect(left.n).toBe(0);
  });

  it('hands a claimed job its large files as pieces, and stores a large result from a file', async () => {
    const queue = new QueueRepository(dataSource, node);
    // Earlier tests left queued jobs: keep them out of this claim.
    await dataSource.query(`UPDATE job SET state = 'DONE' WHERE state = 'QUEUED'`);
    const big = randomBytes(2 * MiB + 3);
    const jobId = await submit([
      await onDisk('job.R', Buffer.from('x')),
      await onDisk('big.bin', big),
    ]);
    const [claimed] = await queue.claim('w1', 1, 30, null);
    expect(claimed.id).toBe(jobId);
    const [script, large] = claimed.files;
    expect(script).toEqual({ name: 'job.R', content: Buffer.from('x'), chunked: null });
    expect(large.name).toBe('big.bin');
    expect(large.content.length).toBe(0);
    expect(large.chunked?.size).toBe(big.length);
    const copy = join(dir, `${randomUUID()}.bin`);
    await copyChunksToFile(dataSource, JOB_FILE_CHUNKS, large.chunked!.fileId, big.length, copy);
    expect((await readFile(copy)).equals(big)).toBe(true);

    const resultBytes = randomBytes(3 * MiB + 1);
    const resultPath = await onDisk('result.zip', resultBytes);
    const result = resultDataFile(true, 'zip', 'application/zip', {
      path: resultPath.path,
      size: resultBytes.length,
      sha256: sha256(resultBytes),
    });
    expect(await queue.complete(jobId, 'intruder', result)).toBe(false);
    expect(await countRowsWhere('result_chunk', jobId)).toBe(0);
    expect(await queue.complete(jobId, 'w1', result)).toBe(true);
    expect(await countRowsWhere('result_chunk', jobId)).toBe(4);
    expect((await storedFiles(jobId)).length).toBe(0);
    const source = await results.findDataSource('demo', jobId);
    expect(source).toMatchObject({ size: resultBytes.length, sha256: sha256(resultBytes) });
    expect((await collect(source!.open())).equals(resultBytes)).toBe(true);
  });

  /** A ZIP archive on disk as the one part of a script job. */
  function submitZipFile(zipPath: string, meta: Record<string, string>) {
    return jobsService.submit({
      caller: { kind: 'service' },
      applicationName: 'demo',
      source: 'soap',
      meta,
      callback: null,
      parts: [{ name: 'job.zip', label: 'The payload "job.zip"', path: zipPath, zip: true }],
    });
  }

  describe('a ZIP archive on disk', () => {
    it('streams large entries into pieces and keeps small ones inline', async () => {
      const big = randomBytes(2 * MiB + 17);
      const zipPath = join(dir, 'job.zip');
      await writeFile(
        zipPath,
        await makeZip([
          { name: 'job.R', content: 'x <- 1\n' },
          { name: 'big.bin', content: big, compress: false },
          { name: 'configuration.txt', content: 'answer=42\n' },
        ]),
      );
      const job = await submitZipFile(zipPath, { extra: 'yes' });
      const rows = await storedFiles(job.jobId);
      expect(rows.map((r) => [r.name, r.chunked])).toEqual([
        ['big.bin', true],
        ['job.R', false],
      ]);
      expect((await fileBytes(job.jobId, 'big.bin')).equals(big)).toBe(true);
      const [stored] = await dataSource.query<Array<{ meta: Record<string, string> }>>(
        'SELECT meta FROM job WHERE id = $1',
        [job.jobId],
      );
      expect(stored.meta).toEqual({ answer: '42', extra: 'yes' });
      expect(await readdir(spillParent)).toEqual([]);
    });

    it('refuses a bad archive before anything is stored, and cleans up what it inflated', async () => {
      const before = await countRows('job');
      const zipPath = join(dir, 'two-scripts.zip');
      await writeFile(
        zipPath,
        await makeZip([
          { name: 'big.bin', content: randomBytes(2 * MiB), compress: false },
          { name: 'a.R', content: 'x' },
          { name: 'b.R', content: 'y' },
        ]),
      );
      const error = await submitZipFile(zipPath, {}).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).getStatus()).toBe(400);
      const notZip = join(dir, 'not.zip');
      await writeFile(notZip, 'not a zip');
      await expect(submitZipFile(notZip, {})).rejects.toThrow(/not a ZIP archive/);
      expect(await countRows('job')).toBe(before);
      expect(await readdir(spillParent)).toEqual([]);
    });
  });

  describe('ResultRepository.findDataSource', () => {
    async function storeResult(data: Buffer, chunked: boolean): Promise<string> {
      const jobId = await submit([]);
      await dataSource.transaction(async (manager) => {
        await manager.query(
          `INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256, chunked)
           VALUES ($1, 'demo', now(), true, 'zip', 'application/zip', $2, $3, $4, $5)`,
          [jobId, chunked ? Buffer.alloc(0) : data, data.length, sha256(data), chunked],
        );
        if (chunked) {
          await writeChunks(manager, RESULT_CHUNKS, jobId, [data]);
        }
      });
      return jobId;
    }

    it('streams inline and chunked data, whole and in ranges', async () => {
      for (const [data, chunked] of [
        [randomBytes(1000), false],
        [randomBytes(2 * BLOB_CHUNK_BYTES + 1), true],
      ] as const) {
        const jobId = await storeResult(data, chunked);
        const source = await results.findDataSource('demo', jobId);
        expect(source).toMatchObject({
          jobId,
          applicationName: 'demo',
          success: true,
          type: 'zip',
          contentType: 'application/zip',
          size: data.length,
          sha256: sha256(data),
        });
        expect(source?.resultTime).toBeInstanceOf(Date);
        expect((await collect(source!.open())).equals(data)).toBe(true);
        const range = { start: 500, end: data.length - 2 };
        expect((await collect(source!.open(range))).equals(data.subarray(500, -1))).toBe(true);
        expect((await results.findWithData('demo', jobId))?.data.equals(data)).toBe(true);
      }
      expect(await results.findDataSource('other', randomUUID())).toBeNull();
    });

    it('deletes the pieces with the result, and a stream of deleted data fails', async () => {
      const data = randomBytes(3 * BLOB_CHUNK_BYTES);
      const jobId = await storeResult(data, true);
      const source = await results.findDataSource('demo', jobId);
      expect(await results.delete('demo', jobId)).toBe(true);
      const [left] = await dataSource.query<Array<{ n: number }>>(
        'SELECT count(*)::int AS n FROM result_chunk WHERE job_id = $1',
        [jobId],
      );
      expect(left.n).toBe(0);
      await expect(collect(source!.open())).rejects.toThrow(/missing/);
    });
  });
});
