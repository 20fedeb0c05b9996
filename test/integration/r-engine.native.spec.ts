import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeREngine } from '../../src/r-engine/native/native-r.engine';
import { findRscript, type NativeRConfig } from '../../src/r-engine/launch/r-location';
import { R_LOG_FILE, REngineUnavailableError } from '../../src/r-engine/r-engine';
import { waitFor } from '../support/test-service';

const config: NativeRConfig = {
  // The engine's own mechanics (pids, process groups, files read while R runs) are checked
  // without a sandbox; test/integration/r-sandbox.native.spec.ts checks them inside bubblewrap.
  rSandbox: 'none',
  rHome: null,
  rscriptPath: null,
  rMemoryLimitMb: 0,
  // Both script modes run this file: R_SCRIPT_MODE=spawn selects the fresh-process path.
  rScriptMode: process.env.R_SCRIPT_MODE === 'spawn' ? 'spawn' : 'fork',
};
const rscript = findRscript(config);
const describeNative = rscript ? describe : describe.skip;
const hasPrlimit = existsSync('/usr/bin/prlimit');

describeNative(`NativeREngine${rscript ? '' : ' (skipped: no Rscript found on PATH)'}`, () => {
  const engine = new NativeREngine(config);
  let root: string;
  let jobCount = 0;

  /** A fresh working directory holding `script.R` and any extra files. */
  async function job(script: string, files: Record<string, string> = {}): Promise<string> {
    const dir = await mkdtemp(join(root, `job${++jobCount}-`));
    await writeFile(join(dir, 'script.R'), script);
    for (const [name, content] of Object.entries(files)) {
      await writeFile(join(dir, name), content);
    }
    return dir;
  }

  /** Whether pid still runs a second after the kill; a zombie waiting for its reaper is gone. */
  async function isAlive(pid: number): Promise<boolean> {
    for (let waited = 0; waited < 1_000; waited += 50) {
      const state = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => ') Z');
      if (/\) [ZX]/.test(state)) {
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return true;
  }

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-native-spec-'));
    await engine.start();
  });

  afterAll(async () => {
    await engine.stop();
    await rm(root, { recursive: true, force: true });
  });

  it('reports its version and health', async () => {
    expect(await engine.version()).toMatch(/^R version \d+\.\d+\.\d+/);
    expect(await engine.healthy()).toBe(true);
  });

  it('runs a script that writes a PDF and a text file, logging its console output', async () => {
    const workDir = await job(
      [
        'data <- readLines("input.txt")',
        'cat("read", length(data), "lines\\n")',
        'message("a message")',
        'pdf("plot.pdf"); plot(1:10); dev.off()',
        'writeLines(toupper(data), "upper.txt")',
        'print(summary(1:10))',
      ].join('\n'),
      { 'input.txt': 'a\nb\n' },
    );
    const lines: string[] = [];
    const outcome = await engine.runScript({
      jobId: 'pdf',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 30_000,
      onOutput: (stream, line) => lines.push(`${stream}:${line}`),
    });

    expect(outcome).toMatchObject({ status: 'succeeded' });
    // R's CPU time, for the usage statistics: the plot costs R some.
    expect(outcome.rCpuMs).toBeGreaterThan(0);
    expect((await readFile(join(workDir, 'plot.pdf'))).subarray(0, 5).toString()).toBe('%PDF-');
    expect(await readFile(join(workDir, 'upper.txt'), 'utf8')).toBe('A\nB\n');
    // R's console output reaches the service through a pipe, never as a file in the job's
    // directory (which the job could replace with a link).
    await expect(readFile(join(workDir, R_LOG_FILE), 'utf8')).rejects.toThrow(/ENOENT/);
    expect(lines).toContain('stdout:read 2 lines');
    expect(lines.some((line) => line.includes('Median'))).toBe(true);
    // A forked run's output is one FIFO where both streams are merged.
    expect(lines).toContain(`${engine.mode === 'fork' ? 'stdout' : 'stderr'}:a message`);
  });

  it('reports an R error with R’s own message', async () => {
    const workDir = await job(
      'cat("before\\n")\nf <- function() stop("boom")\nf()\ncat("after\\n")',
    );
    const lines: string[] = [];
    const outcome = await engine.runScript({
      jobId: 'error',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 30_000,
      onOutput: (_stream, line) => lines.push(line),
    });

    expect(outcome).toMatchObject({ status: 'failed', reason: 'r-error', message: 'boom' });
    const log = lines.join('\n');
    expect(log).toContain('before');
    expect(log).toContain('Error in f() : boom');
    expect(log).not.toContain('after');
  });

  it('reports a syntax error as an R error', async () => {
    const workDir = await job('x <- (1 +\n');
    const outcome = await engine.runScript({
      jobId: 'syntax',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 30_000,
    });
    expect(outcome).toMatchObject({ status: 'failed', reason: 'r-error' });
  });

  it('reports a non-zero exit without an R error as reason exit', async () => {
    const workDir = await job('cat("leaving\\n")\nquit(status = 3)');
    const outcome = await engine.runScript({
      jobId: 'exit',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 30_000,
    });
    expect(outcome).toMatchObject({
      status: 'failed',
      reason: 'exit',
      message: 'R exited with status 3',
    });
  });

  it('kills the whole process group on timeout and runs the next job', async () => {
    const workDir = await job(
      [
        'writeLines(as.character(Sys.getpid()), "r.pid")',
        'system("sleep 300 & echo $! > child.pid", wait = TRUE)',
        'repeat {}',
      ].join('\n'),
    );
    // R spins for ever: only the kill at the time limit ends this run.
    const outcome = await engine.runScript({
      jobId: 'timeout',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 2_000,
    });

    expect(outcome).toMatchObject({
      status: 'failed',
      reason: 'timeout',
      message: 'the job exceeded its time limit of 2 s',
    });
    const rPid = Number(await readFile(join(workDir, 'r.pid'), 'utf8'));
    const childPid = Number(await readFile(join(workDir, 'child.pid'), 'utf8'));
    expect(await isAlive(rPid)).toBe(false);
    expect(await isAlive(childPid)).toBe(false);

    const next = await job('writeLines("ok", "next.txt")');
    await expect(
      engine.runScript({ jobId: 'next', workDir: next, scriptName: 'script.R', timeoutMs: 30_000 }),
    ).resolves.toMatchObject({ status: 'succeeded' });
    expect(await readFile(join(next, 'next.txt'), 'utf8')).toBe('ok\n');
  });

  it('gives R a minimal environment without the service’s variables', async () => {
    process.env.SVC_SECRET_PROBE = 'x';
    try {
      const workDir = await job(
        [
          'writeLines(Sys.getenv("SVC_SECRET_PROBE"), "probe.txt")',
          'writeLines(Sys.getenv(c("HOME", "TMPDIR", "LANG")), "env.txt")',
          'writeLines("x", file.path(tempdir(), "left.txt"))',
        ].join('\n'),
      );
      const outcome = await engine.runScript({
        jobId: 'env',
        workDir,
        scriptName: 'script.R',
        timeoutMs: 30_000,
      });

      expect(outcome).toMatchObject({ status: 'succeeded' });
      expect(await readFile(join(workDir, 'probe.txt'), 'utf8')).toBe('\n');
      const [home, tmp, lang] = (await readFile(join(workDir, 'env.txt'), 'utf8')).split('\n');
      expect(home).toBe(workDir);
      expect(tmp.startsWith(workDir)).toBe(false);
      // The private temporary directory is removed (a fork slot does it once the outcome is
      // known, and makes it again, empty, for its next job).
      await waitFor(
        () => Promise.resolve((existsSync(tmp) ? readdirSync(tmp) : []).length === 0),
        10_000,
        'the job’s temporary directory emptied',
      );
      expect(lang).toBe('C.UTF-8');
    } finally {
      delete process.env.SVC_SECRET_PROBE;
    }
  });

  (hasPrlimit ? it : it.skip)('enforces the memory limit (prlimit --as)', async () => {
    const limited = new NativeREngine({ ...config, rMemoryLimitMb: 200 });
    const small = await job('x <- numeric(1e6); writeLines("ok", "small.txt")');
    await expect(
      limited.runScript({
        jobId: 'small',
        workDir: small,
        scriptName: 'script.R',
        timeoutMs: 30_000,
      }),
    ).resolves.toMatchObject({ status: 'succeeded' });

    const big = await job('x <- numeric(1e9)\nwriteLines("allocated", "big.txt")');
    const outcome = await limited.runScript({
      jobId: 'big',
      workDir: big,
      scriptName: 'script.R',
      timeoutMs: 30_000,
    });
    expect(outcome.status).toBe('failed');
    expect(outcome).toMatchObject({
      reason: 'limit',
      message: expect.stringMatching(/memory limit of 200 MiB.*cannot allocate/),
    });
    expect(existsSync(join(big, 'big.txt'))).toBe(false);
  });

  it('keeps concurrent jobs in their own directories', async () => {
    const script = 'writeLines(list.files(all.files = TRUE, no.. = TRUE), "seen.txt")';
    const first = await job(script, { 'first.csv': '1' });
    const second = await job(script, { 'second.csv': '2' });
    const outcomes = await Promise.all(
      [first, second].map((workDir, i) =>
        engine.runScript({ jobId: `iso${i}`, workDir, scriptName: 'script.R', timeoutMs: 30_000 }),
      ),
    );

    expect(outcomes).toMatchObject([{ status: 'succeeded' }, { status: 'succeeded' }]);
    const seenByFirst = (await readFile(join(first, 'seen.txt'), 'utf8')).split('\n');
    const seenBySecond = (await readFile(join(second, 'seen.txt'), 'utf8')).split('\n');
    expect(seenByFirst).toContain('first.csv');
    expect(seenByFirst).not.toContain('second.csv');
    expect(seenBySecond).toContain('second.csv');
    expect(seenBySecond).not.toContain('first.csv');
  });

  it('stop() kills running jobs, which then count as not delivered', async () => {
    const other = new NativeREngine(config);
    const workDir = await job('writeLines(as.character(Sys.getpid()), "r.pid")\nrepeat {}');
    const run = other.runScript({
      jobId: 'stop',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 60_000,
    });
    const pidFile = join(workDir, 'r.pid');
    while (!existsSync(pidFile) || (await readFile(pidFile, 'utf8')) === '') {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await other.stop();

    await expect(run).rejects.toBeInstanceOf(REngineUnavailableError);
    expect(await isAlive(Number(await readFile(pidFile, 'utf8')))).toBe(false);
  });
});

describe('NativeREngine without R', () => {
  const missing = new NativeREngine({ ...config, rscriptPath: '/nonexistent/bin/Rscript' });

  it('start() fails with one line naming RSCRIPT_PATH and R_HOME', async () => {
    const error = await missing.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    expect(message).toContain('/nonexistent/bin/Rscript');
    expect(message).toContain('RSCRIPT_PATH');
    expect(message).toContain('R_HOME');
    expect(message).not.toContain('\n');
  });

  it('runScript() throws REngineUnavailableError so the job is retried', async () => {
    const workDir = await mkdtemp(join(tmpdir(), 'svc-native-spec-missing-'));
    try {
      await writeFile(join(workDir, 'script.R'), '1');
      await expect(
        missing.runScript({ jobId: 'missing', workDir, scriptName: 'script.R', timeoutMs: 5_000 }),
      ).rejects.toBeInstanceOf(REngineUnavailableError);
      expect(await missing.healthy()).toBe(false);
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  });

  it('findRscript() answers null for a path that does not exist', () => {
    expect(findRscript({ ...config, rscriptPath: '/nonexistent/bin/Rscript' })).toBeNull();
    expect(findRscript({ ...config, rHome: '/nonexistent' })).toBeNull();
  });
});
