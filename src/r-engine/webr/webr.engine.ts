import type { WebR } from 'webr';
import type { REngineConfig } from '../../config/config-slices';
import type {
  FunctionCallEngine,
  FunctionCallOutcome,
  FunctionCallRequest,
  FunctionCallStats,
} from '../function-call-engine';
import type { FunctionLibrarySource } from '../function-library';
import {
  REngineUnavailableError,
  type REngine,
  type ScriptRunOutcome,
  type ScriptRunRequest,
} from '../r-engine';
import type { RunState } from './webr-files';
import { JOBS_DIR, WebREvaluator, type WebRConfig } from './webr-evaluation';
import { loadWebR, messageOf, rString, withTimeout, WORKER_HARDENING } from './webr-worker';

/** Instances kept warm with WEBR_INSTANCES=per-application; the least recently used goes. */
export const WEBR_MAX_WARM_INSTANCES = 4;
const SHARED_INSTANCE = 'shared';
/** per-application: an instance that has run no job yet (start-up, health), for the next one. */
const SPARE_INSTANCE = 'spare';
const INIT_TIMEOUT_MS = 60_000;
const HEALTH_TIMEOUT_MS = 10_000;

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
  /** Nor environments: an application with one is refused on webR (docs/environments.md). */
  readonly environments = null;
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
  private libraries: FunctionLibrarySource | undefined;
  private waitingCalls = 0;
  private readonly evaluator: WebREvaluator;

  constructor(private readonly config: WebRConfig = {}) {
    this.evaluator = new WebREvaluator(config);
  }

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
  functionCalls(_config: REngineConfig, libraries: FunctionLibrarySource): FunctionCallEngine {
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
          (webR) =>
            this.evaluator.callFunction(webR, request, library.files, () =>
              this.replace(webR, request.applicationName),
            ),
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

  /** Closes an instance that ended R and starts its application's next one now. */
  private replace(webR: WebR, applicationName: string | undefined): void {
    this.discard(webR);
    void this.instance(this.keyOf(applicationName)).catch(() => undefined);
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
      (webR, state) =>
        this.evaluator.runScript(webR, request, state, () =>
          this.replace(webR, request.applicationName),
        ),
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
}
