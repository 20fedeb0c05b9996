import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/app-config';
import type { FunctionLibrary } from '../../src/r-engine/function-library';
import { R_LOG_FILE, REngineUnavailableError } from '../../src/r-engine/r-engine';
import { WEBR_LINE_MAX_CHARS } from '../../src/r-engine/webr/webr-evaluation';
import { WebREngine } from '../../src/r-engine/webr/webr.engine';

// In the service's environment before any worker starts (a worker copies it at its start).
process.env.SVC_WEBR_SECRET = 'not for R';

/** Leaves a marker of each kind and reports which markers of an earlier run it sees. */
const MARKER_SCRIPT = [
  'seen <- c(global = exists("svc_marker", envir = globalenv()),',
  '  option = !is.null(getOption("svc.marker")), env = nzchar(Sys.getenv("SVC_MARKER")),',
  '  home = file.exists("~/svc-marker"), search = exists("svc_marker_base"))',
  'writeLines(paste(names(seen)[seen], collapse = ","), "seen.txt")',
  'svc_marker <<- TRUE; options(svc.marker = TRUE); Sys.setenv(SVC_MARKER = "1")',
  'writeLines("x", "~/svc-marker")',
  // An environment of R's search path: what the next job looks up there, this job decides.
  'assign("svc_marker_base", TRUE, envir = as.environment("Autoloads"))',
].join('\n');

describe('WebREngine', () => {
  // Limits small enough to reach (R_MAX_FILE_MB, R_MAX_WRITE_MB, ZIP_MAX_ENTRIES,
  // MAX_REQUEST_BYTES), loose enough for the other tests.
  const engine = new WebREngine({
    rMaxFileMb: 1,
    rMaxWriteMb: 2,
    zipMaxEntries: 8,
    maxRequestBytes: 1024 * 1024,
  });
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

  it("gives a script its run's trace (TRACEPARENT, SVC_TRACE_ID), and the next run none", async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const report = 'writeLines(Sys.getenv(c("TRACEPARENT", "SVC_TRACE_ID")), "trace.txt")';
    const traced = await job(report);
    const run = (workDir: string, trace: { traceparent: string; tracestate: null } | null) =>
      engine.runScript({
        jobId: 'trace',
        workDir,
        scriptName: 'script.R',
        timeoutMs: 60_000,
        trace,
      });
    expect(await run(traced, { traceparent, tracestate: null })).toEqual({ status: 'succeeded' });
    expect(await readFile(join(traced, 'trace.txt'), 'utf8')).toBe(
      `${traceparent}\n4bf92f3577b34da6a3ce929d0e0e4736\n`,
    );
    const untraced = await job(report);
    expect(await run(untraced, null)).toEqual({ status: 'succeeded' });
    expect(await readFile(join(untraced, 'trace.txt'), 'utf8')).toBe('\n\n');
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

  it('locks the worker down: no JavaScript from R, in the worker or the service’s thread', async () => {
    for (const awaited of ['FALSE', 'TRUE']) {
      const workDir = await job(
        `writeLines(webr::eval_js("globalThis.svcTaken = String(process.env.SVC_WEBR_SECRET)", await = ${awaited}), "taken.txt")`,
      );
      const outcome = await engine.runScript({
        jobId: 'js',
        workDir,
        scriptName: 'script.R',
        timeoutMs: 60_000,
      });
      expect(outcome).toMatchObject({ status: 'failed', reason: 'r-error' });
      expect((outcome as { message: string }).message).toMatch(/eval is not available to jobs/);
      expect(existsSync(join(workDir, 'taken.txt'))).toBe(false);
      expect((globalThis as { svcTaken?: string }).svcTaken).toBeUndefined();
    }
  });

  it('locks the worker down: no host file system', async () => {
    await writeFile(join(root, 'canary.txt'), 'host file');
    const workDir = await job(
      [
        'host <- tryCatch({',
        '  dir.create("/mnt/host", recursive = TRUE)',
        `  webr::mount("/mnt/host", ${JSON.stringify(root)}, type = "NODEFS")`,
        '  readLines("/mnt/host/canary.txt")',
        '}, error = function(e) paste("refused:", conditionMessage(e)))',
        'writeLines(host, "probe.txt")',
      ].join('\n'),
    );
    await expect(
      engine.runScript({ jobId: 'mount', workDir, scriptName: 'script.R', timeoutMs: 60_000 }),
    ).resolves.toEqual({ status: 'succeeded' });
    expect(await readFile(join(workDir, 'probe.txt'), 'utf8')).toBe(
      'refused: mounting a file system is not available to jobs\n',
    );
  });

  describe('bounds what a run hands back', () => {
    const run = async (script: string) => {
      const workDir = await job(script);
      const outcome = await engine.runScript({
        jobId: 'bounded',
        workDir,
        scriptName: 'script.R',
        timeoutMs: 60_000,
      });
      return { workDir, outcome };
    };

    it('more files than ZIP_MAX_ENTRIES: an error result naming it, nothing written back', async () => {
      const { workDir, outcome } = await run(
        'for (i in 1:9) writeLines("x", paste0("f", i, ".txt"))',
      );
      expect(outcome).toEqual({
        status: 'failed',
        reason: 'limit',
        message: 'the job left more than ZIP_MAX_ENTRIES (8) files',
      });
      expect(existsSync(join(workDir, 'f1.txt'))).toBe(false);
    });

    it('a file above R_MAX_FILE_MB, or files above R_MAX_WRITE_MB in all: an error result naming it', async () => {
      await expect(run('writeBin(raw(1100000), "big.bin")')).resolves.toMatchObject({
        outcome: {
          status: 'failed',
          reason: 'limit',
          message: 'the job\'s file "big.bin" has 1100000 bytes, more than R_MAX_FILE_MB (1 MiB)',
        },
      });
      await expect(
        run('for (i in 1:3) writeBin(raw(900000), paste0("part", i, ".bin"))'),
      ).resolves.toMatchObject({
        outcome: {
          status: 'failed',
          reason: 'limit',
          message: "the job's files have more than R_MAX_WRITE_MB (2 MiB) in all",
        },
      });
    });

    it('a file name the host cannot hold: an error result naming it', async () => {
      const { outcome } = await run(`writeLines("x", strrep("n", 300))`);
      expect(outcome).toMatchObject({ status: 'failed', reason: 'limit' });
      expect((outcome as { message: string }).message).toMatch(
        /^the job left a file whose name has a component longer than 255 bytes/,
      );
    });

    it('cuts a long line and out.log at R_MAX_FILE_MB', async () => {
      const { workDir, outcome } = await run(
        'cat(strrep("x", 200000), "\\n"); for (i in 1:30) cat(strrep("y", 50000), "\\n")',
      );
      expect(outcome).toEqual({ status: 'succeeded' });
      const log = await readFile(join(workDir, R_LOG_FILE), 'utf8');
      const [first] = log.split('\n');
      expect(first).toBe(`${'x'.repeat(WEBR_LINE_MAX_CHARS)} [line of 200001 characters cut]`);
      expect(Buffer.byteLength(log)).toBeLessThan(1024 * 1024 + 100);
      expect(log).toMatch(/\[output cut at R_MAX_FILE_MB\]\n$/);
    });

    it('a function answer above MAX_REQUEST_BYTES fails as too-large', async () => {
      const library: FunctionLibrary = {
        id: 1,
        packages: 0,
        files: [
          {
            name: 'f.R',
            content:
              'svcJsonService <- function(payload) if (payload == "big") strrep("x", 2e6) else "small"\n',
          },
        ],
      };
      engine.functionCalls(loadConfig({}), { get: () => Promise.resolve(library) });
      const call = (payload: string) =>
        engine.callFunction({
          applicationName: 'app',
          functionName: 'svcJsonService',
          payload,
          timeoutMs: 60_000,
        });
      await expect(call('big')).resolves.toEqual({
        status: 'failed',
        reason: 'too-large',
        message:
          'svcJsonService returned 2000000 bytes, more than MAX_REQUEST_BYTES (1048576 bytes)',
      });
      await expect(call('small')).resolves.toEqual({ status: 'succeeded', value: 'small' });
    });
  });

  it('shared instance: the next job of another application sees files outside its directory and changes to the search path; globals, options and environment variables are reset', async () => {
    const first = await job(MARKER_SCRIPT);
    const second = await job(MARKER_SCRIPT);
    for (const [workDir, applicationName] of [
      [first, 'a'],
      [second, 'b'],
    ]) {
      await expect(
        engine.runScript({
          jobId: `shared-${applicationName}`,
          workDir,
          applicationName,
          scriptName: 'script.R',
          timeoutMs: 60_000,
        }),
      ).resolves.toEqual({ status: 'succeeded' });
    }
    expect(await readFile(join(first, 'seen.txt'), 'utf8')).toBe('\n');
    expect(await readFile(join(second, 'seen.txt'), 'utf8')).toBe('home,search\n');
  });

  it('WEBR_INSTANCES=per-application: a job of application B sees nothing application A left', async () => {
    const separate = new WebREngine({ webrInstances: 'per-application' });
    await separate.start();
    try {
      const runAs = async (applicationName: string) => {
        const workDir = await job(MARKER_SCRIPT);
        await expect(
          separate.runScript({
            jobId: `sep-${applicationName}`,
            workDir,
            applicationName,
            scriptName: 'script.R',
            timeoutMs: 60_000,
          }),
        ).resolves.toEqual({ status: 'succeeded' });
        return readFile(join(workDir, 'seen.txt'), 'utf8');
      };
      await expect(runAs('a')).resolves.toBe('\n');
      await expect(runAs('b')).resolves.toBe('\n');
      // A's own instance keeps what the reset does not undo, for A only.
      await expect(runAs('a')).resolves.toBe('home,search\n');
      expect(separate.stats().size).toBe(2);
    } finally {
      await separate.stop();
    }
  });
});
