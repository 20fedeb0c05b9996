import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, REST, request, waitForResult } from '../support/rest-client';
import { pgBouncerInstalled, PgBouncer, startPgBouncer } from '../support/pgbouncer';
import { runSvc, ServiceProcess, spawnService } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
  waitFor,
} from '../support/test-service';

// PgBouncer fronts a server; CI installs it, elsewhere its absence skips the file.
const describeWithPgBouncer =
  SERVER_DATABASE_URL && (pgBouncerInstalled() || process.env.CI) ? describe : describe.skip;

const CALL = '{"RFunction":"combn","n":5,"k":2}';

/** A catalog folder with one function of application `pooled` answering `version`. */
function catalogWith(dir: string, version: string): string {
  const functions = join(dir, 'pooled', 'R_FUNCTIONS');
  mkdirSync(functions, { recursive: true });
  writeFileSync(join(functions, 'version.R'), `svcJsonService <- function(payload) "${version}"\n`);
  return dir;
}

async function processCall(url: string, application: string, body: string): Promise<string> {
  const answer = await request(`${url}${REST}/process`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': application },
    body,
  });
  expect(answer.status).toBe(200);
  return answer.text;
}

/** Backends of the test database other than this test's own, by kind. */
async function backends(
  databaseUrl: string,
): Promise<{ listening: number; pooled: number; listenStatements: number }> {
  const client = new Client({ connectionString: SERVER_DATABASE_URL ?? '' });
  await client.connect();
  try {
    const { rows } = await client.query<{ listening: number; pooled: number; listened: number }>(
      `SELECT count(*) FILTER (WHERE application_name LIKE 'svc-%listener')::int AS listening,
              count(*) FILTER (WHERE application_name NOT LIKE 'svc-%listener')::int AS pooled,
              count(*) FILTER (WHERE application_name NOT LIKE 'svc-%listener'
                                 AND query ILIKE 'LISTEN%')::int AS listened
         FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
      [new URL(databaseUrl).pathname.slice(1)],
    );
    return {
      listening: rows[0].listening,
      pooled: rows[0].pooled,
      listenStatements: rows[0].listened,
    };
  } finally {
    await client.end();
  }
}

describeWithPgBouncer.each([
  { mode: 'polling: no DATABASE_LISTEN_URL', listen: false },
  { mode: 'DATABASE_LISTEN_URL, a direct connection for LISTEN', listen: true },
])('an API node and two workers through PgBouncer in transaction mode ($mode)', ({ listen }) => {
  let database: TestDatabase;
  let bouncer: PgBouncer;
  let catalogDir: string;
  let env: NodeJS.ProcessEnv;
  const nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    bouncer = await startPgBouncer(database.url ?? '');
    catalogDir = mkdtempSync(join(tmpdir(), 'svc-pooled-catalog-'));
    env = testEnvironment(database, {
      DATABASE_URL: bouncer.url,
      DATABASE_POOLER: 'pgbouncer',
      MIGRATIONS_RUN: 'false',
      SCRIPT_SLOTS: '2',
      // With LISTEN, a poll once a minute: only notifications can start the jobs in time.
      POLL_INTERVAL_MS: listen ? '60000' : '200',
      ...(listen ? { DATABASE_LISTEN_URL: database.url ?? '' } : {}),
    });
    // Migrations and the catalog command line through PgBouncer too.
    const migrated = await runSvc(['migrate', 'run'], env);
    expect(migrated).toMatchObject({ code: 0 });
    for (const dir of ['catalog', catalogWith(catalogDir, 'v1')]) {
      expect(await runSvc(['catalog', 'load', dir], env)).toMatchObject({ code: 0 });
    }
    nodes.push(await spawnService({ ...env, ROLE: 'api' }));
    nodes.push(await spawnService({ ...env, ROLE: 'worker' }));
    nodes.push(await spawnService({ ...env, ROLE: 'worker' }));
  });

  afterAll(async () => {
    for (const node of nodes) {
      node.child.kill('SIGTERM');
    }
    const codes = await Promise.all(nodes.map((node) => node.exited()));
    await bouncer?.stop();
    rmSync(catalogDir, { recursive: true, force: true });
    await database?.drop();
    expect(codes).toEqual([0, 0, 0]);
  });

  it('runs a batch of script jobs, function-call jobs and /process calls: one result each', async () => {
    const [api, ...workers] = nodes;
    const zip = await makeZip([
      {
        name: 'job.R',
        content: 'Sys.sleep(0.3)\nwriteLines(as.character(Sys.getpid()), "pid.txt")\n',
      },
    ]);
    const submit = async (i: number): Promise<string> => {
      const answer =
        i % 3 === 2
          ? await request(`${api.url}${REST}/jobs`, {
              method: 'POST',
              headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' },
              body: CALL,
            })
          : await postZip(api.url, zip);
      expect(answer.status).toBe(202);
      return parseXml(answer.text).jobToken.jobId;
    };
    const [jobIds, calls] = await Promise.all([
      Promise.all(Array.from({ length: 18 }, (_, i) => submit(i))),
      Promise.all(Array.from({ length: 8 }, () => processCall(api.url, 'demo', CALL))),
    ]);
    for (const answer of calls) {
      expect((JSON.parse(answer) as { combinations: unknown[] }).combinations).toHaveLength(10);
    }
    for (const jobId of jobIds) {
      const ready = await waitForResult(`${api.url}${REST}/results/demo/${jobId}`, {}, 60000);
      expect(parseXml(ready.text).result.success).toBe('true');
    }
    // Each ran once: one attempt, one usage record, one result; both workers took part.
    const check = new Client({ connectionString: database.url ?? '' });
    await check.connect();
    try {
      const { rows } = await check.query<{ attempts: number; results: number; usage: number }>(
        `SELECT j.attempts,
                (SELECT count(*)::int FROM result r WHERE r.job_id = j.id) AS results,
                (SELECT count(*)::int FROM job_usage u WHERE u.job_id = j.id) AS usage
           FROM job j WHERE j.id = ANY($1::uuid[])`,
        [jobIds],
      );
      expect(rows).toHaveLength(jobIds.length);
      expect(rows.every((row) => row.attempts === 1 && row.results === 1 && row.usage === 1)).toBe(
        true,
      );
    } finally {
      await check.end();
    }
    for (const worker of workers) {
      expect(worker.output()).toMatch(/attempt 1 started/);
    }
    // The nodes' statements shared PgBouncer's few server connections; LISTEN went only to the
    // direct URL, never through the pooler.
    const seen = await backends(database.url ?? '');
    expect(seen.pooled).toBeLessThanOrEqual(bouncer.poolSize);
    expect(seen.listenStatements).toBe(0);
    expect(seen.listening > 0).toBe(listen);
  });

  it('a catalog change reaches the function sessions of a running node', async () => {
    const [api] = nodes;
    expect(await processCall(api.url, 'pooled', '{}')).toBe('v1');
    expect(await runSvc(['catalog', 'load', catalogWith(catalogDir, 'v2')], env)).toMatchObject({
      code: 0,
    });
    await waitFor(
      async () => (await processCall(api.url, 'pooled', '{}')) === 'v2',
      15000,
      'the new function library',
    );
  });
});
