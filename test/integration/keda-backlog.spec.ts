import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/app-config';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { QueueRepository } from '../../src/queue/queue.repository';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { NodeIdentity } from '../../src/storage/node-identity';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

const KUBERNETES = join(__dirname, '..', '..', 'deploy', 'kubernetes');

interface ScaledObject {
  spec: {
    triggers: Array<{ type: string; metadata: { query: string; targetQueryValue: string } }>;
  };
}

/** A plan node of EXPLAIN (FORMAT JSON), with the fields the test reads. */
interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

// KEDA connects to a PostgreSQL server with a role of its own: the embedded database has neither.
const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

/**
 * The KEDA ScaledObject's query (deploy/kubernetes/components/keda), run as the read-only role
 * of keda-role.sql against a database holding a known backlog over several applications.
 */
describeWithServer('KEDA backlog query', () => {
  const role = `svc_keda_${randomBytes(4).toString('hex')}`;
  const [scaledObject] = loadAll(
    readFileSync(join(KUBERNETES, 'components', 'keda', 'scaled-object.yaml'), 'utf8'),
  ) as ScaledObject[];
  const trigger = scaledObject.spec.triggers[0];
  let database: TestDatabase;
  let dataSource: DataSource;
  let close: () => Promise<void>;
  let keda: Client;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    ({ dataSource, close } = await openDatabaseForCli(
      loadConfig(testEnvironment(database)),
      DATABASE_SCHEMA,
    ));
    const created = spawnSync(
      'psql',
      [
        database.url!,
        '-X',
        '-q',
        '-v',
        'ON_ERROR_STOP=1',
        '-v',
        `role=${role}`,
        '-v',
        'password=keda-test',
        '-f',
        join(KUBERNETES, 'keda-role.sql'),
      ],
      { encoding: 'utf8' },
    );
    expect({ status: created.status, stderr: created.stderr }).toEqual({ status: 0, stderr: '' });
    const url = new URL(database.url!);
    url.username = role;
    url.password = 'keda-test';
    keda = new Client({ connectionString: url.toString() });
    await keda.connect();
  });

  afterAll(async () => {
    await keda?.end();
    await close?.();
    await database?.drop();
    const admin = new Client({ connectionString: SERVER_DATABASE_URL! });
    await admin.connect();
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.end();
  });

  it('gives ceil(backlog / slots) workers for queued plus running jobs of every application', async () => {
    const queue = new QueueRepository(dataSource, new NodeIdentity());
    const queued: Record<string, number> = { alpha: 6, beta: 3, gamma: 2, delta: 2 };
    for (const [applicationName, count] of Object.entries(queued)) {
      for (let i = 0; i < count; i++) {
        await queue.enqueue({
          id: randomUUID(),
          applicationName,
          kind: 'script',
          meta: {},
          source: 'rest',
          submittedAt: new Date(),
          files: [],
        });
      }
    }
    // Workers elsewhere run two of alpha's jobs and one of gamma's.
    expect(await queue.claim('worker-1', 2, 60, 'alpha')).toHaveLength(2);
    expect(await queue.claim('worker-2', 1, 60, 'gamma')).toHaveLength(1);
    // Finished jobs, many more than the live ones, count for nothing.
    await dataSource.query(
      `INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, finished_at)
       SELECT gen_random_uuid(), 'app' || (i % 7), 'script', 'DONE', 0, '{}', 'test', now(), now(), now()
         FROM generate_series(1, 20000) AS i`,
    );

    const { rows } = await keda.query<{ backlog: string }>(trigger.metadata.query);
    // 13 jobs: 10 queued, 3 running.
    expect(Number(rows[0].backlog)).toBe(13);
    const slots = Number(trigger.metadata.targetQueryValue);
    expect(slots).toBe(2);
    // KEDA's metric is an AverageValue: the HPA runs ceil(value / targetQueryValue) replicas.
    expect(Math.ceil(Number(rows[0].backlog) / slots)).toBe(7);
  });

  it('is answered from the partial indexes, not a pass over the table', async () => {
    // With statistics the planner sees how few rows each partial index holds (no planner
    // settings changed): 13 live jobs against 20,000 finished ones.
    await dataSource.query('VACUUM ANALYZE job');
    const { rows } = await keda.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) ${trigger.metadata.query}`,
    );
    const nodes = planNodes(rows[0]['QUERY PLAN'][0].Plan);
    expect(nodes.filter((node) => node['Node Type'] === 'Seq Scan')).toEqual([]);
    // The queued jobs from one of the two partial indexes that hold only them (the planner takes
    // the smaller), the running ones from the lease index.
    const [queued, running] = nodes.map((node) => node['Index Name']).filter(Boolean);
    expect(['job_claim_idx', 'job_queued_kind_idx']).toContain(queued);
    expect(running).toBe('job_lease_idx');
  });

  it('runs as a role that can count jobs by state and do nothing else', async () => {
    for (const statement of [
      'SELECT application_name FROM job LIMIT 1',
      'SELECT meta FROM job LIMIT 1',
      'SELECT count(*) FROM result',
      "UPDATE job SET state = 'DONE' WHERE state = 'QUEUED'",
    ]) {
      await expect(keda.query(statement)).rejects.toThrow(/permission denied/);
    }
    const { rows } = await keda.query<{ statement_timeout: string }>('SHOW statement_timeout');
    expect(rows[0].statement_timeout).toBe('5s');
  });
});
