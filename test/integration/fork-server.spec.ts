import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ForkServer } from '../../src/r-engine/native/fork-server';
import { NativeREngine } from '../../src/r-engine/native/native-r.engine';
import { findRscript, type NativeRConfig } from '../../src/r-engine/launch/r-location';
import { REngineUnavailableError, type ScriptRunRequest } from '../../src/r-engine/r-engine';

const config: NativeRConfig = {
  // The engine's own mechanics (pids, process groups, files read while R runs) are checked
  // without a sandbox; test/integration/r-sandbox.native.spec.ts checks them inside bubblewrap.
  rSandbox: 'none',
  rHome: null,
  rscriptPath: null,
  rMemoryLimitMb: 600,
  rScriptMode: 'fork',
  jobTimeoutSeconds: 60,
};
const webR = process.env.R_ENGINE === 'webr';
const forkable = !webR && findRscript(config) !== null && process.platform === 'linux';
const describeFork = forkable ? describe : describe.skip;
const skipReason = webR
  ? ' (skipped: R_ENGINE=webr; the fork server is native R only)'
  : ' (skipped: needs Rscript on PATH and Linux)';
const quiet = { log: () => undefined, warn: () => undefined };

/** Whether pid is still a live process (a zombie waiting for its reaper counts as gone). */
async function isAlive(pid: number): Promise<boolean> {
  for (let waited = 0; waited < 2_000; waited += 50) {
    const state = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => ') Z');
    if (/\) [ZX]/.test(state)) {
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

async function waitFor(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > 30_000) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describeFork(`R_SCRIPT_MODE=fork${forkable ? '' : skipReason}`, () => {
  const engine = new NativeREngine(config, quiet);
  const databaseUrl = process.env.DATABASE_URL;
  let root: string;
  let count = 0;

  /** A job directory laid out like the executor's: <root>/<job>/work holding script.R. */
  async function job(script: string): Promise<string> {
    const workDir = join(root, `job-${++count}`, 'work');
    await mkdir(workDir, { recursive: true });
    await writeFile(join(workDir, 'script.R'), script);
    return workDir;
  }

  function run(workDir: string, extra: Partial<ScriptRunRequest> = {}) {
    return engine.runScript({
      jobId: `job-${count}`,
      workDir,
      scriptName: 'script.R',
      timeoutMs: 30_000,
      ...extra,
    });
  }

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-fork-spec-'));
    process.env.SVC_SECRET_PROBE = 'secret';
    process.env.DATABASE_URL = databaseUrl ?? 'postgres://probe@127.0.0.1/none';
    await engine.start();
    delete process.env.SVC_SECRET_PROBE;
    if (databaseUrl === undefined) {
      delete process.env.DATABASE_URL;
    }
  });

  afterAll(async () => {
    const server = engine.forkServerPid;
    await engine.stop();
    expect(await isAlive(server)).toBe(false);
    await rm(root, { recursive: true, force: true });
  });

  it('runs jobs in children of one warm R process, which never runs job code', async () => {
    expect(engine.mode).toBe('fork');
    const server = engine.forkServerPid;
    expect(server).toBeGreaterThan(0);
    const first = await job('writeLines(as.character(Sys.getpid()), "pid.txt")');
    const second = await job('writeLines(as.character(Sys.getpid()), "pid.txt")');
    await expect(run(first)).resolves.toMatchObject({ status: 'succeeded' });
    await expect(run(second)).resolves.toMatchObject({ status: 'succeeded' });
    const pids = await Promise.all(
      [first, second].map(async (dir) => Number(await readFile(join(dir, 'pid.txt'), 'utf8'))),
    );
    expect(new Set([server, ...pids]).size).toBe(3);
    expect(engine.forkServerPid).toBe(server);
  });

  it('starts the server with a minimal environment: no database URL, no secrets', async () => {
    const names = (await readFile(`/proc/${engine.forkServerPid}/environ`, 'utf8'))
      .split('\0')
      .filter(Boolean)
      .map((entry) => entry.slice(0, entry.indexOf('=')));
    expect(names).not.toContain('DATABASE_URL');
    expect(names).not.toContain('SVC_SECRET_PROBE');
    // R's start-up shell script adds its own (R_HOME, SED, PWD, SHLVL, ...); none comes from svc's.
    const inherited = names.filter((name) => name in process.env);
    for (const name of inherited) {
      expect(name).toMatch(/^(PATH|HOME|LANG|LC_ALL|TMPDIR|R_\w+|PWD|SHLVL|_)$/);
    }
  });

  it('a job that leaves R abruptly with quit(status = 3) fails with reason exit', async () => {
    const server = engine.forkServerPid;
    const workDir = await job('cat("leaving\\n")\nquit(status = 3)\ncat("never\\n")');
    const lines: string[] = [];
    await expect(
      run(workDir, { onOutput: (_stream, line) => lines.push(line) }),
    ).resolves.toMatchObject({
      status: 'failed',
      reason: 'exit',
      message: 'R exited with status 3',
    });
    expect(lines).toEqual(['leaving']);
    expect(engine.forkServerPid).toBe(server);
  });

  it('a job that runs for ever times out; its processes die, the server runs the next job', async () => {
    const server = engine.forkServerPid;
    const workDir = await job(
      [
        'writeLines(as.character(Sys.getpid()), "r.pid")',
        'system("sleep 300 & echo $! > child.pid", wait = TRUE)',
        'repeat {}',
      ].join('\n'),
    );
    await expect(run(workDir, { timeoutMs: 2_000 })).resolves.toMatchObject({
      status: 'failed',
      reason: 'timeout',
      message: 'the job exceeded its time limit of 2 s',
    });
    expect(await isAlive(Number(await readFile(join(workDir, 'r.pid'), 'utf8')))).toBe(false);
    expect(await isAlive(Number(await readFile(join(workDir, 'child.pid'), 'utf8')))).toBe(false);
    expect(engine.forkServerPid).toBe(server);
    await expect(run(await job('writeLines("ok", "next.txt")'))).resolves.toMatchObject({
      status: 'succeeded',
    });
  });

  it('a job that allocates without end under the memory limit fails; the server is fine', async () => {
    const server = engine.forkServerPid;
    const workDir = await job('x <- list()\nrepeat x[[length(x) + 1L]] <- numeric(1e7)');
    const outcome = await run(workDir);
    expect(outcome).toMatchObject({ status: 'failed', reason: 'limit' });
    expect(outcome.status === 'failed' && outcome.message).toMatch(/memory limit.*cannot allocate/);
    expect(engine.forkServerPid).toBe(server);
    expect(await engine.healthy()).toBe(true);
  });

  it('runs jobs in parallel; files of the same name stay in their own directories', async () => {
    const dirs = await Promise.all(
      [1, 2, 3].map((n) =>
        job(`Sys.sleep(0.5)\nwriteLines("${n}", "same.txt")\nwriteLines(list.files(), "seen.txt")`),
      ),
    );
    const outcomes = await Promise.all(dirs.map((dir) => run(dir)));
    expect(outcomes).toMatchObject(dirs.map(() => ({ status: 'succeeded' })));
    for (const [i, dir] of dirs.entries()) {
      expect(await readFile(join(dir, 'same.txt'), 'utf8')).toBe(`${i + 1}\n`);
      expect((await readFile(join(dir, 'seen.txt'), 'utf8')).split('\n').sort()).toEqual(
        ['', 'same.txt', 'script.R'].sort(),
      );
    }
  });

  it('a job sees only its own directory, not the files of a job running beside it', async () => {
    const other = await job('writeLines("secret", "secret.txt")\nSys.sleep(2)');
    const running = run(other);
    const probe = await job(
      [
        'Sys.sleep(0.5)',
        'writeLines(list.files("..", recursive = TRUE, all.files = TRUE), "parent.txt")',
        'writeLines(list.files(tempdir(), recursive = TRUE), "tmp.txt")',
      ].join('\n'),
    );
    await expect(run(probe)).resolves.toMatchObject({ status: 'succeeded' });
    await expect(running).resolves.toMatchObject({ status: 'succeeded' });
    const parent = (await readFile(join(probe, 'parent.txt'), 'utf8')).split('\n');
    expect(parent.filter((name) => name.includes('secret'))).toEqual([]);
    expect((await readFile(join(probe, 'tmp.txt'), 'utf8')).trim()).toBe('');
  });

  it('variables, options and environment variables of one job are not seen by the next', async () => {
    await expect(
      run(
        await job(
          'leaked <- 42\noptions(svc.leak = TRUE)\nSys.setenv(SVC_LEAK = "yes")\nlibrary(tools)',
        ),
      ),
    ).resolves.toMatchObject({ status: 'succeeded' });
    const next = await job(
      [
        'writeLines(c(',
        '  paste(ls(globalenv(), all.names = TRUE), collapse = ","),',
        '  as.character(exists("leaked")),',
        '  as.character(is.null(getOption("svc.leak"))),',
        '  Sys.getenv("SVC_LEAK"),',
        '  as.character("package:tools" %in% search())',
        '), "state.txt")',
      ].join('\n'),
    );
    await expect(run(next)).resolves.toMatchObject({ status: 'succeeded' });
    expect((await readFile(join(next, 'state.txt'), 'utf8')).split('\n')).toEqual([
      '',
      'FALSE',
      'TRUE',
      '',
      'FALSE',
      '',
    ]);
  });

  it("gives a job its run's trace (TRACEPARENT, SVC_TRACE_ID) forked or spawned, and the next job none", async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const report = 'writeLines(Sys.getenv(c("TRACEPARENT", "SVC_TRACE_ID")), "trace.txt")';
    const traced = await job(report);
    await expect(run(traced, { trace: { traceparent, tracestate: null } })).resolves.toMatchObject({
      status: 'succeeded',
    });
    expect(await readFile(join(traced, 'trace.txt'), 'utf8')).toBe(
      `${traceparent}\n4bf92f3577b34da6a3ce929d0e0e4736\n`,
    );
    const untraced = await job(report);
    await expect(run(untraced)).resolves.toMatchObject({ status: 'succeeded' });
    expect(await readFile(join(untraced, 'trace.txt'), 'utf8')).toBe('\n\n');
    // A networked job runs in a fresh (spawned) R: its environment carries the trace.
    const spawned = await job(report);
    await expect(
      run(spawned, { network: true, trace: { traceparent, tracestate: null } }),
    ).resolves.toMatchObject({ status: 'succeeded' });
    expect(await readFile(join(spawned, 'trace.txt'), 'utf8')).toBe(
      `${traceparent}\n4bf92f3577b34da6a3ce929d0e0e4736\n`,
    );
  });

  it('writes out a PDF and a file connection the script left open', async () => {
    const workDir = await job(
      'pdf("open.pdf")\nplot(1:10)\ncon <- file("open.txt", "w")\nwriteLines("kept", con)',
    );
    await expect(run(workDir)).resolves.toMatchObject({ status: 'succeeded' });
    expect(await readFile(join(workDir, 'open.txt'), 'utf8')).toBe('kept\n');
    const pdf = await readFile(join(workDir, 'open.pdf'));
    expect(pdf.subarray(-6).toString()).toMatch(/%%EOF/);
  });

  it('a server killed between jobs is started again and runs the next job', async () => {
    const server = engine.forkServerPid;
    process.kill(server, 'SIGKILL');
    expect(await isAlive(server)).toBe(false);
    await waitFor(
      () => engine.forkServerPid !== 0 && engine.forkServerPid !== server,
      'a new fork server',
    );
    const workDir = await job('writeLines("after", "after.txt")');
    await expect(run(workDir)).resolves.toMatchObject({ status: 'succeeded' });
    expect(await readFile(join(workDir, 'after.txt'), 'utf8')).toBe('after\n');
  });

  it('an aborted job is killed and counts as not delivered; the server stays', async () => {
    const server = engine.forkServerPid;
    const workDir = await job('writeLines(as.character(Sys.getpid()), "r.pid")\nrepeat {}');
    const abort = new AbortController();
    const running = run(workDir, { signal: abort.signal });
    for (let i = 0; i < 200 && !(await readdir(workDir)).includes('r.pid'); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    abort.abort();
    await expect(running).rejects.toBeInstanceOf(REngineUnavailableError);
    expect(await isAlive(Number(await readFile(join(workDir, 'r.pid'), 'utf8')))).toBe(false);
    expect(engine.forkServerPid).toBe(server);
  });
});

describe('a fork server that cannot start', () => {
  /** A server that starts and exits at once, without READY: what a broken R installation does. */
  const brokenServer = (control: string): ForkServer =>
    new ForkServer({
      launch: () => spawn('sh', ['-c', 'exit 1'], { stdio: ['ignore', 'pipe', 'pipe'] }),
      controlDir: control,
      sandboxUid: null,
      sandboxed: false,
      cpuLimitSeconds: 0,
      log: quiet,
    });

  it('makes its slot unusable after failing to start three times in a row', async () => {
    const control = await mkdtemp(join(tmpdir(), 'svc-fork-control-'));
    const server = brokenServer(control);
    try {
      for (let attempt = 1; attempt <= 3; attempt += 1) {
        expect(server.usable).toBe(true);
        await expect(server.start()).rejects.toThrow(/exited during start-up/);
      }
      expect(server.usable).toBe(false);
    } finally {
      await server.stop();
      await rm(control, { recursive: true, force: true });
    }
  });

  it("leaves no file operation of the service waiting: more failed starts than libuv's pool has threads", async () => {
    const control = await mkdtemp(join(tmpdir(), 'svc-fork-control-'));
    // A control directory per server, as each slot has.
    // Each failed start used to leave its write open of the command FIFO waiting for a reader
    // that never came, holding one of the pool's four threads: after four, no file operation
    // of the process ever ended.
    const controls = await Promise.all(
      Array.from({ length: 6 }, (_, index) =>
        mkdir(join(control, String(index))).then(() => join(control, String(index))),
      ),
    );
    const servers = controls.map((directory) => brokenServer(directory));
    try {
      for (const server of servers) {
        await expect(server.start()).rejects.toThrow(/exited during start-up/);
      }
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error('a file read did not end in 10 s')), 10_000);
      });
      await expect(Promise.race([readFile(__filename, 'utf8'), stuck])).resolves.toContain(
        'leaves no file operation',
      );
      clearTimeout(timer);
      // Each FIFO is removed once its open has ended.
      const left = async (): Promise<string[]> =>
        (await Promise.all(controls.map((directory) => readdir(directory))))
          .flat()
          .filter((name) => name.startsWith('commands-'));
      for (let tries = 0; tries < 50 && (await left()).length > 0; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await left()).toEqual([]);
    } finally {
      for (const server of servers) {
        await server.stop();
      }
      await rm(control, { recursive: true, force: true });
    }
  });
});
