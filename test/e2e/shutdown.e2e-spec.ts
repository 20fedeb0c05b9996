import { CuttableProxy, proxyDatabase } from '../support/cuttable-proxy';
import { spawnService } from '../support/service-process';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

/**
 * A node always ends: SIGTERM ends the process within SHUTDOWN_TIMEOUT_SECONDS even when its
 * database does not answer (docs/operations.md#a-bounded-shutdown). Across processes there are
 * no fake timers: the jest timeout is the bound the exit must beat, and the log says the value.
 */
const BOUND_SECONDS = 3;

describe('shutdown', () => {
  let database: TestDatabase;

  beforeEach(async () => {
    database = await createTestDatabase();
  });

  afterEach(async () => {
    await database.drop();
  });

  it('ends at SIGTERM and logs its bound', async () => {
    const node = await spawnService(
      testEnvironment(database, {
        SHUTDOWN_GRACE_SECONDS: '1',
        SHUTDOWN_TIMEOUT_SECONDS: String(BOUND_SECONDS),
        LOG_LEVEL: 'info',
      }),
    );
    node.child.kill('SIGTERM');
    expect(await node.exited()).toBe(0);
    expect(node.output()).toContain(`SIGTERM received: shutting down (at most ${BOUND_SECONDS} s)`);
  }, 60_000);

  const itWithServer = SERVER_DATABASE_URL ? it : it.skip;

  // The embedded database is in the process: only a server's connection can be frozen.
  itWithServer(
    'ends within SHUTDOWN_TIMEOUT_SECONDS while the database does not answer, a request in flight',
    async () => {
      let proxy: CuttableProxy | null = null;
      try {
        const proxied = await proxyDatabase(database.url ?? '');
        proxy = proxied.proxy;
        const node = await spawnService(
          testEnvironment(database, {
            DATABASE_URL: proxied.url,
            DATABASE_LISTEN_URL: proxied.url,
            SHUTDOWN_GRACE_SECONDS: '1',
            SHUTDOWN_TIMEOUT_SECONDS: String(BOUND_SECONDS),
            LOG_LEVEL: 'info',
          }),
        );
        proxy.freeze();
        // A request that needs the database: it hangs with it.
        const inFlight = fetch(
          `${node.url}/svc/api/rest/jobs/demo/00000000-0000-4000-8000-000000000000`,
        ).catch(() => null);
        node.child.kill('SIGTERM');
        expect(await node.exited()).toBe(1);
        expect(node.output()).toContain(
          `shutdown did not end within SHUTDOWN_TIMEOUT_SECONDS (${BOUND_SECONDS} s)`,
        );
        await inFlight;
      } finally {
        await proxy?.cut();
      }
    },
    // The bound plus start-up; a node that waited for the database would hang past it.
    60_000,
  );
});
