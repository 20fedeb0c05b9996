import { Test, TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  waitFor,
} from '../../test/support/test-service';
import { inProcessEvents } from '../../test/support/in-process-events';
import { proxyDatabase } from '../../test/support/cuttable-proxy';
import {
  DatabaseEvents,
  LISTEN_APPLICATION_NAME,
  LIVENESS_CHECK_MS,
  LIVENESS_TIMEOUT_MS,
} from './database-events.service';
import { StorageModule } from './storage.module';

const CHANNEL = 'svc_test_event';

/** Waits, without timers (they may be fake), until `condition` holds; 10 s of real time at most. */
async function until(
  condition: () => boolean,
  what: string,
  update: () => Promise<void> = () => Promise.resolve(),
): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (await update(); !condition(); await update()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

it('on the embedded database, delivers a publish in-process once', async () => {
  const events = inProcessEvents();
  const heard: string[] = [];
  events.subscribe(CHANNEL, (payload) => heard.push(payload));
  await events.publish(CHANNEL, 'only node');
  expect(heard).toEqual(['only node']);
  expect(events.listening).toBe(false);
  await events.onApplicationShutdown();
});

/** LISTEN/NOTIFY between sessions needs the server. */
(SERVER_DATABASE_URL ? describe : describe.skip)('DatabaseEvents on a server', () => {
  let database: TestDatabase;
  let url: string;
  let sender: Client;
  const modules: TestingModule[] = [];

  /** A node: its own StorageModule (connection pool, NodeIdentity, DatabaseEvents). */
  async function node(
    listen: boolean | string = true,
  ): Promise<{ events: DatabaseEvents; heard: string[] }> {
    const module = await Test.createTestingModule({
      imports: [
        StorageModule.forTarget(
          { kind: 'server', url, listenUrl: listen === true ? url : listen || null },
          { entities: [], migrations: [] },
          'svc-test',
        ),
      ],
    }).compile();
    modules.push(module);
    const events = module.get(DatabaseEvents);
    const heard: string[] = [];
    events.subscribe(CHANNEL, (payload) => heard.push(payload));
    await events.listen();
    return { events, heard };
  }

  /** The LISTEN sessions in the test database. */
  async function listeners(): Promise<number> {
    const { rows } = await sender.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE application_name = $1 AND datname = current_database()`,
      [LISTEN_APPLICATION_NAME],
    );
    return rows[0].n;
  }

  /** A notification sent by plain SQL (no node), as a trigger or a command would. */
  async function notifyFromSql(payload: string): Promise<void> {
    await sender.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    url = database.url ?? '';
    sender = new Client({ connectionString: url });
    await sender.connect();
  });

  afterEach(async () => {
    jest.useRealTimers();
    for (const module of modules.splice(0)) {
      await module.close();
    }
  });

  afterAll(async () => {
    await sender.end();
    await database.drop();
  });

  it("delivers another node's publish, and its own once: at once, its echo ignored", async () => {
    const [a, b] = [await node(), await node()];
    await a.events.publish(CHANNEL, 'from a');
    expect(a.heard).toEqual(['from a']);
    await until(() => b.heard.length > 0, "b hearing a's publish");
    // b's NOTIFY commits after a's, so a hears it after its own echo (one LISTEN session).
    await b.events.publish(CHANNEL, 'from b');
    await until(() => a.heard.length > 1, "a hearing b's publish");
    expect(a.heard).toEqual(['from a', 'from b']);
    expect(b.heard).toEqual(['from a', 'from b']);
  });

  it("ignores its own statement's echo when it arrives before the in-process delivery", async () => {
    const a = await node();
    // A statement of this node notified (as the queue's statements do), then another node.
    await sender.query('SELECT pg_notify($1, $2)', [CHANNEL, `${a.events.prefix}job-1`]);
    await notifyFromSql(' marker');
    await until(() => a.heard.length > 0, 'the marker');
    expect(a.heard).toEqual(['marker']);
    // The statement's caller reports the result now: once.
    a.events.deliverHere(CHANNEL, 'job-1');
    expect(a.heard).toEqual(['marker', 'job-1']);
  });

  it('delivers notifications sent by SQL with no node id to every node', async () => {
    const [a, b] = [await node(), await node()];
    await notifyFromSql(' demo app/R_FUNCTIONS'); // an empty node id: the payload may hold spaces
    await notifyFromSql('6f1c2d3e'); // no space at all: the whole is the payload
    await until(() => a.heard.length > 1 && b.heard.length > 1, 'both notifications');
    expect(a.heard).toEqual(['demo app/R_FUNCTIONS', '6f1c2d3e']);
    expect(b.heard).toEqual(a.heard);
  });

  it('behind a pooler without a LISTEN URL, publishes to the others but hears none', async () => {
    const [pooled, listening] = [await node(false), await node()];
    await pooled.events.publish(CHANNEL, 'from the pooled node');
    expect(pooled.events.listening).toBe(false);
    await until(() => listening.heard.length > 0, 'the listening node hearing it');
    await listening.events.publish(CHANNEL, 'from the listening node');
    await notifyFromSql(' marker');
    await until(() => listening.heard.length > 2, 'the marker');
    expect(pooled.heard).toEqual(['from the pooled node']);
  });

  it('reconnects after its LISTEN session was killed; the hook fires again and notifications flow', async () => {
    const a = await node();
    let listenings = 0;
    let losses = 0;
    a.events.onListening(() => listenings++);
    a.events.onLost(() => losses++);
    // The sessions of the nodes closed by earlier tests may take a moment to exit.
    await waitFor(async () => (await listeners()) === 1, 5000, 'the one LISTEN session');
    // Reconnected by setTimeout; the connection's I/O stays real.
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'Date'] });
    for (let round = 1; round <= 2; round++) {
      // The session killed in the round before may still be listed while it exits.
      let sessions = 0;
      await until(
        () => sessions === 1,
        'the one LISTEN session',
        async () => void (sessions = await listeners()),
      );
      const killed = await sender.query<{ killed: boolean }>(
        `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
          WHERE application_name = $1 AND datname = current_database()`,
        [LISTEN_APPLICATION_NAME],
      );
      expect(killed.rows).toEqual([{ killed: true }]);
      await until(() => losses === round, 'the loss');
      expect(a.events.listening).toBe(false);
      // Lost while no session listens; the hook tells subscribers to look again instead.
      await notifyFromSql(` lost ${round}`);
      await jest.advanceTimersByTimeAsync(10_000);
      await until(() => listenings === round, 'listening again');
      await notifyFromSql(` heard ${round}`);
      await until(() => a.heard.includes(`heard ${round}`), 'a notification after the reconnect');
    }
    expect(a.heard).toEqual(['heard 1', 'heard 2']);
  });

  it('notices a LISTEN connection cut without a word by its liveness check, and listens again', async () => {
    const { proxy, url: viaProxy } = await proxyDatabase(url);
    try {
      // Before the node: its check's interval starts with its connection.
      jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'Date'] });
      const a = await node(viaProxy);
      let listenings = 0;
      a.events.onListening(() => listenings++);
      await notifyFromSql(' before');
      await until(() => a.heard.includes('before'), 'a notification before the cut');

      // Neither side hears of this cut: the connection looks open, notifications stop.
      proxy.freeze();
      await notifyFromSql(' during');
      await jest.advanceTimersByTimeAsync(LIVENESS_CHECK_MS);
      expect(a.events.listening).toBe(true);
      await jest.advanceTimersByTimeAsync(LIVENESS_TIMEOUT_MS);
      expect(a.events.listening).toBe(false);
      // Reconnected after the back-off through the proxy, which forwards new connections.
      await jest.advanceTimersByTimeAsync(1000);
      await until(() => listenings === 1, 'listening again');
      await notifyFromSql(' after');
      await until(() => a.heard.includes('after'), 'a notification after the reconnect');
      expect(a.heard).toEqual(['before', 'after']);
    } finally {
      await proxy.cut();
    }
  });

  it('asks an open LISTEN connection for a sign of life once per interval, and keeps it', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'Date'] });
    const a = await node();
    /** The last statement of the node's LISTEN session. */
    const lastStatement = async (): Promise<string> => {
      const { rows } = await sender.query<{ query: string }>(
        `SELECT query FROM pg_stat_activity
          WHERE application_name = $1 AND datname = current_database()`,
        [LISTEN_APPLICATION_NAME],
      );
      return rows.map((row) => row.query).join(' | ');
    };
    expect(await lastStatement()).toMatch(/^LISTEN /);
    let losses = 0;
    a.events.onLost(() => losses++);
    // A check every LIVENESS_CHECK_MS from the connection on; each answered within its time.
    for (let round = 1; round <= 3; round++) {
      await jest.advanceTimersByTimeAsync(LIVENESS_CHECK_MS);
      // listen() resolves once the statements sent on the connection, the check among them,
      // are answered (real I/O, which fake time would otherwise outrun).
      await a.events.listen();
      expect(await lastStatement()).toBe('SELECT 1');
    }
    await jest.advanceTimersByTimeAsync(LIVENESS_TIMEOUT_MS);
    expect(losses).toBe(0);
    expect(a.events.listening).toBe(true);
    await notifyFromSql(' still heard');
    await until(() => a.heard.includes('still heard'), 'a notification');
  });
});
