import { Client } from 'pg';
import { postZip } from '../support/rest-client';
import { ServiceProcess, spawnNodes, stopServices } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  startTestService,
  TestDatabase,
  testEnvironment,
  TestService,
} from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/**
 * maxQueuedJobs is reserved, not read: a burst of parallel submissions, to one node and to two
 * nodes on one database, is admitted exactly up to the limit (docs/queue.md#maxqueuedjobs).
 * ROLE=api runs no jobs, so what is admitted stays queued.
 */
const LIMIT = 3;
const SETTINGS = JSON.stringify({ burst: { maxQueuedJobs: LIMIT } });

async function burst(urls: string[], count: number): Promise<number[]> {
  const zip = await makeZip([{ name: 'main.R', content: 'writeLines("hi", "out.txt")\n' }]);
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      postZip(urls[i % urls.length], zip, { 'X-SVC-Application-Name': 'burst' }),
    ),
  );
  return answers.map((answer) => answer.status);
}

function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) {
    counts[status] = (counts[status] ?? 0) + 1;
  }
  return counts;
}

describe('maxQueuedJobs under a burst on one node', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ ROLE: 'api', APPLICATION_SETTINGS: SETTINGS });
  });

  afterAll(async () => {
    await service.stop();
  });

  it('admits exactly the limit of 24 parallel submissions, and refuses the rest with 429', async () => {
    expect(tally(await burst([service.url], 24))).toEqual({ 202: LIMIT, 429: 24 - LIMIT });
    // Still full afterwards: one more is refused.
    expect(await burst([service.url], 1)).toEqual([429]);
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// Two nodes need a shared database server; the embedded database belongs to one process.
describeWithServer('maxQueuedJobs under a burst on two nodes', () => {
  let database: TestDatabase;
  let nodes: ServiceProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    nodes = await spawnNodes(
      testEnvironment(database, { ROLE: 'api', APPLICATION_SETTINGS: SETTINGS, LOG_LEVEL: 'warn' }),
      2,
    );
  }, 120_000);

  afterAll(async () => {
    await stopServices(nodes);
    await database.drop();
  });

  it('admits exactly the limit across both nodes, and stores no more', async () => {
    const statuses = await burst(
      nodes.map((node) => node.url),
      40,
    );
    expect(tally(statuses)).toEqual({ 202: LIMIT, 429: 40 - LIMIT });
    const client = new Client({ connectionString: database.url ?? '' });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM job WHERE application_name = 'burst'",
      );
      expect(rows[0].n).toBe(LIMIT);
    } finally {
      await client.end();
    }
  });
});
