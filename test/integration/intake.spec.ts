import { Test } from '@nestjs/testing';
import { AccessPolicyService } from '../../src/security/access-policy.service';
import { AuthenticationService } from '../../src/security/authentication.service';
import { OidcTokenVerifier } from '../../src/security/oidc-token.verifier';
import { RequestAccessService } from '../../src/security/request-access.service';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { CallbackUrlPolicy } from '../../src/callbacks/callback-url.policy';
import { HostLookup } from '../../src/callbacks/host-lookup';
import { ApiError } from '../../src/common/api-error';
import { loadConfig } from '../../src/config/app-config';
import { configProviders } from '../../src/config/config.module';
import { JobsService, Submission } from '../../src/jobs/jobs.service';
import { SubmissionBucketRepository } from '../../src/jobs/submission-bucket.repository';
import { SubmissionLimits } from '../../src/jobs/submission-limits';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { NodeIdentity } from '../../src/storage/node-identity';
import { inProcessEvents } from '../support/in-process-events';
import { QueueRepository } from '../../src/queue/queue.repository';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { makeZip } from '../support/zip-fixtures';
import { createTestDatabase, TestDatabase, testEnvironment } from '../support/test-service';

/**
 * The one intake (JobsService.submit) that every front end hands its parts to, against the real
 * database: what is stored, and what is refused before anything is stored.
 */
describe('JobsService.submit: the intake of every front end', () => {
  const node = new NodeIdentity();
  let database: TestDatabase;
  let dataSource: DataSource;
  let close: () => Promise<void>;
  let intake: JobsService;
  let dir: string;
  /** Where the intake spools bodies and inflates large ZIP entries (FORM_TEMP_DIR). */
  let spillParent: string;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    dir = await mkdtemp(join(tmpdir(), 'svc-intake-test-'));
    spillParent = join(dir, 'spill');
    await mkdir(spillParent);
    const config = loadConfig(
      testEnvironment(database, { FORM_TEMP_DIR: spillParent, MAX_REQUEST_BYTES: '4096' }),
    );
    ({ dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA));
    const module = await Test.createTestingModule({
      providers: [
        JobsService,
        ...configProviders(config),
        { provide: QueueRepository, useValue: new QueueRepository(dataSource, node) },
        // An embedded target: the notifier wakes in-process listeners only (there are none here).
        {
          provide: QueueNotifier,
          useValue: new QueueNotifier(inProcessEvents(undefined, node)),
        },
        { provide: CallbackUrlPolicy, useValue: new CallbackUrlPolicy(config, new HostLookup()) },
        SubmissionLimits,
        // The real access policy: the intake authorizes every request's caller.
        AccessPolicyService,
        AuthenticationService,
        OidcTokenVerifier,
        RequestAccessService,
        {
          provide: SubmissionBucketRepository,
          useValue: new SubmissionBucketRepository(dataSource),
        },
      ],
    }).compile();
    intake = module.get(JobsService);
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await close();
    await database.drop();
  });

  function script(parts: Submission['parts'], extra: Partial<Submission> = {}): Submission {
    return {
      applicationName: 'intake',
      source: 'rest',
      meta: {},
      callback: null,
      parts,
      caller: { kind: 'service' },
      ...extra,
    };
  }

  async function onDisk(name: string, content: Buffer | string): Promise<string> {
    const path = join(dir, `${randomUUID()}-${name}`);
    await writeFile(path, content);
    return path;
  }

  async function storedFiles(jobId: string): Promise<string[]> {
    const rows = await dataSource.query<Array<{ name: string }>>(
      'SELECT name FROM job_file WHERE job_id = $1 ORDER BY name',
      [jobId],
    );
    return rows.map((row) => row.name);
  }

  async function jobCount(): Promise<number> {
    const [row] = await dataSource.query<Array<{ n: string }>>(
      "SELECT count(*) AS n FROM job WHERE application_name = 'intake'",
    );
    return Number(row.n);
  }

  async function refusal(submission: Submission): Promise<ApiError> {
    const error = await intake.submit(submission).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }

  it('stores a ZIP part exploded and a plain part as it is, with configuration.txt merged into the meta', async () => {
    const zip = await makeZip([
      { name: 'job.R', content: 'x <- 1\n' },
      { name: 'configuration.txt', content: 'colour=blue\n' },
    ]);
    const job = await intake.submit(
      script(
        [
          {
            name: 'data.zip',
            label: 'The file "data.zip"',
            path: await onDisk('d.zip', zip),
            zip: true,
          },
          {
            name: 'extra.csv',
            label: 'The file "extra.csv"',
            content: Buffer.from('a\n1\n'),
            zip: false,
          },
        ],
        { meta: { size: 'large' } },
      ),
    );
    expect(await storedFiles(job.jobId)).toEqual(['extra.csv', 'job.R']);
    const [row] = await dataSource.query<Array<{ meta: Record<string, string>; source: string }>>(
      'SELECT meta, source FROM job WHERE id = $1',
      [job.jobId],
    );
    expect(row).toEqual({ meta: { colour: 'blue', size: 'large' }, source: 'rest' });
  });

  it('refuses a broken ZIP part, naming the part, and stores nothing', async () => {
    const before = await jobCount();
    const error = await refusal(
      script([
        {
          name: 'x.zip',
          label: 'The payload "x.zip"',
          path: await onDisk('x.zip', 'not a zip'),
          zip: true,
        },
      ]),
    );
    expect(error.getStatus()).toBe(400);
    expect(error.message).toMatch(/^in the payload "x\.zip": /);
    expect(await jobCount()).toBe(before);
  });

  it('streams a body to disk and refuses one over MAX_REQUEST_BYTES with 413, leaving nothing behind', async () => {
    const small = await makeZip([{ name: 'job.R', content: 'x <- 1\n' }]);
    const job = await intake.submit(
      script([{ name: 'body', label: null, stream: Readable.from([small]), zip: true }]),
    );
    expect(await storedFiles(job.jobId)).toEqual(['job.R']);
    const before = await jobCount();
    const large = Readable.from([randomBytes(3000), randomBytes(3000)]);
    const error = await refusal(script([{ name: 'body', label: null, stream: large, zip: true }]));
    expect(error.getStatus()).toBe(413);
    expect(error.message).toMatch(/MAX_REQUEST_BYTES: 4096 bytes/);
    const declared = await refusal(
      script([
        {
          name: 'body',
          label: null,
          stream: Readable.from([small]),
          declaredBytes: 5000,
          zip: true,
        },
      ]),
    );
    expect(declared.getStatus()).toBe(413);
    expect(await jobCount()).toBe(before);
    expect(await readdir(spillParent)).toEqual([]);
  });

  /** A body of `content` that records what the spill parent holds when the intake reads it. */
  function watchedBody(content: Buffer): { body: Readable; seen: () => string[] | null } {
    let seen: string[] | null = null;
    const body = new Readable({
      read() {
        seen ??= readdirSync(spillParent);
        this.push(content);
        this.push(null);
      },
    });
    return { body, seen: () => seen };
  }

  it('reads a body that announces a small size in memory, making no spill directory', async () => {
    const small = await makeZip([{ name: 'job.R', content: 'x <- 1\n' }]);
    const announced = watchedBody(small);
    const job = await intake.submit(
      script([
        {
          name: 'body',
          label: null,
          stream: announced.body,
          declaredBytes: small.length,
          zip: true,
        },
      ]),
    );
    expect(await storedFiles(job.jobId)).toEqual(['job.R']);
    expect(announced.seen()).toEqual([]);
    // Without an announced size the body goes to disk as it comes.
    const unannounced = watchedBody(small);
    await intake.submit(
      script([{ name: 'body', label: null, stream: unannounced.body, zip: true }]),
    );
    expect(unannounced.seen()).toHaveLength(1);
    expect(await readdir(spillParent)).toEqual([]);
  });

  it('refuses an empty body and a function call that is empty or not UTF-8', async () => {
    const empty = await refusal(
      script([{ name: 'body', label: null, content: Buffer.alloc(0), zip: true }]),
    );
    expect(empty.message).toBe('The request body is empty; send a ZIP archive.');
    const call = (content: Buffer): Submission =>
      script([{ name: 'payload', label: 'The payload "call.json"', content, zip: false }], {
        functionCall: 'json',
      });
    expect((await refusal(call(Buffer.alloc(0)))).message).toBe(
      'The payload "call.json" is empty; send the JSON payload of the function call.',
    );
    expect((await refusal(call(Buffer.from([0xff, 0xfe])))).message).toBe(
      'The payload "call.json" is not UTF-8 text.',
    );
  });

  it('stores a function call as its one payload file, under the job kind of its format', async () => {
    const job = await intake.submit(
      script([{ name: 'payload', label: null, content: Buffer.from('{"n":1}'), zip: false }], {
        functionCall: 'json',
      }),
    );
    const [row] = await dataSource.query<Array<{ kind: string }>>(
      'SELECT kind FROM job WHERE id = $1',
      [job.jobId],
    );
    expect(row.kind).toBe('json');
    expect(await storedFiles(job.jobId)).toHaveLength(1);
  });

  it('a submission repeated under the job id it was given makes no second job', async () => {
    const jobId = randomUUID();
    const parts = (): Submission['parts'] => [
      { name: 'job.R', label: null, content: Buffer.from('x <- 1\n'), zip: false },
    ];
    await intake.submit(script(parts(), { jobId }));
    const before = await jobCount();
    await expect(intake.submit(script(parts(), { jobId }))).rejects.toThrow(/duplicate key/);
    expect(await jobCount()).toBe(before);
  });

  it("stores a job in a caller's transaction: gone with its rollback, there with its commit", async () => {
    const parts = async (): Promise<Submission['parts']> => [
      { name: 'job.R', label: null, content: Buffer.from('x <- 1\n'), zip: false },
      // Larger than the inline limit: stored in pieces, in the same transaction.
      {
        name: 'big.bin',
        label: null,
        path: await onDisk('big.bin', randomBytes(1_100_000)),
        zip: false,
      },
    ];
    const before = await jobCount();
    const rolledBack = randomUUID();
    await expect(
      dataSource.transaction(async (transaction) => {
        await intake.submit(script(await parts(), { jobId: rolledBack, transaction }));
        throw new Error('the caller gives up');
      }),
    ).rejects.toThrow('the caller gives up');
    expect(await jobCount()).toBe(before);
    expect(await storedFiles(rolledBack)).toEqual([]);

    const job = await dataSource.transaction((transaction) =>
      parts().then((files) => intake.submit(script(files, { transaction }))),
    );
    expect(job).toMatchObject({ applicationName: 'intake', kind: 'script', source: 'rest' });
    expect(await storedFiles(job.jobId)).toEqual(['big.bin', 'job.R']);
  });
});
