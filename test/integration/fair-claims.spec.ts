import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { resultData } from '../../src/job-core/job-result';
import { QueueRepository } from '../../src/queue/queue.repository';
import { loadConfig } from '../../src/config/app-config';
import { claimPoliciesOf } from '../../src/config/application-settings';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { NodeIdentity } from '../../src/storage/node-identity';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

/** Two connection pools on one database, as two worker nodes have; PGlite has one connection. */
const onServer = SERVER_DATABASE_URL ? it : it.skip;

const SETTINGS = {
  a: { weight: 1 },
  b: { weight: 2 },
  c: { weight: 3 },
  capped: { maxRunningJobs: 2 },
};

/** The claim's fair share, priorities and running caps against a real database. */
describe('fair claims', () => {
  let database: TestDatabase;
  const nodes: Array<{
    dataSource: DataSource;
    close: () => Promise<void>;
    queue: QueueRepository;
  }> = [];
  const policies = claimPoliciesOf({
    applicationSettings: SETTINGS,
    resultRetentionHours: 0,
  });

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    const config = loadConfig(
      testEnvironment(database, { APPLICATION_SETTINGS: JSON.stringify(SETTINGS) }),
    );
    for (let i = 0; i < (database.url ? 2 : 1); i++) {
      const { dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA);
      nodes.push({ dataSource, close, queue: new QueueRepository(dataSource, new NodeIdentity()) });
    }
  });

  afterAll(async () => {
    for (const node of nodes) {
      await node.close();
    }
    await database.drop();
  });

  beforeEach(async () => {
    await nodes[0].dataSource.query('DELETE FROM job');
  });

  async function submit(applicationName: string, submittedAt: Date, priority = 0): Promise<string> {
    const id = randomUUID();
    await nodes[0].queue.enqueue({
      id,
      applicationName,
      kind: 'script',
      meta: {},
      source: 'rest',
      submittedAt,
      priority,
      files: [],
    });
    return id;
  }

  it('gives free slots to the applications in turn, weighted (1:2:3), each in submission order', async () => {
    const base = Date.now() - 100_000;
    const ids: Record<string, string[]> = { a: [], b: [], c: [] };
    let t = 0;
    for (const app of ['a', 'b', 'c']) {
      for (let i = 0; i < 6; i++) {
        ids[app].push(await submit(app, new Date(base + t++ * 1000)));
      }
    }
    const order: string[] = [];
    for (let i = 0; i < 12; i++) {
      const [job] = await nodes[0].queue.claim('w', 1, 30, null, null, null, policies);
      order.push(job.applicationName);
      // Within an application, submission order.
      expect(job.id).toBe(
        ids[job.applicationName][order.filter((a) => a === job.applicationName).length - 1],
      );
    }
    // Shares (running + 1) / weight: c 1/3, b 1/2, c 2/3, then a, b and c tie at 1 (oldest
    // first), ...; over 12 slots 2 : 4 : 6.
    expect(order).toEqual(['c', 'b', 'c', 'a', 'b', 'c', 'c', 'b', 'c', 'a', 'b', 'c']);
  });

  it('does not let a backlog hold up another application: its first job goes next', async () => {
    const base = Date.now() - 100_000;
    for (let i = 0; i < 20; i++) {
      await submit('a', new Date(base + i));
    }
    const [first] = await nodes[0].queue.claim('w', 1, 30, null, null, null, policies);
    expect(first.applicationName).toBe('a');
    const late = await submit('b', new Date());
    // a has one running, b none: b's job is next although a's were submitted long before.
    const [next] = await nodes[0].queue.claim('w', 1, 30, null, null, null, policies);
    expect(next.id).toBe(late);
  });

  it('starts an application’s jobs by priority, highest first, then in submission order', async () => {
    const base = Date.now() - 100_000;
    const low = await submit('a', new Date(base), -5);
    const plain = await submit('a', new Date(base + 1));
    const high = await submit('a', new Date(base + 2), 7);
    const claimed = [];
    for (let i = 0; i < 3; i++) {
      claimed.push((await nodes[0].queue.claim('w', 1, 30, null, null, null, policies))[0].id);
    }
    expect(claimed).toEqual([high, plain, low]);
  });

  onServer(
    'never runs more of an application than its maxRunningJobs, two nodes claiming at once',
    async () => {
      const base = Date.now() - 100_000;
      for (let i = 0; i < 30; i++) {
        await submit('capped', new Date(base + i));
      }
      for (let i = 0; i < 30; i++) {
        await submit('a', new Date(base + 100 + i));
      }
      const runningOfCapped = async (): Promise<string[]> =>
        (
          await nodes[0].dataSource.query<Array<{ id: string }>>(
            `SELECT id FROM job WHERE application_name = 'capped' AND state = 'RUNNING'`,
          )
        ).map((row) => row.id);
      for (let round = 0; round < 8; round++) {
        await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            nodes[i % 2].queue.claim(`w${i}`, 2, 30, null, null, null, policies),
          ),
        );
        const running = await runningOfCapped();
        // Held at the cap, and filled up to it.
        expect(running).toHaveLength(2);
        for (const id of running) {
          await nodes[1].queue.complete(
            id,
            null,
            resultData(true, 'txt', 'text/plain', Buffer.from('ok')),
          );
        }
      }
    },
  );
});
