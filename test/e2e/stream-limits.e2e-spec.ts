/**
 * Hostile tests of what a job's log and the service's streams cost: empty lines counted against
 * JOB_LOG_MAX_BYTES (each line its line break and its row), readers that stop reading a live log
 * or a download (bounded memory, cut after STREAM_SLOW_READER_SECONDS), and open streams ended
 * when their caller loses the right that opened them (docs/security.md).
 *
 * @ci-pass embedded
 * @ci-pass node24
 */
import { spawn } from 'node:child_process';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { JobLogService } from '../../src/jobs/job-log.service';
import { ALICE, basicUsersEnvironment, ROOT } from '../support/admin-auth';
import { SseEvent, SseReader } from '../support/sse-client';
import { makeZip } from '../support/zip-fixtures';
import { parseXml, postZip, REST, waitForResult } from '../support/rest-client';
import { startTestService, TestService, waitFor } from '../support/test-service';

const CAP = 131_072;
/** What docs/api.md says a stored line costs at least: its line break and its row. */
const LOG_LINE_OVERHEAD_BYTES = 64;

describe('a log of empty lines (JOB_LOG_MAX_BYTES=131072)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ JOB_LOG_MAX_BYTES: String(CAP) });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('counts each line with its line break and its row: 30,000 empty lines stay within the cap', async () => {
    // The cap admits 2,049 rows at the least cost a line may have: 30,000 lines are over 14 times
    // that, so any lesser charge for an empty line (none at all, its line break alone) stores more
    // rows than the test allows; more lines would only cost the run time (webR prints each).
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: 'cat(strrep("\\n", 3e4))\n' }]),
    );
    const token = parseXml(submitted.text).jobToken;
    await waitForResult(token.resultUri, {}, 120000);
    const [stored] = await service.app
      .get(DataSource)
      .query<{ rows: number; bytes: number; cut: number }[]>(
        `SELECT count(*)::int AS rows, COALESCE(sum(octet_length(line)), 0)::int AS bytes,
              count(*) FILTER (WHERE stream = 'svc' AND line LIKE '[output cut%')::int AS cut
         FROM job_log_line WHERE job_id = $1`,
        [token.jobId],
      );
    // Every row costs at least LOG_LINE_OVERHEAD_BYTES, the one cut note aside.
    expect(stored.cut).toBe(1);
    expect(stored.rows).toBeLessThanOrEqual(Math.floor(CAP / LOG_LINE_OVERHEAD_BYTES) + 1);
    expect(stored.rows).toBeGreaterThan(100);
    expect((stored.rows - 1) * LOG_LINE_OVERHEAD_BYTES).toBeLessThanOrEqual(CAP);
  });
});

/**
 * A client that never reads: raw sockets with a receive buffer of 1 KiB (set before connecting,
 * so the window it offers stays tiny), each sending `GET path`; then nothing is read until the
 * test writes a line to its stdin, when each socket is read to its end and the bytes it got are
 * printed, one line per socket.
 */
const STALLED_READER = `
import socket, sys
port, path, count, accept = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
sockets = []
for _ in range(count):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nAccept: %s\\r\\n\\r\\n" % (path, accept)).encode())
    sockets.append(s)
print(" ".join(str(s.getsockname()[1]) for s in sockets), flush=True)
sys.stdin.readline()
for s in sockets:
    got = 0
    s.settimeout(10)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                break
            got += len(data)
    except OSError:
        pass
    print(got, flush=True)
`;

interface StalledReaders {
  /** The service's ends of the reader's connections. */
  connections: Socket[];
  /** Reads every socket to its end now; the bytes each got. */
  drain(): Promise<number[]>;
  stop(): void;
}

async function stalledReaders(
  service: TestService,
  path: string,
  count: number,
  accept: string,
): Promise<StalledReaders> {
  const server = (service.app as INestApplication).getHttpServer() as Server;
  const accepted = new Map<number, Socket>();
  const note = (socket: Socket): void => {
    accepted.set(socket.remotePort ?? 0, socket);
  };
  server.on('connection', note);
  const child = spawn(
    'python3',
    ['-c', STALLED_READER, new URL(service.url).port, path, String(count), accept],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout });
  const iterator = lines[Symbol.asyncIterator]();
  const ports = String((await iterator.next()).value)
    .split(' ')
    .map(Number);
  expect(ports).toHaveLength(count);
  const connections = await waitFor(
    () =>
      Promise.resolve(
        ports.every((port) => accepted.has(port)) && ports.map((port) => accepted.get(port)!),
      ),
    10000,
    "the reader's connections",
  );
  server.off('connection', note);
  return {
    connections,
    drain: async () => {
      child.stdin.write('read\n');
      const got: number[] = [];
      for (let i = 0; i < count; i++) {
        got.push(Number((await iterator.next()).value));
      }
      return got;
    },
    stop: () => {
      child.kill('SIGKILL');
    },
  };
}

/** The heap and buffers the process holds after a full collection. */
const collectGarbage = (() => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();
function heldBytes(): number {
  collectGarbage();
  const memory = process.memoryUsage();
  return memory.heapUsed + memory.external;
}

describe('readers that stop reading (STREAM_SLOW_READER_SECONDS=2)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      STREAM_SLOW_READER_SECONDS: '2',
      JOB_LOG_MAX_BYTES: String(8 * 1024 * 1024),
      EVENT_STREAMS_PER_CALLER: '64',
    });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('holds a bounded buffer for each of 16 readers of a live log that do not read, and cuts them', async () => {
    // 3,000 lines of 1,000 characters: about 3.2 MB of events for each reader.
    const submitted = await postZip(
      service.url,
      await makeZip([
        { name: 'job.R', content: 'for (i in 1:3000) cat(strrep("x", 1000), "\\n", sep = "")\n' },
      ]),
    );
    const token = parseXml(submitted.text).jobToken;
    await waitForResult(token.resultUri, {}, 120000);
    const logs = service.app.get(JobLogService);
    const before = heldBytes();
    const readers = await stalledReaders(
      service,
      `${REST}/jobs/demo/${token.jobId}/log`,
      16,
      'text/event-stream',
    );
    try {
      let most = 0;
      await waitFor(
        () => {
          most = Math.max(most, heldBytes() - before);
          return Promise.resolve(readers.connections.every((socket) => socket.destroyed));
        },
        // A reader is cut 2 s after the service has written what it does not take; on the embedded
        // database under a full suite's load, filling 16 readers' buffers takes longer than that.
        90000,
        'the readers that do not read to be cut',
      ).catch((error: Error) => {
        throw new Error(`${error.message}; the node held ${most} bytes more meanwhile`);
      });
      await waitFor(() => Promise.resolve(logs.openStreams === 0), 5000, 'the streams to let go');
      // Each reader held at most a page of the log (256 KiB) and its socket's buffers.
      expect(most).toBeLessThan(16 * 1024 * 1024);
      const got = await readers.drain();
      expect(got.every((bytes) => bytes > 0 && bytes < 3_000_000)).toBe(true);
    } finally {
      readers.stop();
    }
  }, 240000);

  it('cuts a download its client stalls, after the limit', async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([
        {
          name: 'job.R',
          content: 'writeBin(as.raw(sample(0:255, 8e6, TRUE)), "big.bin")\n',
        },
      ]),
    );
    const token = parseXml(submitted.text).jobToken;
    const result = parseXml((await waitForResult(token.resultUri, {}, 120000)).text).result;
    const file = new URL(result.dataUri).pathname;
    const whole = await fetch(result.dataUri);
    const size = (await whole.arrayBuffer()).byteLength;
    expect(size).toBeGreaterThan(1_000_000);
    const readers = await stalledReaders(service, file, 1, '*/*');
    try {
      await waitFor(
        () => Promise.resolve(readers.connections[0].destroyed),
        20000,
        'the stalled download to be cut',
      );
      const [got] = await readers.drain();
      expect(got).toBeLessThan(size);
    } finally {
      readers.stop();
    }
  });
});

/** The next event that is not a comment, or null when the stream ends first. */
async function nextEvent(reader: SseReader): Promise<SseEvent | null> {
  for (;;) {
    const event = await reader.next();
    if (event === null || event.event !== 'message' || event.data !== '') {
      return event;
    }
  }
}

/** Opens `url` as an event stream with `headers`. */
async function open(url: string, headers: Record<string, string>): Promise<SseReader> {
  const answer = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers } });
  expect(answer.status).toBe(200);
  return new SseReader(answer.body!.getReader());
}

const SLEEPER = 'cat("started\\n")\nSys.sleep(120)\n';

describe('streams whose caller loses the right that opened them', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      ...(await basicUsersEnvironment({
        demo: { adminPrincipals: ['alice'], scriptSubmissionAllowed: true },
      })),
      AUTH_MAX_FAILURES: '1000',
    });
  });
  afterAll(async () => {
    await service.stop();
  });

  it("ends an admin's event stream and live log once the admin loses the application", async () => {
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: SLEEPER }]),
      ALICE,
    );
    expect(submitted.status).toBe(202);
    const token = parseXml(submitted.text).jobToken;
    const events = await open(`${service.url}${REST}/admin/events`, ALICE);
    const log = await open(`${service.url}${REST}/jobs/demo/${token.jobId}/log`, ALICE);
    expect((await nextEvent(log))?.event).toBe('line');
    const current = (await (
      await fetch(`${service.url}${REST}/admin/applications/demo`, { headers: ROOT })
    ).json()) as Record<string, unknown>;
    const changed = await fetch(`${service.url}${REST}/admin/applications/demo`, {
      method: 'PUT',
      headers: { ...ROOT, 'Content-Type': 'application/json', 'If-Match': '"0"' },
      body: JSON.stringify({
        ...current,
        security: { adminPrincipals: ['bob'], scriptSubmissionAllowed: true },
      }),
    });
    expect(changed.status).toBe(200);
    for (const stream of [events, log]) {
      const last = await nextEvent(stream);
      expect(last?.event).toBe('revoked');
      expect(JSON.parse(last!.data)).toEqual({
        message: expect.stringMatching(/^This stream has ended: /),
      });
      expect(await stream.next()).toBeNull();
    }
    expect(
      (
        await fetch(`${service.url}${REST}/jobs/demo/${token.jobId}`, {
          method: 'DELETE',
          headers: ROOT,
        })
      ).status,
    ).toBe(202);
  });
});

describe('streams opened with an API key that is revoked', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      AUTH_MODE: 'apiKey',
      ADMIN_USER: 'root',
      ADMIN_PASSWORD: 'root-secret-1',
      APPLICATION_SECURITY: JSON.stringify({
        demo: { adminPrincipals: ['report-bot'], scriptSubmissionAllowed: true },
      }),
      AUTH_MAX_FAILURES: '1000',
    });
  });
  afterAll(async () => {
    await service.stop();
  });

  it('ends them once the key is revoked', async () => {
    const created = (await (
      await fetch(`${service.url}${REST}/admin/api-keys`, {
        method: 'POST',
        headers: { ...ROOT, 'Content-Type': 'application/json' },
        body: JSON.stringify({ principal: 'report-bot' }),
      })
    ).json()) as { key: string; id: string };
    const withKey = { 'X-SVC-API-Key': created.key };
    const submitted = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: SLEEPER }]),
      withKey,
    );
    expect(submitted.status).toBe(202);
    const token = parseXml(submitted.text).jobToken;
    const events = await open(`${service.url}${REST}/admin/events`, withKey);
    const log = await open(`${service.url}${REST}/jobs/demo/${token.jobId}/log`, withKey);
    expect((await nextEvent(log))?.event).toBe('line');
    const revoked = await fetch(`${service.url}${REST}/admin/api-keys/${created.id}`, {
      method: 'DELETE',
      headers: ROOT,
    });
    expect(revoked.status).toBe(204);
    for (const stream of [events, log]) {
      const last = await nextEvent(stream);
      expect(last?.event).toBe('revoked');
      expect(await stream.next()).toBeNull();
    }
    expect(
      (
        await fetch(`${service.url}${REST}/jobs/demo/${token.jobId}`, {
          method: 'DELETE',
          headers: ROOT,
        })
      ).status,
    ).toBe(202);
  });
});
