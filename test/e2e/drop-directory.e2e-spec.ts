import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { rename, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { explodeZip } from '../../src/jobs/job-archive';
import { ADMIN_ENV, retryAsAdmin } from '../support/admin-auth';
import { parseXml, postZip } from '../support/rest-client';
import { ServiceProcess, spawnNodes, stopServices } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
  waitFor,
} from '../support/test-service';
import { makeZip, makeZipBomb } from '../support/zip-fixtures';

const APP = 'dropper';
const SCRIPT = 'writeLines(paste("sum", sum(1:10)), "out.txt")\n';

/** Writes a file into inbox/ as a client should: under a temporary name, then renamed. */
async function drop(root: string, name: string, content: Buffer | string): Promise<void> {
  const temporary = join(root, 'inbox', `.${name}.part`);
  await writeFile(temporary, content);
  await rename(temporary, join(root, 'inbox', name));
}

async function waitForFile(path: string, timeoutMs = 90000): Promise<Buffer> {
  return waitFor(() => Promise.resolve(existsSync(path) && readFileSync(path)), timeoutMs, path);
}

/** The text of `out.txt` in a result ZIP. */
async function outText(zip: Buffer): Promise<string | undefined> {
  const files = await explodeZip(zip, {
    maxEntries: 10,
    maxUncompressedBytes: 1e7,
    maxCompressionRatio: 1e4,
  });
  return files.find((file) => file.name === 'out.txt')?.content.toString();
}

/** Runs one statement on the service's database and returns its rows. */
type Query = <T>(sql: string, params?: unknown[]) => Promise<T[]>;

/** Through the service's own connection: the server's or the embedded database. */
function queryThrough(service: TestService): Query {
  const dataSource = service.app.get(DataSource);
  return <T>(sql: string, params: unknown[] = []) => dataSource.query<T[]>(sql, params);
}

/** Through a connection of its own to a PostgreSQL server (the nodes are other processes). */
function queryServer(url: string): Query {
  return async <T>(sql: string, params: unknown[] = []) => {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  };
}

async function directoryJobs(query: Query): Promise<number> {
  const rows = await query<{ n: number }>(
    `SELECT count(*)::int AS n FROM job WHERE source = 'directory'`,
  );
  return rows[0].n;
}

/** The node whose processing folder holds a claim of `name`; the first node once it is accepted. */
function claimHolder(
  root: string,
  name: string,
  nodes: ServiceProcess[],
): ServiceProcess | undefined {
  const listing = (path: string) => (existsSync(path) ? readdirSync(path) : []);
  for (const folder of listing(join(root, 'processing'))) {
    if (listing(join(root, 'processing', folder)).some((f) => f.endsWith(`.${name}`))) {
      return nodes.find((node) => folder.includes(`-${node.child.pid}-`));
    }
  }
  return existsSync(join(root, 'accepted', name)) ? nodes[0] : undefined;
}

/** A claim left by a node that died: a file in its processing folder, untouched for an hour. */
async function deadClaim(
  root: string,
  node: string,
  claimId: string,
  name: string,
  content: Buffer,
): Promise<void> {
  const folder = join(root, 'processing', node);
  mkdirSync(folder, { recursive: true });
  await writeFile(join(folder, `${claimId}.${name}`), content);
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await utimes(folder, anHourAgo, anHourAgo);
}

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

describe('a drop directory on one node', () => {
  let root: string;
  let service: TestService;
  let query: Query;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-drop-'));
    service = await startTestService({
      APPLICATION_SETTINGS: JSON.stringify({ [APP]: { dropDirectory: root } }),
      DROP_POLL_INTERVAL_MS: '200',
      ...ADMIN_ENV,
    });
    query = queryThrough(service);
  });

  afterAll(async () => {
    await service.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('creates inbox, processing, accepted, rejected and outbox', () => {
    expect(readdirSync(root).sort()).toEqual([
      'accepted',
      'inbox',
      'outbox',
      'processing',
      'rejected',
    ]);
    // The service's user's alone until the operator opens them (whatever the umask).
    for (const folder of readdirSync(root)) {
      expect([folder, lstatSync(join(root, folder)).mode & 0o777]).toEqual([folder, 0o700]);
    }
  });

  it('runs a ZIP as a job with source=directory and writes its result ZIP to outbox/', async () => {
    await drop(root, 'report.zip', await makeZip([{ name: 'report.R', content: SCRIPT }]));
    const result = await waitForFile(join(root, 'outbox', 'report.zip.result.zip'));
    expect(await outText(result)).toBe('sum 55\n');
    // Readable as far as outbox/ lets one in; changed by the service's user only.
    expect(lstatSync(join(root, 'outbox', 'report.zip.result.zip')).mode & 0o777).toBe(0o644);
    expect(existsSync(join(root, 'accepted', 'report.zip'))).toBe(true);
    expect(readdirSync(join(root, 'inbox'))).toEqual([]);
    const rows = await query<{ application_name: string; source: string }>(
      `SELECT j.application_name, j.source FROM drop_file d JOIN job j ON j.id = d.job_id
        WHERE d.file_name = 'report.zip'`,
    );
    expect(rows).toEqual([{ application_name: APP, source: 'directory' }]);
  });

  it('runs a single .R file', async () => {
    await drop(root, 'single.R', SCRIPT);
    const result = await waitForFile(join(root, 'outbox', 'single.R.result.zip'));
    expect(await outText(result)).toBe('sum 55\n');
    expect(existsSync(join(root, 'accepted', 'single.R'))).toBe(true);
  });

  it('writes the error text of a failed job to <name>.result.txt', async () => {
    await drop(root, 'fails.R', 'stop("no data for this month")\n');
    const text = (await waitForFile(join(root, 'outbox', 'fails.R.result.txt'))).toString();
    expect(text).toContain('no data for this month');
  });

  it("writes the outcome of a failed job's retry to outbox/ again", async () => {
    await drop(root, 'retried.R', 'stop("the month is not closed")\n');
    const outcome = join(root, 'outbox', 'retried.R.result.txt');
    await waitForFile(outcome);
    rmSync(outcome);
    const [{ job_id: jobId }] = await query<{ job_id: string }>(
      "SELECT job_id FROM drop_file WHERE file_name = 'retried.R'",
    );
    expect((await retryAsAdmin(service.url, APP, jobId)).status).toBe(202);
    expect((await waitForFile(outcome)).toString()).toContain('the month is not closed');
    const [job] = await query<{ attempts: number }>('SELECT attempts FROM job WHERE id = $1', [
      jobId,
    ]);
    expect(job.attempts).toBe(2);
  });

  it.each([
    ['broken.zip', 'not a ZIP', 400, () => Promise.resolve(Buffer.from('this is no zip archive'))],
    ['bomb.zip', 'too large unpacked', 413, () => makeZipBomb(20 * 1024 * 1024)],
  ])(
    'rejects %s (%s) with the message the REST API answers with %d',
    async (name, _what, status, content) => {
      const bad = await content();
      await drop(root, name, bad);
      // The reason is written first, then the file is moved next to it.
      expect(await waitForFile(join(root, 'rejected', name))).toEqual(bad);
      const why = readFileSync(join(root, 'rejected', `${name}.error.txt`), 'utf8');
      const rest = await postZip(service.url, bad, { 'X-SVC-Application-Name': APP });
      expect(rest.status).toBe(status);
      expect(why).toBe(`${parseXml(rest.text).error.message}\n`);
      expect(readdirSync(join(root, 'outbox')).filter((f) => f.startsWith(name))).toEqual([]);
    },
  );

  it('rejects a file that is neither a ZIP nor an R script', async () => {
    await drop(root, 'notes.txt', 'hello');
    await waitForFile(join(root, 'rejected', 'notes.txt'));
    const why = readFileSync(join(root, 'rejected', 'notes.txt.error.txt'), 'utf8');
    expect(why).toContain('neither a ZIP archive (.zip) nor an R script (.R)');
  });

  it('leaves a file being written under a temporary name until it is renamed', async () => {
    const zip = await makeZip([{ name: 'late.R', content: SCRIPT }]);
    const inbox = join(root, 'inbox');
    await writeFile(join(inbox, '.late.zip'), zip.subarray(0, 10));
    await writeFile(join(inbox, 'late.zip.part'), zip.subarray(0, 10));
    await writeFile(join(inbox, 'late.zip.tmp'), zip);
    // A file dropped after them is taken: the watcher has looked at the inbox since.
    await drop(root, 'marker.R', SCRIPT);
    await waitForFile(join(root, 'accepted', 'marker.R'));
    expect(readdirSync(inbox).sort()).toEqual(['.late.zip', 'late.zip.part', 'late.zip.tmp']);

    await rename(join(inbox, 'late.zip.tmp'), join(inbox, 'late.zip'));
    expect(await outText(await waitForFile(join(root, 'outbox', 'late.zip.result.zip')))).toBe(
      'sum 55\n',
    );
    expect(readdirSync(inbox).sort()).toEqual(['.late.zip', 'late.zip.part']);
  });

  it('finishes the claim of a node that died between claim and submit', async () => {
    const before = await directoryJobs(query);
    const zip = await makeZip([{ name: 'orphan.R', content: SCRIPT }]);
    await deadClaim(root, 'dead-node-1', '00000000000000a1', 'orphan.zip', zip);
    const result = await waitForFile(join(root, 'outbox', 'orphan.zip.result.zip'));
    expect(await outText(result)).toBe('sum 55\n');
    expect(existsSync(join(root, 'accepted', 'orphan.zip'))).toBe(true);
    expect(existsSync(join(root, 'processing', 'dead-node-1'))).toBe(false);
    expect(await directoryJobs(query)).toBe(before + 1);
  });

  it('does not submit again the claim of a node that died after storing its job', async () => {
    // The dead node recorded the claim and stored the job, then died before noting it.
    const zip = await makeZip([{ name: 'once.R', content: SCRIPT }]);
    const rest = await postZip(service.url, zip, { 'X-SVC-Application-Name': APP });
    expect(rest.status).toBe(202);
    const jobId = parseXml(rest.text).jobToken.jobId;
    await query(
      `INSERT INTO drop_file (application_name, claim_id, file_name, job_id, claimed_at)
       VALUES ($1, '00000000000000b2', 'once.zip', $2, now())`,
      [APP, jobId],
    );
    const jobsBefore = await query<{ n: number }>('SELECT count(*)::int AS n FROM job');
    await deadClaim(root, 'dead-node-2', '00000000000000b2', 'once.zip', zip);

    const result = await waitForFile(join(root, 'outbox', 'once.zip.result.zip'));
    expect(await outText(result)).toBe('sum 55\n');
    expect(existsSync(join(root, 'accepted', 'once.zip'))).toBe(true);
    expect(await query('SELECT count(*)::int AS n FROM job')).toEqual(jobsBefore);
  });
});

describeWithServer('a drop directory watched by two nodes', () => {
  let root: string;
  let database: TestDatabase;
  let nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-drop-'));
    database = await createTestDatabase();
    const env = testEnvironment(database, {
      APPLICATION_SETTINGS: JSON.stringify({ [APP]: { dropDirectory: root } }),
      DROP_POLL_INTERVAL_MS: '100',
      LEASE_SECONDS: '3',
      HEARTBEAT_SECONDS: '1',
    });
    nodes = await spawnNodes(env, 2);
  });

  afterAll(async () => {
    await stopServices(nodes);
    await database.drop();
    rmSync(root, { recursive: true, force: true });
  });

  it('makes each file exactly one job, also when a node is killed between claim and submit', async () => {
    const BIG = 40 * 1024 * 1024;
    const expected = new Map<string, string>([['big.zip', `big ${BIG}\n`]]);
    for (let i = 0; i < 7; i++) {
      expected.set(`batch-${i}.zip`, `file ${i}\n`);
    }
    const names = [...expected.keys()];
    const smallZip = (i: number) =>
      makeZip([{ name: 'job.R', content: `writeLines("file ${i}", "out.txt")\n` }]);
    // Incompressible and stored: its submission streams 40 MiB into the database, a wide window
    // between the claim and the stored job.
    const bigZip = await makeZip([
      { name: 'job.R', content: 'writeLines(paste("big", file.size("data.bin")), "out.txt")\n' },
      { name: 'data.bin', content: randomBytes(BIG), compress: false },
    ]);
    await drop(root, 'big.zip', bigZip);
    for (let i = 0; i < 3; i++) {
      await drop(root, `batch-${i}.zip`, await smallZip(i));
    }
    // The node holding big.zip in processing/<host>-<pid>-<id>/ is killed; if it was too quick
    // for the test to see the claim, the first node is.
    const holder = await waitFor(
      () => Promise.resolve(claimHolder(root, 'big.zip', nodes)),
      60000,
      'the claim of big.zip',
    );
    holder.child.kill('SIGKILL');
    await holder.exited();
    for (let i = 3; i < 7; i++) {
      await drop(root, `batch-${i}.zip`, await smallZip(i));
    }

    for (const [name, text] of expected) {
      const result = await waitForFile(join(root, 'outbox', `${name}.result.zip`));
      expect(await outText(result)).toBe(text);
    }
    expect(readdirSync(join(root, 'accepted')).sort()).toEqual([...names].sort());
    const query = queryServer(database.url ?? '');
    const rows = await query<{ file_name: string; jobs: number }>(
      `SELECT d.file_name, count(j.id)::int AS jobs FROM drop_file d JOIN job j ON j.id = d.job_id
        GROUP BY d.file_name ORDER BY d.file_name`,
    );
    expect(rows).toEqual([...names].sort().map((file_name) => ({ file_name, jobs: 1 })));
    expect(await directoryJobs(query)).toBe(names.length);
  });
});
