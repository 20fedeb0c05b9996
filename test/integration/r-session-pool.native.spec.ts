import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { findRscript } from '../../src/r-engine/launch/r-location';
import { RSessionPool } from '../../src/r-engine/sessions/r-session-pool';
import { RLauncher } from '../../src/r-engine/launch/r-launcher';
import { findBwrap } from '../../src/r-engine/launch/r-sandbox';
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

/** The largest answer the test pool accepts (MAX_REQUEST_BYTES). */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/**
 * A function that attacks the session's protocol and the service's memory, by payload. The
 * answer FIFO's name is the session's first argument: the function opens it itself and writes
 * what it likes there, past session.R and its checks.
 */
const hostile: FunctionLibrary = {
  id: 5,
  packages: 0,
  files: [
    {
      name: 'hostile.R',
      content: `
u32 <- function(n) as.raw(c(n %/% 16777216, (n %/% 65536) %% 256, (n %/% 256) %% 256, n %% 256))
to_answers <- function(bytes) {
  con <- file(commandArgs(trailingOnly = TRUE)[[1L]], "wb")
  writeBin(bytes, con)
  close(con)
}
svcJsonService <- function(payload) {
  switch(payload,
    header = {
      to_answers(as.raw(c(0xff, 0xff, 0xff, 0xf0)))  # announces 4 GiB, sends nothing more
      Sys.sleep(60)
      "unreached"
    },
    forged = {
      value <- charToRaw(strrep("x", ${MAX_ANSWER_BYTES} + 100000))
      body <- c(u32(2), charToRaw("ok"), u32(length(value)), value)
      to_answers(c(u32(length(body)), body))
      Sys.sleep(60)
      "unreached"
    },
    garbage = {
      to_answers(as.raw(c(0, 0, 0, 6, 0, 0, 0, 9, 0x61, 0x62)))  # a field overruns its frame
      Sys.sleep(60)
      "unreached"
    },
    half = {
      to_answers(c(u32(1000), as.raw(1:10)))
      quit(save = "no", status = 0L)
    },
    flood = {
      cat(strrep("x", 1e8))  # 100 MB without a newline
      line <- strrep("y", 1e5)
      for (i in 1:1000) message(line)  # 100 MB in lines
      "flooded"
    },
    big = strrep("x", 1e8),
    fits = strrep("z", ${MAX_ANSWER_BYTES} - 1000))
}
`,
    },
  ],
};

/** Runs work while sampling the service's resident memory; the peak growth in MiB. */
async function peakGrowthMib<T>(work: () => Promise<T>): Promise<{ result: T; growthMib: number }> {
  global.gc?.();
  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 5);
  try {
    const result = await work();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { result, growthMib: (peak - before) / 1024 / 1024 };
  } finally {
    clearInterval(sampler);
  }
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
        maxRequestBytes: MAX_ANSWER_BYTES,
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
                  : app === 'hostile'
                    ? hostile
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

  describe('a function that attacks the session', () => {
    const attack = (payload: string, timeoutMs = 60_000) =>
      pool.callFunction({
        applicationName: 'hostile',
        functionName: 'svcJsonService',
        payload,
        timeoutMs,
      });
    const nextOfAnotherApplication = () =>
      expect(call('next')).resolves.toEqual({ status: 'succeeded', value: 'echo:next' });

    it('a frame header announcing 4 GiB on the answer pipe ends the session, naming the limit', async () => {
      const [pid] = pool.pids();
      const { result, growthMib } = await peakGrowthMib(() => attack('header'));
      expect(result).toEqual({
        status: 'failed',
        reason: 'session-died',
        message: `the R session was ended while it ran svcJsonService: its answer (a frame of 4294967280 bytes) is larger than MAX_REQUEST_BYTES (${MAX_ANSWER_BYTES} bytes)`,
      });
      expect(growthMib).toBeLessThan(64);
      expect(pool.pids()).not.toContain(pid);
      await nextOfAnotherApplication();
    });

    it('a well-formed answer larger than the limit, written past session.R, is refused before it is held', async () => {
      const { result, growthMib } = await peakGrowthMib(() => attack('forged'));
      expect(result).toMatchObject({ status: 'failed', reason: 'session-died' });
      expect((result as { message: string }).message).toContain(
        `a frame of ${MAX_ANSWER_BYTES + 100000 + 10} bytes) is larger than MAX_REQUEST_BYTES`,
      );
      expect(growthMib).toBeLessThan(64);
      await nextOfAnotherApplication();
    });

    it('a malformed frame ends the session with the reason', async () => {
      await expect(attack('garbage')).resolves.toEqual({
        status: 'failed',
        reason: 'session-died',
        message:
          'the R session was ended while it ran svcJsonService: it sent a malformed frame (field of 9 bytes overruns its frame)',
      });
      await nextOfAnotherApplication();
    });

    it('half a frame and then an exit fails the call as session-died', async () => {
      await expect(attack('half')).resolves.toEqual({
        status: 'failed',
        reason: 'session-died',
        message: 'the R session ended while it ran svcJsonService (R exited with status 0)',
      });
      await nextOfAnotherApplication();
    });

    it('100 MB without a newline and 100 MB of lines on the console keep the memory bounded', async () => {
      const { result, growthMib } = await peakGrowthMib(() => attack('flood'));
      expect(result).toEqual({ status: 'succeeded', value: 'flooded' });
      expect(growthMib).toBeLessThan(64);
      await nextOfAnotherApplication();
    });

    it('a 100 MB answer fails as too-large; one just below the limit arrives whole', async () => {
      const { result, growthMib } = await peakGrowthMib(() => attack('big'));
      expect(result).toEqual({
        status: 'failed',
        reason: 'too-large',
        message: `svcJsonService returned 100000000 bytes, more than MAX_REQUEST_BYTES (${MAX_ANSWER_BYTES} bytes)`,
      });
      expect(growthMib).toBeLessThan(64);
      const fits = await attack('fits');
      expect(fits.status).toBe('succeeded');
      expect((fits as { value: string }).value).toHaveLength(MAX_ANSWER_BYTES - 1000);
      await nextOfAnotherApplication();
    });
  });
});
