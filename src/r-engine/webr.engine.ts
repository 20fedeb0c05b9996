import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, posix, resolve, sep } from 'node:path';
import type { WebR } from 'webr';
import type {
  FunctionCallEngine,
  FunctionCallFailure,
  FunctionCallOutcome,
  FunctionCallRequest,
  FunctionCallStats,
} from './function-call-engine';
import type { FunctionLibrarySource } from './r-session-pool';
import { rSourcePath } from './r-sources';
import { routeOutput } from './job-progress';
import {
  R_LOG_FILE,
  REngineUnavailableError,
  type REngine,
  type ScriptRunOutcome,
  type ScriptRunRequest,
} from './r-engine';

/**
 * webR is an optional dependency (about 180 MB with what it brings): loaded on first use only, so
 * an install without it (`npm ci --omit=optional`, the Docker image) runs native R. It loads
 * R.wasm and its worker script from the package's own `dist/` directory (a file path works as
 * the base URL under Node); the package's "require" export is `dist/webr.cjs`.
 */
async function loadWebR(): Promise<{ WebR: typeof WebR; baseUrl: string }> {
  let module: typeof import('webr');
  try {
    module = await import('webr');
  } catch (error) {
    throw new Error(
      `the optional package webr is not installed (${messageOf(error).split('\n')[0]}): install R (apt-get install r-base-core) or run npm install webr`,
    );
  }
  return { WebR: module.WebR, baseUrl: dirname(require.resolve('webr')) + '/' };
}

/** How often a running script's output is taken from webR's output queue. */
const OUTPUT_POLL_MS = 250;
const INIT_TIMEOUT_MS = 60_000;
const HEALTH_TIMEOUT_MS = 10_000;
const JOBS_DIR = '/jobs';

/** An R string literal; JSON's escapes (\", \\, \n, \uXXXX) are valid in R. */
function rString(value: string): string {
  return JSON.stringify(value);
}

/** Relative paths of the regular files under dir; symbolic links are never followed. */
async function listHostFiles(dir: string, prefix = ''): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      files.push(...(await listHostFiles(dir, path)));
    } else if (entry.isFile()) {
      files.push(path);
    }
  }
  return files;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What R's `quit(status = n)` looks like when it surfaces from webR's worker. */
const EXIT_PATTERN = /Program terminated with exit\((\d+)\)/;

interface RunState {
  /** Set when the run lost the race against its time limit or stop(): write nothing more. */
  abandoned: boolean;
}

/**
 * R in WebAssembly, in-process: one webR instance, one job at a time (R is single-threaded and
 * a shared virtual file system would let jobs see each other). Each run copies the host
 * working directory into a fresh VFS directory, sources the script there and copies the
 * directory back. A timed-out run cannot be interrupted reliably, so the instance is
 * discarded and a new one started.
 */
export class WebREngine implements REngine, FunctionCallEngine {
  readonly kind = 'webr' as const;
  /** One instance runs one script at a time. */
  readonly maxConcurrentRuns = 1;
  readonly sandbox = 'webassembly' as const;
  /** webR cannot build R packages: the admin API reports them as not supported on this node. */
  readonly packages = null;
  private webR: WebR | undefined;
  private starting: Promise<WebR> | undefined;
  private versionString = '';
  /** The tail of the run queue; each job waits for the one before it. */
  private queue: Promise<unknown> = Promise.resolve();
  private busy = false;
  private stopped = false;
  private abortCurrent: (() => void) | undefined;
  private runCount = 0;
  private libraries: FunctionLibrarySource | undefined;
  private waitingCalls = 0;
  /** call-function.R, shared with the native sessions; read once. */
  private callFunctionCode: string | undefined;
  /** progress.R (svc_progress), shared with native R; read once. */
  private progressSource: string | undefined;

  private progressCode(): string {
    this.progressSource ??= readFileSync(rSourcePath('progress.R'), 'utf8');
    return this.progressSource;
  }

  async start(): Promise<void> {
    this.stopped = false;
    try {
      await this.instance();
    } catch (error) {
      throw new Error(
        `webR cannot start: ${messageOf(error)}; set R_ENGINE=native to use installed R`,
      );
    }
  }

  async version(): Promise<string> {
    await this.instance();
    return this.versionString;
  }

  /** While a job runs, an evaluation would queue behind it; a live instance counts as healthy. */
  async healthy(): Promise<boolean> {
    if (this.busy || this.stopped) {
      return this.webR !== undefined;
    }
    try {
      // A fresh instance (after a job quit R or ran out of time) is awaited under its own
      // start-up limit: on Node.js 22 and 24 starting webR on a busy machine can take longer
      // than HEALTH_TIMEOUT_MS, which is meant for evaluating 1+1 only.
      await this.instance();
      const two = await withTimeout(
        this.exclusive(async () => (await this.instance()).evalRNumber('1+1')),
        HEALTH_TIMEOUT_MS,
        'webR',
      );
      return two === 2;
    } catch {
      return false;
    }
  }

  runScript(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    return this.exclusive(() => this.runExclusive(request));
  }

  /** Where function calls find the applications' libraries (set by the module). */
  useFunctionLibraries(source: FunctionLibrarySource): void {
    this.libraries = source;
  }

  /**
   * A function call on the one instance, in turn with script runs: a fresh environment holds
   * the application's library (sourced anew for every call, so nothing of one call reaches the
   * next), and the function is called there.
   */
  async callFunction(request: FunctionCallRequest): Promise<FunctionCallOutcome> {
    if (!this.libraries) {
      throw new REngineUnavailableError('webR has no function library source');
    }
    const library = await this.libraries.get(request.applicationName);
    this.waitingCalls++;
    let waiting = true;
    try {
      return await this.exclusive(() => {
        this.waitingCalls--;
        waiting = false;
        if (request.signal?.aborted) {
          throw new REngineUnavailableError('the function call was given up');
        }
        return this.guarded(
          `${request.functionName} of ${request.applicationName}`,
          request.timeoutMs,
          request.signal,
          (webR) => this.evaluateCall(webR, request, library.files),
          () => ({
            status: 'failed',
            reason: 'timeout',
            message: `${request.functionName} exceeded its time limit of ${request.timeoutMs / 1000} s`,
          }),
        );
      });
    } finally {
      if (waiting) {
        this.waitingCalls--;
      }
    }
  }

  stats(): FunctionCallStats {
    const size = this.webR ? 1 : 0;
    const busy = this.busy ? 1 : 0;
    return { size, busy, idle: size - busy, waiting: this.waitingCalls };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abortCurrent?.();
    const starting = this.starting;
    this.discard();
    if (starting) {
      await starting.catch(() => undefined);
      this.discard();
    }
    await this.queue;
  }

  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(async () => {
      this.busy = true;
      try {
        return await task();
      } finally {
        this.busy = false;
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private instance(): Promise<WebR> {
    if (this.stopped) {
      return Promise.reject(new REngineUnavailableError('the webR engine has been stopped'));
    }
    if (this.webR) {
      return Promise.resolve(this.webR);
    }
    this.starting ??= this.create().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async create(): Promise<WebR> {
    const { WebR, baseUrl } = await loadWebR();
    const webR = new WebR({ baseUrl, interactive: false });
    try {
      await withTimeout(webR.init(), INIT_TIMEOUT_MS, 'webR start-up');
      this.versionString = await webR.evalRString('R.version.string');
      await webR.FS.mkdir(JOBS_DIR);
    } catch (error) {
      webR.close();
      throw new REngineUnavailableError(`webR could not be initialised: ${messageOf(error)}`);
    }
    this.webR = webR;
    return webR;
  }

  /** Closes the instance; the next run starts a fresh one. */
  private discard(webR = this.webR): void {
    webR?.close();
    if (webR === this.webR) {
      this.webR = undefined;
    }
  }

  private runExclusive(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    return this.guarded(
      `job ${request.jobId}`,
      request.timeoutMs,
      request.signal,
      (webR, state) => this.execute(webR, request, state),
      (): ScriptRunOutcome => ({
        status: 'failed',
        reason: 'timeout',
        message: `the job exceeded its time limit of ${request.timeoutMs / 1000} s`,
      }),
    );
  }

  /**
   * Runs work on the instance under a time limit. A run that loses the race against its limit
   * or stop() cannot be interrupted reliably: the instance is discarded (and a new one started).
   * The same when the caller's `signal` aborts (a cancelled job): the run is given up at once.
   */
  private async guarded<T>(
    what: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    work: (webR: WebR, state: RunState) => Promise<T>,
    onTimeout: () => T,
  ): Promise<T> {
    const webR = await this.instance();
    const state: RunState = { abandoned: false };
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const aborted = new Promise<'stopped'>((resolve) => {
      this.abortCurrent = () => resolve('stopped');
    });
    let giveUp: (() => void) | undefined;
    const cancelled = new Promise<'cancelled'>((resolve) => {
      giveUp = () => resolve('cancelled');
      signal?.addEventListener('abort', giveUp, { once: true });
      if (signal?.aborted) {
        resolve('cancelled');
      }
    });
    const running = work(webR, state);
    running.catch(() => undefined);
    try {
      const first = await Promise.race([running, timedOut, aborted, cancelled]);
      if (first === 'timeout' || first === 'stopped' || first === 'cancelled') {
        state.abandoned = true;
        this.discard(webR);
        if (first === 'stopped') {
          throw new REngineUnavailableError(`the webR engine was stopped while ${what} ran`);
        }
        if (first === 'cancelled') {
          void this.instance().catch(() => undefined);
          throw new REngineUnavailableError(`${what} was given up while it ran`);
        }
        // Start the replacement now so the next run does not pay for it.
        void this.instance().catch(() => undefined);
        return onTimeout();
      }
      return first;
    } catch (error) {
      if (error instanceof REngineUnavailableError) {
        throw error;
      }
      this.discard(webR);
      throw new REngineUnavailableError(`webR failed while running ${what}: ${messageOf(error)}`);
    } finally {
      clearTimeout(timer);
      if (giveUp) {
        signal?.removeEventListener('abort', giveUp);
      }
      this.abortCurrent = undefined;
    }
  }

  private async evaluateCall(
    webR: WebR,
    request: FunctionCallRequest,
    files: Array<{ name: string; content: string }>,
  ): Promise<FunctionCallOutcome> {
    this.callFunctionCode ??= readFileSync(rSourcePath('call-function.R'), 'utf8');
    const vector = (values: string[]): string => `c(${values.map(rString).join(', ')})`;
    const app = rString(request.applicationName);
    // Nothing is left in the global environment; quit() inside the function ends the instance.
    const code = `local({
      svc <- ${this.callFunctionCode}
      if (!("svc" %in% search())) {
        progress <- eval(parse(text = ${rString(this.progressCode())}, keep.source = FALSE))
        attach(list(svc_progress = progress$make(progress$printed)), name = "svc",
               warn.conflicts = FALSE)
      }
      lib <- tryCatch(
        svc$load(${app}, ${vector(files.map((f) => f.name))}, ${vector(files.map((f) => f.content))}),
        error = function(e) conditionMessage(e))
      if (is.character(lib)) c("fail", "r-error", lib)
      else svc$call(lib, ${app}, ${rString(request.functionName)}, ${rString(request.payload)})
    })`;
    const shelter = await new webR.Shelter();
    try {
      let answer: string[];
      try {
        const captured = await shelter.captureR(code, {
          captureStreams: true,
          captureConditions: false,
          captureGraphics: false,
        });
        // The function's output is not kept; its progress reports are.
        const output = routeOutput({ onProgress: request.onProgress });
        for (const { type, data } of captured.output) {
          if (type === 'stdout' && typeof data === 'string') {
            data.split('\n').forEach((line) => output?.('stdout', line));
          }
        }
        const result = await captured.result.toJs();
        answer =
          result.type === 'character' && 'values' in result
            ? result.values.map((value) => (typeof value === 'string' ? value : ''))
            : [];
      } catch (error) {
        if (!EXIT_PATTERN.test(messageOf(error))) {
          throw error;
        }
        this.discard(webR);
        void this.instance().catch(() => undefined);
        return {
          status: 'failed',
          reason: 'session-died',
          message: `R ended while it ran ${request.functionName} (${messageOf(error)})`,
        };
      }
      if (answer[0] === 'ok' && answer.length === 2) {
        return { status: 'succeeded', value: answer[1] };
      }
      return {
        status: 'failed',
        reason: answer[1] as FunctionCallFailure,
        message: answer[2] ?? 'malformed answer from R',
      };
    } finally {
      await shelter.purge().catch(() => undefined);
    }
  }

  private async execute(
    webR: WebR,
    request: ScriptRunRequest,
    state: RunState,
  ): Promise<ScriptRunOutcome> {
    const { workDir, scriptName } = request;
    if (!(await stat(workDir)).isDirectory()) {
      throw new Error(`job ${request.jobId}: ${workDir} is not a directory`);
    }
    const vfsDir = `${JOBS_DIR}/run-${++this.runCount}`;
    const copiedIn = new Map<string, Buffer>();
    await webR.FS.mkdir(vfsDir);
    const vfsDirs = new Set<string>([vfsDir]);
    const ensureVfsDir = async (dir: string): Promise<void> => {
      if (!vfsDirs.has(dir)) {
        await ensureVfsDir(posix.dirname(dir));
        await webR.FS.mkdir(dir);
        vfsDirs.add(dir);
      }
    };
    for (const path of await listHostFiles(workDir)) {
      if (path === R_LOG_FILE) {
        continue;
      }
      const data = await readFile(join(workDir, path));
      const target = posix.join(vfsDir, path);
      await ensureVfsDir(posix.dirname(target));
      await webR.FS.writeFile(target, data);
      copiedIn.set(path, data);
    }

    // The script gets its own environment and leaves no trace for the next job: global
    // variables, options, attached packages, its temporary files and open devices are reset (devices are closed
    // before the copy-back so that a PDF without dev.off() is complete, as with native R).
    const code = `local({
      opts <- options(); attached <- search()
      on.exit({
        graphics.off(); setwd("/")
        added <- setdiff(names(options()), names(opts))
        options(c(opts, setNames(vector("list", length(added)), added)))
        for (name in setdiff(search(), attached)) detach(name, character.only = TRUE)
        rm(list = ls(globalenv(), all.names = TRUE), envir = globalenv())
        unlink(list.files(tempdir(), all.files = TRUE, full.names = TRUE, no.. = TRUE),
               recursive = TRUE, force = TRUE)
      })
      setwd(${rString(vfsDir)})
      progress <- eval(parse(text = ${rString(this.progressCode())}, keep.source = FALSE))
      svc <- new.env(parent = globalenv())
      svc$svc_progress <- progress$make(progress$printed)
      tryCatch({
        source(${rString(scriptName)}, local = new.env(parent = svc))
        character(0)
      }, error = function(e) {
        call <- conditionCall(e)
        prefix <- if (is.null(call)) "Error: " else paste0("Error in ", deparse(call)[[1L]], " : ")
        message(prefix, conditionMessage(e))
        conditionMessage(e)
      })
    })`;
    const lines: { stream: 'stdout' | 'stderr'; line: string }[] = [];
    // R's output is not captured: it reaches webR's output queue line by line as R prints it,
    // and is taken from there while the script runs, so the job's log follows it live.
    const output = routeOutput(request);
    const takeOutput = async (): Promise<void> => {
      for (const { type, data } of await webR.flush()) {
        if (
          (type === 'stdout' || type === 'stderr') &&
          typeof data === 'string' &&
          !state.abandoned
        ) {
          lines.push({ stream: type, line: data });
          output?.(type, data);
        }
      }
    };
    await webR.flush(); // whatever an earlier evaluation left is not this job's
    let taking = Promise.resolve();
    const outputTimer = setInterval(() => {
      taking = taking.then(takeOutput).catch(() => undefined);
    }, OUTPUT_POLL_MS);
    let outcome: ScriptRunOutcome = { status: 'succeeded' };
    let recycle = false;
    const shelter = await new webR.Shelter();
    try {
      const captured = await shelter.captureR(code, {
        captureStreams: false,
        captureConditions: false,
        captureGraphics: false,
      });
      const result = await captured.result.toJs();
      if (result.type === 'character' && 'values' in result && result.values.length > 0) {
        const message = result.values[0];
        outcome = {
          status: 'failed',
          reason: 'r-error',
          message: typeof message === 'string' ? message : '',
        };
      }
    } catch (error) {
      // quit() inside the script ends R's main loop; the instance answers afterwards but is
      // not trusted with another job.
      const exit = EXIT_PATTERN.exec(messageOf(error));
      if (!exit) {
        throw error;
      }
      recycle = true;
      outcome =
        exit[1] === '0'
          ? { status: 'succeeded' }
          : { status: 'failed', reason: 'exit', message: `R exited with status ${exit[1]}` };
    } finally {
      clearInterval(outputTimer);
      // The last lines were queued before the result: one more look takes them.
      await taking;
      await takeOutput().catch(() => undefined);
      await shelter.purge().catch(() => undefined);
    }
    if (state.abandoned) {
      return outcome;
    }

    await writeFile(join(workDir, R_LOG_FILE), lines.map(({ line }) => `${line}\n`).join(''));

    const produced = await webR.evalRRaw(
      `list.files(${rString(vfsDir)}, recursive = TRUE, all.files = TRUE, no.. = TRUE)`,
      'string[]',
    );
    for (const path of produced) {
      const target = resolve(workDir, path);
      if (path === R_LOG_FILE || !target.startsWith(resolve(workDir) + sep)) {
        continue;
      }
      const bytes = await webR.FS.readFile(posix.join(vfsDir, path));
      const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const before = copiedIn.get(path);
      if (state.abandoned) {
        return outcome;
      }
      if (!before?.equals(data)) {
        await mkdir(dirname(target), { recursive: true });
        await writeFile(target, data);
      }
    }
    // A file the script deleted is gone from the host too, as it would be with native R.
    const kept = new Set(produced);
    for (const path of copiedIn.keys()) {
      if (!kept.has(path) && !state.abandoned) {
        await rm(join(workDir, path), { force: true });
      }
    }
    await webR.evalRVoid(`unlink(${rString(vfsDir)}, recursive = TRUE)`);
    if (recycle) {
      this.discard(webR);
      void this.instance().catch(() => undefined);
    }
    return outcome;
  }
}
