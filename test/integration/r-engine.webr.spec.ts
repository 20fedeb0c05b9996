import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { R_LOG_FILE, REngineUnavailableError } from '../../src/r-engine/r-engine';
import { WebREngine } from '../../src/r-engine/webr.engine';

describe('WebREngine', () => {
  const engine = new WebREngine();
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

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-webr-spec-'));
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
        'dir.create("figures"); pdf("figures/open.pdf"); plot(1:3)', // device left open
        'writeLines("changed", "input.txt")',
        'unlink("unwanted.txt")',
        'print(summary(1:10))',
      ].join('\n'),
      { 'input.txt': 'a\nb\n', 'unwanted.txt': 'x' },
    );
    const lines: string[] = [];
    const outcome = await engine.runScript({
      jobId: 'pdf',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 60_000,
      onOutput: (stream, line) => lines.push(`${stream}:${line}`),
    });

    expect(outcome).toEqual({ status: 'succeeded' });
    expect((await readFile(join(workDir, 'plot.pdf'))).subarray(0, 5).toString()).toBe('%PDF-');
    expect((await readFile(join(workDir, 'figures', 'open.pdf'))).toString()).toMatch(/%%EOF\s*$/);
    expect(await readFile(join(workDir, 'upper.txt'), 'utf8')).toBe('A\nB\n');
    expect(await readFile(join(workDir, 'input.txt'), 'utf8')).toBe('changed\n');
    expect(existsSync(join(workDir, 'unwanted.txt'))).toBe(false);
    const log = await readFile(join(workDir, R_LOG_FILE), 'utf8');
    expect(log).toContain('read 2 lines');
    expect(log).toContain('a message');
    expect(log).toContain('Median');
    expect(lines).toContain('stdout:read 2 lines');
    expect(lines).toContain('stderr:a message');
  });

  it('reports an R error with R’s own message', async () => {
    const workDir = await job(
      'cat("before\\n")\nf <- function() stop("boom")\nf()\ncat("after\\n")',
    );
    const outcome = await engine.runScript({
      jobId: 'error',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 60_000,
    });

    expect(outcome).toEqual({ status: 'failed', reason: 'r-error', message: 'boom' });
    const log = await readFile(join(workDir, R_LOG_FILE), 'utf8');
    expect(log).toContain('before');
    expect(log).toContain('Error in f() : boom');
    expect(log).not.toContain('after');
  });

  it('reports quit(status = 3) as reason exit and recovers', async () => {
    const workDir = await job('quit(status = 3)');
    await expect(
      engine.runScript({ jobId: 'exit', workDir, scriptName: 'script.R', timeoutMs: 60_000 }),
    ).resolves.toEqual({ status: 'failed', reason: 'exit', message: 'R exited with status 3' });
    expect(await engine.healthy()).toBe(true);
  });

  it('gives up on an endless loop at the time limit and runs the next job', async () => {
    const workDir = await job('repeat {}');
    const started = Date.now();
    const outcome = await engine.runScript({
      jobId: 'timeout',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 2_000,
    });

    expect(outcome).toEqual({
      status: 'failed',
      reason: 'timeout',
      message: 'the job exceeded its time limit of 2 s',
    });
    // Generous: it proves the give-up, not a speed (the machine may be busy).
    expect(Date.now() - started).toBeLessThan(20_000);

    const next = await job('writeLines("ok", "next.txt")');
    await expect(
      engine.runScript({ jobId: 'next', workDir: next, scriptName: 'script.R', timeoutMs: 60_000 }),
    ).resolves.toEqual({ status: 'succeeded' });
    expect(await readFile(join(next, 'next.txt'), 'utf8')).toBe('ok\n');
  });

  it('does not expose the service’s environment to R', async () => {
    process.env.SVC_SECRET_PROBE = 'x';
    try {
      const workDir = await job('writeLines(Sys.getenv("SVC_SECRET_PROBE"), "probe.txt")');
      await expect(
        engine.runScript({ jobId: 'env', workDir, scriptName: 'script.R', timeoutMs: 60_000 }),
      ).resolves.toEqual({ status: 'succeeded' });
      expect(await readFile(join(workDir, 'probe.txt'), 'utf8')).toBe('\n');
    } finally {
      delete process.env.SVC_SECRET_PROBE;
    }
  });

  it('keeps jobs apart: files, global variables and options', async () => {
    const script = [
      'writeLines(c(list.files(all.files = TRUE, no.. = TRUE), "--",',
      '  ls(globalenv(), all.names = TRUE), "--", format(getOption("svc.probe", "unset"))), "seen.txt")',
      'leaked <<- TRUE',
      'options(svc.probe = "set")',
    ].join('\n');
    const first = await job(script, { 'first.csv': '1' });
    const second = await job(script, { 'second.csv': '2' });
    const outcomes = await Promise.all(
      [first, second].map((workDir, i) =>
        engine.runScript({ jobId: `iso${i}`, workDir, scriptName: 'script.R', timeoutMs: 60_000 }),
      ),
    );

    expect(outcomes).toEqual([{ status: 'succeeded' }, { status: 'succeeded' }]);
    expect(await readFile(join(first, 'seen.txt'), 'utf8')).toBe(
      'first.csv\nscript.R\n--\n--\nunset\n',
    );
    expect(await readFile(join(second, 'seen.txt'), 'utf8')).toBe(
      'script.R\nsecond.csv\n--\n--\nunset\n',
    );
  });

  it('stop() abandons a running job as not delivered; start() brings the engine back', async () => {
    const other = new WebREngine();
    await other.start();
    const workDir = await job('repeat {}');
    const run = other.runScript({
      jobId: 'stop',
      workDir,
      scriptName: 'script.R',
      timeoutMs: 60_000,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await other.stop();
    await expect(run).rejects.toBeInstanceOf(REngineUnavailableError);
    await expect(
      other.runScript({ jobId: 'after', workDir, scriptName: 'script.R', timeoutMs: 1_000 }),
    ).rejects.toBeInstanceOf(REngineUnavailableError);

    await other.start();
    const again = await job('writeLines("ok", "again.txt")');
    await expect(
      other.runScript({
        jobId: 'again',
        workDir: again,
        scriptName: 'script.R',
        timeoutMs: 60_000,
      }),
    ).resolves.toEqual({ status: 'succeeded' });
    await other.stop();
  });
});
