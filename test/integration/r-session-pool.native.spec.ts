import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { findRscript } from '../../src/r-engine/native-r.engine';
import { RSessionPool } from '../../src/r-engine/r-session-pool';
import { findBwrap, RLauncher } from '../../src/r-engine/r-launcher';
import type { FunctionLibrary } from '../../src/r-engine/function-library';
import { LEAVING_FUNCTIONS } from '../support/function-calls';

const rscript = findRscript({ rHome: null, rscriptPath: null, rMemoryLimitMb: 0 });
// Sessions run in bubblewrap as on a node (CI installs it); the probe below needs the sandbox.
const describeNative = rscript && findBwrap() ? describe : describe.skip;
const launcher = new RLauncher({ rscript: rscript ?? 'Rscript', rHome: null, sandbox: 'bwrap' });

const library: FunctionLibrary = {
  id: 1,
  packages: 0,
  files: [
    { name: 'f.R', content: 'svcJsonService <- function(payload) paste0("echo:", payload)\n' },
  ],
};

const leaving: FunctionLibrary = {
  id: 3,
  packages: 0,
  files: [{ name: 'leave.R', content: LEAVING_FUNCTIONS }],
};

/**
 * Answers, comma-separated, what of the service it reaches ("" when nothing): a TCP listener of
 * the service on 127.0.0.1, the service's environment (its own and in /proc) and a file of the
 * checkout. Payload: "<port> <service pid> <checkout file>".
 */
const probing: FunctionLibrary = {
  id: 4,
  packages: 0,
  files: [
    {
      name: 'probe.R',
      content: `
svcJsonService <- function(payload) {
  args <- strsplit(payload, " ")[[1L]]
  con <- tryCatch(socketConnection("127.0.0.1", as.integer(args[[1L]]), open = "r+b",
                                   blocking = TRUE, timeout = 2),
                  error = function(e) NULL, warning = function(w) NULL)
  if (!is.null(con)) close(con)
  environ <- tryCatch(readBin(file.path("/proc", args[[2L]], "environ"), "raw", 1e6),
                      error = function(e) raw(0L), warning = function(w) raw(0L))
  seen <- c(network = !is.null(con), environ = length(environ) > 0L,
            secret = nzchar(Sys.getenv("SVC_TEST_SECRET")), checkout = file.exists(args[[3L]]))
  paste(names(seen)[seen], collapse = ",")
}
`,
    },
  ],
};

/** The pid and every process below it (from /proc/<pid>/task/<pid>/children). */
async function processTree(pid: number): Promise<number[]> {
  const tree = [pid];
  for (let i = 0; i < tree.length; i += 1) {
    const children = await readFile(`/proc/${tree[i]}/task/${tree[i]}/children`, 'utf8').catch(
      () => '',
    );
    tree.push(...children.trim().split(/\s+/).filter(Boolean).map(Number));
  }
  return tree;
}

const quitting: FunctionLibrary = {
  id: 2,
  packages: 0,
  files: [{ name: 'q.R', content: 'svcJsonService <- function(payload) quit(status = 3)\n' }],
};

describeNative('RSessionPool (native R)', () => {
  let pool: RSessionPool;

  beforeAll(async () => {
    pool = new RSessionPool(
      {
        rscript: rscript ?? 'Rscript',
        rHome: null,
        rMemoryLimitMb: 0,
        functionSessions: 1,
        functionSessionMaxCalls: 3,
        applicationSettings: { net: { networkAllowed: true } },
        resultRetentionHours: 0,
        launcher: () => launcher,
      },
      {
        get: (app) =>
          Promise.resolve(
            app === 'quits'
              ? quitting
              : app === 'a' || app === 'b'
                ? leaving
                : app === 'net' || app === 'probe'
                  ? probing
                  : library,
          ),
      },
    );
    await pool.start();
  });
  afterAll(async () => {
    await pool.stop();
    expect(pool.stats().size).toBe(0);
  });

  const call = (payload: string) =>
    pool.callFunction({
      applicationName: 'app',
      functionName: 'svcJsonService',
      payload,
      timeoutMs: 10_000,
    });

  it('replaces a session after FUNCTION_SESSION_MAX_CALLS calls', async () => {
    const [first] = pool.pids();
    for (let i = 0; i < 3; i++) {
      await expect(call(`${i}`)).resolves.toEqual({ status: 'succeeded', value: `echo:${i}` });
    }
    await expect(call('next')).resolves.toEqual({ status: 'succeeded', value: 'echo:next' });
    expect(pool.pids()).not.toContain(first);
  });

  it('runs a call again elsewhere when its session died without reading it', async () => {
    const [pid] = pool.pids();
    // Stopped, R cannot read the request; killed, it never acknowledged it: nothing ran. R runs
    // in a session of its own inside its sandbox: every process below the launched one stops.
    for (const process_ of await processTree(pid)) {
      process.kill(process_, 'SIGSTOP');
    }
    const answer = call('retried');
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(-pid, 'SIGKILL');
    await expect(answer).resolves.toEqual({ status: 'succeeded', value: 'echo:retried' });
    expect(pool.pids()).not.toContain(pid);
  });

  it('fails a call as session-died when R dies while running it, and goes on', async () => {
    const answer = await pool.callFunction({
      applicationName: 'quits',
      functionName: 'svcJsonService',
      payload: '',
      timeoutMs: 10_000,
    });
    expect(answer).toMatchObject({ status: 'failed', reason: 'session-died' });
    expect((answer as { message: string }).message).toMatch(/R exited with status 3/);
    await expect(call('after')).resolves.toEqual({ status: 'succeeded', value: 'echo:after' });
  });

  it('shows nothing one application left in R to a call of another application', async () => {
    const as = (applicationName: string, payload: string) =>
      pool.callFunction({
        applicationName,
        functionName: 'svcJsonService',
        payload,
        timeoutMs: 10_000,
      });
    const left = await as('a', 'leave');
    expect(left.status).toBe('succeeded');
    const paths = (left as { value: string }).value;
    // The probe sees all of it from the same application (the session stays warm for it)...
    await expect(as('a', `look ${paths}`)).resolves.toEqual({
      status: 'succeeded',
      value: 'global,fun,option,env,namespace,cwdFile,files',
    });
    // ...and none of it from another one, though the pool has a single session.
    await expect(as('b', `look ${paths}`)).resolves.toEqual({ status: 'succeeded', value: '' });
    // Nor does application A's state come back after B used the pool.
    await expect(as('a', `look ${paths}`)).resolves.toEqual({ status: 'succeeded', value: '' });
  });

  it('a session reaches neither the network nor the service; the network only when allowed', async () => {
    process.env.SVC_TEST_SECRET = 'not for R';
    const server = createServer((socket) => socket.destroy());
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const probe = (applicationName: string) =>
        pool.callFunction({
          applicationName,
          functionName: 'svcJsonService',
          payload: `${port} ${process.pid} ${__filename}`,
          timeoutMs: 10_000,
        });
      await expect(probe('probe')).resolves.toEqual({ status: 'succeeded', value: '' });
      // An application allowed the network reaches the listener, and still nothing else.
      await expect(probe('net')).resolves.toEqual({ status: 'succeeded', value: 'network' });
    } finally {
      delete process.env.SVC_TEST_SECRET;
      server.close();
    }
  });
});
