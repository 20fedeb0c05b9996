import { constants as fsConstants, readFileSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join, posix, resolve, sep } from 'node:path';
import type { WebR } from 'webr';
import type { AppConfig } from '../config/app-config';
import type {
  FunctionCallEngine,
  FunctionCallFailure,
  FunctionCallOutcome,
  FunctionCallRequest,
  FunctionCallStats,
} from './function-call-engine';
import type { FunctionLibrarySource } from './r-session-pool';
import { rSourcePath } from './r-sources';
import { traceEnvironment } from '../tracing/tracing';
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

/**
 * What the engine takes from the configuration; every key is optional (tests build it bare).
 * WEBR_INSTANCES: one instance for all applications, or one per application. MAX_REQUEST_BYTES
 * bounds a function's answer; R_MAX_FILE_MB, R_MAX_WRITE_MB and ZIP_MAX_ENTRIES bound what a
 * script's run hands back (one file, all files, how many), as they do for native R.
 */
export type WebRConfig = Partial<
  Pick<
    AppConfig,
    'webrInstances' | 'maxRequestBytes' | 'rMaxFileMb' | 'rMaxWriteMb' | 'zipMaxEntries'
  >
>;

/** Instances kept warm with WEBR_INSTANCES=per-application; the least recently used goes. */
export const WEBR_MAX_WARM_INSTANCES = 4;
const SHARED_INSTANCE = 'shared';
/** per-application: an instance that has run no job yet (start-up, health), for the next one. */
const SPARE_INSTANCE = 'spare';
/** A line of R's output longer than this is cut (the rest is dropped), in characters. */
export const WEBR_LINE_MAX_CHARS = 64 * 1024;
const MIB = 1024 * 1024;
/** A host path component longer than this cannot be created (NAME_MAX). */
const NAME_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4095;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

/**
 * Run once in each instance's worker, before any job: webR under Node.js runs R's JavaScript
 * bridge in a worker thread with the whole Node.js API, so without this a job's R code reaches
 * the service's environment (`webr::eval_js("process.env")`), its files (`webr::mount` of
 * NODEFS, `process.getBuiltinModule("fs")`) and processes. It takes away mounting, the Node.js
 * process object's dangerous parts, the network classes, and code from strings (eval and the
 * Function constructors: `webr::eval_js` and Emscripten's run_script then fail).
 */
const WORKER_HARDENING = `(() => {
  const refuse = (what) => function () { throw new Error(what + ' is not available to jobs'); };
  const fs = globalThis.FS || (globalThis.Module && globalThis.Module.FS);
  if (!fs) throw new Error('webR worker without FS');
  fs.mount = refuse('mounting a file system');
  const p = globalThis.process;
  if (p) {
    try { Object.defineProperty(p, 'env', { value: {}, writable: false, configurable: false }); } catch (e) { p.env = {}; }
    for (const name of ['getBuiltinModule', 'binding', '_linkedBinding', 'dlopen', 'kill', '_kill',
        'abort', 'reallyExit', 'chdir', 'setuid', 'setgid', 'seteuid', 'setegid', 'setgroups',
        'initgroups', 'umask', 'cwd', 'memoryUsage', 'cpuUsage', 'resourceUsage', 'report',
        'openStdin', '_rawDebug', 'setSourceMapsEnabled']) {
      try { Object.defineProperty(p, name, { value: refuse('process.' + name), writable: false, configurable: false }); } catch (e) { /* absent */ }
    }
  }
  for (const name of ['Worker', 'SharedWorker', 'fetch', 'WebSocket', 'XMLHttpRequest',
      'EventSource', 'importScripts', 'require']) {
    try { Object.defineProperty(globalThis, name, { value: undefined, writable: false, configurable: false }); } catch (e) { /* absent */ }
  }
  const denyFunction = refuse('the Function constructor');
  for (const F of [Function, (async function () {}).constructor, (function* () {}).constructor,
      (async function* () {}).constructor]) {
    Object.defineProperty(F.prototype, 'constructor', { value: denyFunction, writable: false, configurable: false });
  }
  Object.defineProperty(globalThis, 'Function', { value: denyFunction, writable: false, configurable: false });
  Object.defineProperty(globalThis, 'eval', { value: refuse('eval'), writable: false, configurable: false });
  return true;
})()`;

/** Resets what a run leaves in R's session: wraps a run's code (scripts and function calls). */
function isolated(body: string): string {
  // Global variables, options, attached packages, environment variables, R's temporary files and
  // open devices are put back (devices closed before the copy-back so that a PDF without
  // dev.off() is complete, as with native R). Not undone: files outside the run's directory
  // and tempdir(), loaded namespaces and what a run changed in them, hooks and finalizers
  // (docs/security.md, "Function calls and webR").
  return `local({
      opts <- options(); attached <- search(); envs <- as.list(Sys.getenv())
      on.exit({
        graphics.off(); setwd("/")
        added <- setdiff(names(options()), names(opts))
        options(c(opts, setNames(vector("list", length(added)), added)))
        for (name in setdiff(search(), attached)) detach(name, character.only = TRUE)
        Sys.unsetenv(setdiff(names(Sys.getenv()), names(envs)))
        if (length(envs) > 0L) do.call(Sys.setenv, envs)
        rm(list = ls(globalenv(), all.names = TRUE), envir = globalenv())
        unlink(list.files(tempdir(), all.files = TRUE, full.names = TRUE, no.. = TRUE),
               recursive = TRUE, force = TRUE)
      })
      ${body}
    })`;
}

/** Why a relative path cannot be a host file name, or null when it can. */
function badHostPath(path: string): string | null {
  const parts = path.split('/');
  if (
    path === '' ||
    path.startsWith('/') ||
    parts.some((p) => p === '' || p === '.' || p === '..')
  ) {
    return 'is not a plain relative path';
  }
  if (Buffer.byteLength(path) > PATH_MAX_BYTES) {
    return `is longer than ${PATH_MAX_BYTES} bytes`;
  }
  if (parts.some((part) => Buffer.byteLength(part) > NAME_MAX_BYTES)) {
    return `has a component longer than ${NAME_MAX_BYTES} bytes`;
  }
  return null;
}

/** A job's run handed back more than a limit allows: its error result names the limit. */
class ReadBackLimitError extends Error {}

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

/** What a refusal of WORKER_HARDENING looks like when it surfaces as a JavaScript error. */
const REFUSED_PATTERN = /is not available to jobs/;

/** What R's `quit(status = n)` looks like when it surfaces from webR's worker. */
const EXIT_PATTERN = /Program terminated with exit\((\d+)\)/;

interface RunState {
  /** Set when the run lost the race against its time limit or stop(): write nothing more. */
  abandoned: boolean;
}

/**
 * R in WebAssembly, in-process, one job at a time (R is single-threaded). With
 * WEBR_INSTANCES=shared one instance serves every application; with per-application each
 * application gets its own, started on its first run and kept warm, at most
 * WEBR_MAX_WARM_INSTANCES (the least recently used is closed). Each run copies the host working
 * directory into a fresh VFS directory, sources the script there and copies the directory back,
 * bounded (R_MAX_FILE_MB, R_MAX_WRITE_MB, ZIP_MAX_ENTRIES). A timed-out run cannot be
 * interrupted reliably, so its instance is discarded and a new one started.
 */
export class WebREngine implements REngine, FunctionCallEngine {
  readonly kind = 'webr' as const;
  /** One instance runs one script at a time. */
  readonly maxConcurrentRuns = 1;
  readonly sandbox = 'webassembly' as const;
  /** webR cannot build R packages: the admin API reports them as not supported on this node. */
  readonly packages = null;
  /** Live instances by key, least recently used first. */
  private readonly instances = new Map<string, WebR>();
  private readonly starting = new Map<string, Promise<WebR>>();
  /** The instance running work now: never evicted. */
  private inUse: WebR | undefined;
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
  /** run-job.R, the job wrapper native R uses too; read once. */
  private jobSource: string | undefined;

  constructor(private readonly config: WebRConfig = {}) {}

  private get perApplication(): boolean {
    return this.config.webrInstances === 'per-application';
  }

  /** The instance a run of that application uses. */
  private keyOf(applicationName: string | undefined): string {
    return this.perApplication ? `app:${applicationName ?? ''}` : SHARED_INSTANCE;
  }

  /** Health and version: the most recently used instance, else a fresh one (a spare). */
  private anyKey(): string {
    const keys = [...this.instances.keys()];
    return keys.at(-1) ?? (this.perApplication ? SPARE_INSTANCE : SHARED_INSTANCE);
  }

  private progressCode(): string {
    this.progressSource ??= readFileSync(rSourcePath('progress.R'), 'utf8');
    return this.progressSource;
  }

  private jobCode(): string {
    this.jobSource ??= readFileSync(rSourcePath('run-job.R'), 'utf8');
    return this.jobSource;
  }

  async start(): Promise<void> {
    this.stopped = false;
    try {
      await this.instance(this.anyKey());
    } catch (error) {
      throw new Error(
        `webR cannot start: ${messageOf(error)}; set R_ENGINE=native to use installed R`,
      );
    }
  }

  async version(): Promise<string> {
    await this.instance(this.anyKey());
    return this.versionString;
  }

  /** While a job runs, an evaluation would queue behind it; a live instance counts as healthy. */
  async healthy(): Promise<boolean> {
    if (this.busy || this.stopped) {
      return this.instances.size > 0;
    }
    try {
      // A fresh instance (after a job quit R or ran out of time) is awaited under its own
      // start-up limit: on Node.js 22 and 24 starting webR on a busy machine can take longer
      // than HEALTH_TIMEOUT_MS, which is meant for evaluating 1+1 only.
      const key = this.anyKey();
      await this.instance(key);
      const two = await withTimeout(
        this.exclusive(async () => (await this.instance(key)).evalRNumber('1+1')),
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

  /** Function calls run on the one instance, in turn with script runs. */
  functionCalls(_config: AppConfig, libraries: FunctionLibrarySource): FunctionCallEngine {
    this.libraries = libraries;
    return this;
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
          this.keyOf(request.applicationName),
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
    const size = this.instances.size;
    const busy = this.busy ? 1 : 0;
    return { size, busy, idle: size - busy, waiting: this.waitingCalls };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abortCurrent?.();
    const starting = [...this.starting.values()];
    [...this.instances.values()].forEach((webR) => this.discard(webR));
    await Promise.all(starting.map((promise) => promise.catch(() => undefined)));
    [...this.instances.values()].forEach((webR) => this.discard(webR));
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

  private instance(key: string): Promise<WebR> {
    if (this.stopped) {
      return Promise.reject(new REngineUnavailableError('the webR engine has been stopped'));
    }
    const live = this.instances.get(key);
    if (live) {
      // Most recently used last.
      this.instances.delete(key);
      this.instances.set(key, live);
      return Promise.resolve(live);
    }
    const spare = this.instances.get(SPARE_INSTANCE);
    if (key !== SPARE_INSTANCE && spare && spare !== this.inUse) {
      // It has run no job (start-up and health checks only): it becomes this application's.
      this.instances.delete(SPARE_INSTANCE);
      this.instances.set(key, spare);
      return Promise.resolve(spare);
    }
    let starting = this.starting.get(key);
    if (!starting) {
      starting = this.create()
        .then((webR) => {
          if (this.stopped) {
            webR.close();
            throw new REngineUnavailableError('the webR engine has been stopped');
          }
          this.instances.set(key, webR);
          this.evict();
          return webR;
        })
        .finally(() => this.starting.delete(key));
      this.starting.set(key, starting);
    }
    return starting;
  }

  /** Closes the least recently used idle instances beyond WEBR_MAX_WARM_INSTANCES. */
  private evict(): void {
    for (const [key, webR] of this.instances) {
      if (this.instances.size <= WEBR_MAX_WARM_INSTANCES) {
        return;
      }
      if (webR !== this.inUse) {
        this.instances.delete(key);
        webR.close();
      }
    }
  }

  private async create(): Promise<WebR> {
    const { WebR, baseUrl } = await loadWebR();
    const webR = new WebR({ baseUrl, interactive: false });
    try {
      await withTimeout(webR.init(), INIT_TIMEOUT_MS, 'webR start-up');
      // Before any job's code: R must not reach Node.js through the worker (WORKER_HARDENING).
      const hardened = await webR.evalRBoolean(
        `isTRUE(webr::eval_js(${rString(WORKER_HARDENING)}))`,
      );
      if (!hardened) {
        throw new Error('the webR worker could not be locked down');
      }
      this.versionString = await webR.evalRString('R.version.string');
      await webR.FS.mkdir(JOBS_DIR);
    } catch (error) {
      webR.close();
      throw new REngineUnavailableError(`webR could not be initialised: ${messageOf(error)}`);
    }
    return webR;
  }

  /** Closes an instance; the next run of its key starts a fresh one. */
  private discard(webR: WebR): void {
    webR.close();
    for (const [key, live] of this.instances) {
      if (live === webR) {
        this.instances.delete(key);
      }
    }
  }

  private runExclusive(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    return this.guarded(
      this.keyOf(request.applicationName),
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
    key: string,
    what: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    work: (webR: WebR, state: RunState) => Promise<T>,
    onTimeout: () => T,
  ): Promise<T> {
    const webR = await this.instance(key);
    this.inUse = webR;
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
          void this.instance(key).catch(() => undefined);
          throw new REngineUnavailableError(`${what} was given up while it ran`);
        }
        // Start the replacement now so the next run does not pay for it.
        void this.instance(key).catch(() => undefined);
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
      this.inUse = undefined;
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
    const maxBytes = this.config.maxRequestBytes ?? Number.MAX_SAFE_INTEGER;
    // Nothing is left in the global environment; quit() inside the function ends the instance.
    const code = isolated(`
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
      else svc$call(lib, ${app}, ${rString(request.functionName)}, ${rString(request.payload)},
                    ${maxBytes})`);
    await webR.flush(); // whatever an earlier evaluation left is not this call's
    // The function's output is not captured (it would be held whole): it is taken from webR's
    // output queue as it comes, only its progress reports are kept.
    const output = routeOutput({ onProgress: request.onProgress });
    const takeOutput = async (): Promise<void> => {
      for (const { type, data } of await webR.flush()) {
        if (type === 'stdout' && typeof data === 'string') {
          output?.('stdout', data.slice(0, WEBR_LINE_MAX_CHARS));
        }
      }
    };
    let taking = Promise.resolve();
    const outputTimer = setInterval(() => {
      taking = taking.then(takeOutput).catch(() => undefined);
    }, OUTPUT_POLL_MS);
    const shelter = await new webR.Shelter();
    try {
      let answer: unknown[];
      try {
        const captured = await shelter.captureR(code, {
          captureStreams: false,
          captureConditions: false,
          captureGraphics: false,
        });
        const result = await captured.result.toJs();
        answer = result.type === 'character' && 'values' in result ? result.values : [];
      } catch (error) {
        const refused = REFUSED_PATTERN.test(messageOf(error));
        if (!EXIT_PATTERN.test(messageOf(error)) && !refused) {
          throw error;
        }
        this.discard(webR);
        void this.instance(this.keyOf(request.applicationName)).catch(() => undefined);
        return refused
          ? { status: 'failed', reason: 'r-error', message: messageOf(error).slice(0, 4096) }
          : {
              status: 'failed',
              reason: 'session-died',
              message: `R ended while it ran ${request.functionName} (${messageOf(error)})`,
            };
      }
      return parseAnswer(answer, request.functionName, maxBytes);
    } finally {
      clearInterval(outputTimer);
      await taking;
      await takeOutput().catch(() => undefined);
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

    // The run's trace for the script's own logging (put back after the run, see isolated).
    const traceVariables = Object.entries(traceEnvironment(request.trace ?? null)).map(
      ([name, value]) => `${name} = ${rString(value)}`,
    );
    // The script gets its own environment and leaves little for the next run (see isolated).
    const code = isolated(`
      setwd(${rString(vfsDir)})
      ${traceVariables.length > 0 ? `Sys.setenv(${traceVariables.join(', ')})` : ''}
      progress <- eval(parse(text = ${rString(this.progressCode())}, keep.source = FALSE))
      svc <- new.env(parent = globalenv())
      svc$svc_progress <- progress$make(progress$printed)
      job <- eval(parse(text = ${rString(this.jobCode())}, keep.source = FALSE))
      failure <- job$run(${rString(scriptName)}, new.env(parent = svc))
      if (is.null(failure)) character(0) else failure`);
    // R's output is not captured: it reaches webR's output queue line by line as R prints it,
    // and is taken from there while the script runs, so the job's log follows it live. It goes
    // to out.log as it comes (never held), each line cut at WEBR_LINE_MAX_CHARS, the file cut at
    // R_MAX_FILE_MB.
    const log = new OutputLog(
      await open(
        join(workDir, R_LOG_FILE),
        fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW,
        0o644,
      ),
      (this.config.rMaxFileMb ?? 0) * MIB,
    );
    const output = routeOutput(request);
    const takeOutput = async (): Promise<void> => {
      const lines: string[] = [];
      for (const { type, data } of await webR.flush()) {
        if (
          (type === 'stdout' || type === 'stderr') &&
          typeof data === 'string' &&
          !state.abandoned
        ) {
          const line =
            data.length > WEBR_LINE_MAX_CHARS
              ? `${data.slice(0, WEBR_LINE_MAX_CHARS)} [line of ${data.length} characters cut]`
              : data;
          lines.push(line);
          output?.(type, line);
        }
      }
      await log.write(lines);
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
          message: typeof message === 'string' ? message.slice(0, 4096) : '',
        };
      }
    } catch (error) {
      // quit() inside the script ends R's main loop; the instance answers afterwards but is
      // not trusted with another job.
      const exit = EXIT_PATTERN.exec(messageOf(error));
      const refused = REFUSED_PATTERN.test(messageOf(error));
      if (!exit && !refused) {
        await log.close();
        throw error;
      }
      // Either way the instance is not trusted with another job (R stopped in mid-call).
      recycle = true;
      outcome = refused
        ? { status: 'failed', reason: 'r-error', message: messageOf(error).slice(0, 4096) }
        : exit?.[1] === '0'
          ? { status: 'succeeded' }
          : { status: 'failed', reason: 'exit', message: `R exited with status ${exit?.[1]}` };
    } finally {
      clearInterval(outputTimer);
      // The last lines were queued before the result: one more look takes them.
      await taking;
      await takeOutput().catch(() => undefined);
      await shelter.purge().catch(() => undefined);
    }
    await log.close();
    if (state.abandoned) {
      return outcome;
    }

    try {
      await this.copyBack(webR, vfsDir, workDir, copiedIn, state);
    } catch (error) {
      if (!(error instanceof ReadBackLimitError)) {
        throw error;
      }
      outcome = { status: 'failed', reason: 'limit', message: error.message };
    }
    if (state.abandoned) {
      return outcome;
    }
    // JavaScript's FS, not R's unlink: R's functions are the job's to redefine.
    await removeVfsTree(webR, vfsDir).catch(() => undefined);
    if (recycle) {
      this.discard(webR);
      void this.instance(this.keyOf(request.applicationName)).catch(() => undefined);
    }
    return outcome;
  }

  /**
   * Copies what the run left in its VFS directory back to the host directory, bounded. The
   * listing and the file types come from webR's file system (JavaScript), not from R, whose
   * functions the job may have redefined; only regular files cross, under names the host can
   * hold. Files are counted (ZIP_MAX_ENTRIES) and measured as they are read (R_MAX_FILE_MB one,
   * R_MAX_WRITE_MB all): a limit exceeded is the job's error result, naming it, and nothing is
   * written back then.
   */
  private async copyBack(
    webR: WebR,
    vfsDir: string,
    workDir: string,
    copiedIn: Map<string, Buffer>,
    state: RunState,
  ): Promise<void> {
    const maxEntries = this.config.zipMaxEntries ?? Number.MAX_SAFE_INTEGER;
    const maxFile = (this.config.rMaxFileMb ?? 0) * MIB || Number.MAX_SAFE_INTEGER;
    const maxTotal = (this.config.rMaxWriteMb ?? 0) * MIB || Number.MAX_SAFE_INTEGER;
    const produced: string[] = [];
    const walk = (node: FsTree, prefix: string): void => {
      for (const [name, child] of Object.entries(node.contents ?? {})) {
        const path = prefix ? `${prefix}/${name}` : name;
        const type = child.mode & S_IFMT;
        if (type === S_IFDIR) {
          walk(child, path);
        } else if (type === S_IFREG && path !== R_LOG_FILE) {
          produced.push(path);
          if (produced.length > maxEntries) {
            throw new ReadBackLimitError(
              `the job left more than ZIP_MAX_ENTRIES (${maxEntries}) files`,
            );
          }
        }
      }
    };
    walk(await webR.FS.lookupPath(vfsDir), '');
    for (const path of produced) {
      const problem = badHostPath(path);
      if (problem) {
        throw new ReadBackLimitError(
          `the job left a file whose name ${problem}: ${JSON.stringify(path.slice(0, 200))}`,
        );
      }
    }
    const changed = new Map<string, Buffer>();
    let total = 0;
    for (const path of produced) {
      const bytes = await webR.FS.readFile(posix.join(vfsDir, path));
      if (state.abandoned) {
        return;
      }
      if (bytes.byteLength > maxFile) {
        throw new ReadBackLimitError(
          `the job's file ${JSON.stringify(path.slice(0, 200))} has ${bytes.byteLength} bytes, more than R_MAX_FILE_MB (${maxFile / MIB} MiB)`,
        );
      }
      total += bytes.byteLength;
      if (total > maxTotal) {
        throw new ReadBackLimitError(
          `the job's files have more than R_MAX_WRITE_MB (${maxTotal / MIB} MiB) in all`,
        );
      }
      const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      if (!copiedIn.get(path)?.equals(data)) {
        changed.set(path, data);
      }
    }
    // A file the script deleted is gone from the host too, as it would be with native R; first,
    // so that a file the script replaced by a directory (or back) can be written.
    const kept = new Set(produced);
    for (const path of copiedIn.keys()) {
      if (!kept.has(path) && !state.abandoned) {
        await rm(join(workDir, path), { force: true, recursive: true });
      }
    }
    const root = resolve(workDir);
    for (const [path, data] of changed) {
      const target = resolve(root, path);
      if (state.abandoned || !target.startsWith(root + sep)) {
        continue;
      }
      await mkdir(dirname(target), { recursive: true });
      const file = await open(
        target,
        fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW,
        0o644,
      );
      try {
        await file.writeFile(data);
      } finally {
        await file.close();
      }
    }
  }
}

/** A node of webR's file system as lookupPath gives it. */
interface FsTree {
  mode: number;
  contents?: Record<string, FsTree>;
}

/** Removes a VFS directory through webR's FS (a link is removed, never followed). */
async function removeVfsTree(webR: WebR, dir: string): Promise<void> {
  const node: FsTree = await webR.FS.lookupPath(dir);
  for (const [name, child] of Object.entries(node.contents ?? {})) {
    const path = `${dir}/${name}`;
    if ((child.mode & S_IFMT) === S_IFDIR) {
      await removeVfsTree(webR, path);
    } else {
      await webR.FS.unlink(path);
    }
  }
  await webR.FS.rmdir(dir);
}

/**
 * A function's answer as R handed it back, not trusted: c("ok", value) with a value of at most
 * maxBytes, or c("fail", reason, message) with a known reason; anything else is an R error.
 */
function parseAnswer(
  answer: unknown[],
  functionName: string,
  maxBytes: number,
): FunctionCallOutcome {
  if (answer.length === 2 && answer[0] === 'ok' && typeof answer[1] === 'string') {
    const bytes = Buffer.byteLength(answer[1]);
    if (bytes > maxBytes) {
      return {
        status: 'failed',
        reason: 'too-large',
        message: `${functionName} returned ${bytes} bytes, more than MAX_REQUEST_BYTES (${maxBytes} bytes)`,
      };
    }
    return { status: 'succeeded', value: answer[1] };
  }
  if (
    answer.length === 3 &&
    answer[0] === 'fail' &&
    typeof answer[1] === 'string' &&
    CALL_FAILURES.has(answer[1]) &&
    typeof answer[2] === 'string'
  ) {
    return {
      status: 'failed',
      reason: answer[1] as FunctionCallFailure,
      message: answer[2].slice(0, 4096),
    };
  }
  return { status: 'failed', reason: 'r-error', message: 'malformed answer from R' };
}

const CALL_FAILURES = new Set<string>(['r-error', 'missing-function', 'not-a-string', 'too-large']);

/** out.log, written as R's output comes and cut at a size (0: no limit). */
class OutputLog {
  private written = 0;
  private full = false;

  constructor(
    private readonly file: FileHandle,
    private readonly maxBytes: number,
  ) {}

  async write(lines: string[]): Promise<void> {
    if (this.full || lines.length === 0) {
      return;
    }
    let text = lines.map((line) => `${line}\n`).join('');
    let bytes = Buffer.byteLength(text);
    if (this.maxBytes > 0 && this.written + bytes > this.maxBytes) {
      this.full = true;
      text = `${Buffer.from(text)
        .subarray(0, Math.max(0, this.maxBytes - this.written))
        .toString('utf8')}\n[output cut at R_MAX_FILE_MB]\n`;
      bytes = Buffer.byteLength(text);
    }
    this.written += bytes;
    await this.file.write(text);
  }

  async close(): Promise<void> {
    await this.file.close().catch(() => undefined);
  }
}
