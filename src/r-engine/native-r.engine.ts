import { type ChildProcess } from 'node:child_process';
import { AsyncResource } from 'node:async_hooks';
import { Logger } from '@nestjs/common';
import { chmodSync, lchownSync, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, constants as osConstants, tmpdir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { bytesUnder, emptyDirectory, listOutputFiles, removeTree } from './job-tree';
import { LineSplitter } from './output-lines';
import { routeOutput } from './job-progress';
import {
  closeDescriptor,
  collectReport,
  FifoPool,
  openFifoForReading,
  openFifoForWriting,
  readFifo,
} from './run-channel';
import type { AppConfig } from '../config/app-config';
import { ForkServer, type ForkRunStatus } from './fork-server';
import {
  evaluation,
  isExecutable,
  killProcessGroup,
  probeSandbox,
  RLauncher,
  type RLimits,
  type SandboxKind,
} from './r-launcher';
import { PackageLibrary } from './package-library';
import { rSourcePath } from './r-sources';
import { traceEnvironment } from '../tracing/tracing';
import {
  REngineUnavailableError,
  type REngine,
  type ScriptRunOutcome,
  type ScriptRunRequest,
} from './r-engine';

export type NativeRConfig = Pick<AppConfig, 'rHome' | 'rscriptPath' | 'rMemoryLimitMb'> &
  Partial<
    Pick<
      AppConfig,
      | 'rScriptMode'
      | 'jobTimeoutSeconds'
      | 'rSandbox'
      | 'authMode'
      | 'rCpuLimitSeconds'
      | 'rMaxProcesses'
      | 'rMaxFileMb'
      | 'rMaxWriteMb'
      | 'scriptSlots'
      | 'applicationSlots'
    >
  > & {
    /**
     * Whether this node runs script jobs (false on ROLE=api: its engine serves function calls
     * only, and starts no fork servers).
     */
    scriptJobs?: boolean;
  };

export type ScriptMode = 'fork' | 'spawn';

const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
const PROBE_TIMEOUT_MS = 30_000;
const HEALTH_TIMEOUT_MS = 10_000;
/** After R exits, how long to wait for its pipes to drain before giving up on them. */
const DRAIN_GRACE_MS = 1_000;
/** The CPU backstop of the fork server when the configuration names no job time limit. */
const DEFAULT_JOB_TIMEOUT_S = 600;

interface EngineLogger {
  log(message: string): void;
  warn(message: string): void;
}

/** The Rscript that config names (RSCRIPT_PATH, then R_HOME), else the first on PATH. */
function chosenRscript(config: NativeRConfig): string {
  if (config.rscriptPath) {
    return config.rscriptPath;
  }
  if (config.rHome) {
    return join(config.rHome, 'bin', 'Rscript');
  }
  for (const dir of (process.env.PATH ?? DEFAULT_PATH).split(delimiter)) {
    if (dir && isExecutable(join(dir, 'Rscript'))) {
      return join(dir, 'Rscript');
    }
  }
  return 'Rscript';
}

/** The absolute path of a usable Rscript, or null when none is configured or on PATH. */
export function findRscript(config: NativeRConfig): string | null {
  const path = chosenRscript(config);
  return isAbsolute(path) && isExecutable(path) ? path : null;
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Resolves when the child has exited and its pipes are drained (or the grace has passed). */
function waitForExit(child: ChildProcess): Promise<Exit> {
  return new Promise((resolve, reject) => {
    let exit: Exit | undefined;
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      // A grandchild that left the process group can hold the pipes open; do not wait for it.
      setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        resolve({ code, signal });
      }, DRAIN_GRACE_MS).unref();
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) =>
      resolve(exit ?? { code, signal }),
    );
  });
}

function isSpawnFailure(error: unknown): error is NodeJS.ErrnoException {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'EACCES' || code === 'EPERM' || code === 'ENOEXEC';
}

/** The script mode to use: fork where the configuration asks for it and the OS can fork R. */
export function effectiveScriptMode(config: NativeRConfig): ScriptMode {
  return (config.rScriptMode ?? 'fork') === 'fork' && process.platform === 'linux'
    ? 'fork'
    : 'spawn';
}

/** A sandboxed fork server and the directory its jobs run in, one job at a time. */
interface Slot {
  server: ForkServer;
  /**
   * Bound into the server's sandbox, owned by the service and not writable by the sandbox user:
   * work/ (the job's directory while it runs, the job's), private/ (the service's) holding tmp/
   * (the job's), server-tmp/ (the server's R session directory, locked once it is ready).
   */
  dir: string;
  /** The FIFOs of the slot's runs, in its control directory (bound read-only, unlistable). */
  fifos: FifoPool;
  busy: boolean;
  /** The application of the last job the current server ran (none since it started). */
  application: string | null;
  /** The server's R session directory (in server-tmp), emptied after every job. */
  sessionDirs: string[];
}

/** A job's outcome as the run reported it, before limits are named. */
interface RunReport {
  kind: 'ok' | 'r-error' | 'none';
  message: string;
  cpuMs?: number;
  /** Bytes R and what it waited for wrote to files (the kernel's write_bytes), where known. */
  writtenBytes?: number;
}

/** The limits a run is measured against, for the messages that name them. */
interface JobLimits {
  timeoutMs: number;
  cpuSeconds: number;
  memoryMb: number;
  processes: number;
  fileMb: number;
  writeMb: number;
}

/**
 * Real R. In `fork` mode (R_SCRIPT_MODE, the default on Linux) warm R parents, the fork servers
 * (one per slot, each in a sandbox of its own), fork a child per script job; in `spawn` mode
 * each job is a fresh Rscript process. Either way every process starts through the RLauncher:
 * a sandbox (R_SANDBOX), a minimal environment, limits, and a kill of everything on timeout.
 */
export class NativeREngine implements REngine {
  readonly kind = 'native' as const;
  private readonly rscript: string;
  /** Each running job's abort handle and a promise that settles when its R has gone. */
  private readonly running = new Map<AbortController, Promise<void>>();
  private cachedVersion: string | undefined;
  private scriptMode: ScriptMode;
  private launcherInstance: RLauncher;
  private readonly slots: Slot[] = [];
  private readonly slotWaiters: Array<(slot: Slot) => void> = [];
  /** Slots being cleaned after a job, released when done. */
  private readonly recycling = new Set<Promise<void>>();
  /** Private to the service (0711: the sandbox user may pass, never list): slots, runs. */
  private runtimeRoot: string | undefined;
  private packageLibrary: PackageLibrary | null = null;
  /** The report FIFOs of spawned runs (the fork slots have their own). */
  private spawnFifos: FifoPool | null = null;

  constructor(
    private readonly config: NativeRConfig,
    private readonly logger: EngineLogger = new Logger('REngine'),
  ) {
    this.rscript = findRscript(config) ?? chosenRscript(config);
    this.scriptMode = effectiveScriptMode(config);
    this.launcherInstance = this.newLauncher('none');
  }

  /** Scripts it runs at once: one per worker slot (each fork server serves one job at a time). */
  get maxConcurrentRuns(): number {
    const extra = Object.values(this.config.applicationSlots ?? {}).reduce((a, b) => a + b, 0);
    return Math.max(1, (this.config.scriptSlots ?? 2) + extra);
  }

  /** How script jobs run now: `spawn` also when fork was asked for but the server cannot start. */
  get mode(): ScriptMode {
    return this.scriptMode;
  }

  /** The sandbox in force (known after start()). */
  get sandbox(): SandboxKind {
    return this.launcherInstance.sandbox;
  }

  /**
   * The applications' packages on this node, under the runtime directory: empty at each start,
   * filled again from the database (PackageSyncService).
   */
  get packages(): PackageLibrary | null {
    return this.packageLibrary;
  }

  /** The launcher every native R process of this node starts through (sessions too). */
  get launcher(): RLauncher {
    return this.launcherInstance;
  }

  private markStarted!: () => void;
  /** Resolves once start() has chosen the sandbox: the launcher is final from then on. */
  readonly started: Promise<void> = new Promise((resolve) => (this.markStarted = resolve));

  /** The engine's private runtime directory (slots, runs, R programs) while it runs, for tests. */
  get runtimeDirectory(): string | undefined {
    return this.runtimeRoot;
  }

  /** Host pid of the first fork server's R process (0 when there is none), for tests. */
  get forkServerPid(): number {
    return this.slots[0]?.server.pid ?? 0;
  }

  async start(): Promise<void> {
    this.cachedVersion = undefined;
    const sandbox = await this.chooseSandbox();
    if (!this.runtimeRoot) {
      this.runtimeRoot = await mkdtemp(join(tmpdir(), 'svc-r-'));
      await chmod(this.runtimeRoot, 0o711);
      await cp(dirname(rSourcePath('session.R')), join(this.runtimeRoot, 'r'), { recursive: true });
      await chmod(join(this.runtimeRoot, 'r'), 0o755);
      await mkdir(join(this.runtimeRoot, 'packages'), { mode: 0o755 });
      this.packageLibrary = new PackageLibrary(
        join(this.runtimeRoot, 'packages'),
        () => this.launcher,
      );
    }
    this.launcherInstance = this.newLauncher(sandbox);
    this.spawnFifos = null;
    this.markStarted();
    if (this.scriptMode === 'fork' && this.config.scriptJobs !== false) {
      try {
        await this.startForkServers();
        return;
      } catch (error) {
        await this.stopForkServers();
        this.logger.warn(
          `R_SCRIPT_MODE=fork: the fork server cannot start (${(error as Error).message}); running each script job in a fresh R process instead`,
        );
        this.scriptMode = 'spawn';
      }
    }
    await this.version().catch((error: unknown) => {
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(
        `R cannot run: ${this.rscript} failed (${reason}); set RSCRIPT_PATH to an Rscript executable or R_HOME to an R installation, or set R_ENGINE=webr`,
      );
    });
  }

  async version(): Promise<string> {
    const server = this.slots[0]?.server;
    if (server?.version) {
      return server.version;
    }
    this.cachedVersion ??= (await this.evaluate('cat(R.version.string)', PROBE_TIMEOUT_MS)).trim();
    return this.cachedVersion;
  }

  async healthy(): Promise<boolean> {
    // A slot whose server keeps failing to start cannot run jobs: the node is not healthy.
    if (this.slots.some((slot) => !slot.server.usable)) {
      return false;
    }
    try {
      const server = this.slots[0]?.server;
      if (server) {
        return (await server.ping()).trim() === '2';
      }
      return (await this.evaluate('cat(1+1)', HEALTH_TIMEOUT_MS)).trim() === '2';
    } catch {
      return false;
    }
  }

  async runScript(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    const { jobId, workDir } = request;
    if (!statSync(workDir).isDirectory()) {
      throw new Error(`job ${jobId}: ${workDir} is not a directory`);
    }
    // Jobs of applications allowed the network run in a fresh, networked sandbox: the fork
    // servers' sandboxes have no network.
    if (this.slots.length > 0 && !request.network) {
      return this.runForked(request);
    }
    return this.runSpawned(request);
  }

  async stop(): Promise<void> {
    const runs = [...this.running];
    runs.forEach(([controller]) => controller.abort('stopped'));
    await Promise.all(runs.map(([, settled]) => settled));
    await Promise.all([...this.recycling]);
    await this.stopForkServers();
    await this.spawnFifos?.close();
    if (this.runtimeRoot) {
      await rm(this.runtimeRoot, { recursive: true, force: true });
      this.runtimeRoot = undefined;
      this.packageLibrary = null;
      this.spawnFifos = null;
    }
  }

  /** R_SANDBOX resolved: bwrap when asked or (auto) when it works; start-up fails as configured. */
  private async chooseSandbox(): Promise<SandboxKind> {
    const setting = this.config.rSandbox ?? 'auto';
    if (setting === 'none') {
      return 'none';
    }
    const dir = await mkdtemp(join(tmpdir(), 'svc-probe-'));
    let problem: string | null;
    try {
      problem = probeSandbox({ rscript: this.rscript, rHome: this.config.rHome }, dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    if (problem === null) {
      return 'bwrap';
    }
    const install =
      'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and let it make namespaces (in Docker: docs/operations.md#the-r-sandbox; in Kubernetes the pod needs hostUsers: false, seccompProfile and appArmorProfile Unconfined and procMount: Unmasked: docs/operations.md#kubernetes)';
    if (setting === 'bwrap') {
      throw new Error(`R_SANDBOX=bwrap: ${problem}; ${install}, or set R_SANDBOX=none`);
    }
    const authMode = this.config.authMode ?? 'none';
    if (authMode !== 'none') {
      throw new Error(
        `R_SANDBOX=auto: no sandbox for R (${problem}) while AUTH_MODE=${authMode}: ${install}, or set R_SANDBOX=none to accept that R code runs with the service's rights`,
      );
    }
    this.logger.warn(
      `no sandbox for R (${problem}): R code runs with the service's rights and can read its files, secrets and network; ${install}`,
    );
    return 'none';
  }

  private newLauncher(sandbox: SandboxKind): RLauncher {
    return new RLauncher({
      rscript: this.rscript,
      rHome: this.config.rHome,
      sandbox,
      sourcesDir: this.runtimeRoot ? join(this.runtimeRoot, 'r') : null,
      runtimeDir: this.runtimeRoot ?? undefined,
      warn: (message) => this.logger.warn(message),
    });
  }

  /** The job's application's package library ('' when there is none to put first). */
  private libraryDir(request: ScriptRunRequest): string {
    return this.packageLibrary && request.applicationName
      ? this.packageLibrary.dirOf(request.applicationName)
      : '';
  }

  private limits(timeoutMs: number): JobLimits {
    const cpuSeconds =
      (this.config.rCpuLimitSeconds ?? 0) > 0
        ? (this.config.rCpuLimitSeconds as number)
        : Math.ceil(timeoutMs / 1000) * availableParallelism() + 5;
    return {
      timeoutMs,
      cpuSeconds,
      memoryMb: this.config.rMemoryLimitMb,
      processes: this.config.rMaxProcesses ?? 0,
      fileMb: this.config.rMaxFileMb ?? 0,
      writeMb: this.config.rMaxWriteMb ?? 0,
    };
  }

  private rLimits(limits: JobLimits): RLimits {
    return {
      cpuSeconds: limits.cpuSeconds,
      memoryBytes: limits.memoryMb * MIB,
      processes: limits.processes,
      fileBytes: limits.fileMb * MIB,
    };
  }

  /**
   * A directory for one run under the runtime root. In a sandbox the job's directory moves in (a
   * rename: same file system, no copy), so the sandbox binds only private paths (a fork server's
   * sandbox is made before its jobs exist), and moves back after. `parent` and `private/` are
   * the service's (0711: the sandbox user passes, never writes), so a job cannot swap the names
   * the service moves or cleans for links; only `work/` and `private/tmp/` are the job's.
   * Without a sandbox the work directory stays where it is. `private/tmp` is made here unless
   * the caller prepared it (a fork slot does that ahead of its next job).
   */
  private async withRunDirectory<T>(
    workDir: string,
    parent: string,
    privatePrepared: boolean,
    body: (runWork: string, tmp: string) => Promise<T>,
  ): Promise<T> {
    const sandboxed = this.launcherInstance.sandbox === 'bwrap';
    const runWork = sandboxed ? join(parent, 'work') : workDir;
    if (!privatePrepared) {
      this.preparePrivate(parent);
    }
    let moved = false;
    try {
      if (sandboxed) {
        renameSync(workDir, runWork);
        moved = true;
      }
      this.launcherInstance.makeWritable(runWork);
      return await body(runWork, join(parent, 'private', 'tmp'));
    } finally {
      if (moved) {
        // The name work/ is in the service's directory: the job cannot have replaced it.
        renameSync(runWork, workDir);
      }
    }
  }

  /**
   * A run's private/ (the service's, 0711) and private/tmp (the job's temporary directory,
   * handed to the sandbox user). Made fresh: the caller has removed an earlier one.
   */
  private preparePrivate(parent: string): void {
    const privateDir = join(parent, 'private');
    mkdirSync(privateDir, { mode: 0o711 });
    chmodSync(parent, 0o711);
    const tmp = join(privateDir, 'tmp');
    mkdirSync(tmp, { mode: 0o700 });
    this.launcherInstance.makeWritable(tmp);
  }

  private async runSpawned(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    // prlimit would turn a missing Rscript into an exit status; check first so it stays retryable.
    if (!isExecutable(this.rscript)) {
      throw new REngineUnavailableError(`Rscript not found or not executable: ${this.rscript}`);
    }
    const root = this.runtimeRoot ?? tmpdir();
    const parent = await mkdtemp(join(root, 'run-'));
    const limits = this.limits(request.timeoutMs);
    try {
      return await this.withRunDirectory(request.workDir, parent, false, async (work, tmp) => {
        // R's report of its end comes on descriptor 3, a FIFO the service made and reads.
        const fifos = await this.spawnFifoPool();
        const fifo = await fifos.take();
        const reportFd = await openFifoForReading(fifo);
        const report = collectReport(reportFd);
        const controller = new AbortController();
        let child: ChildProcess;
        try {
          const writeFd = await openFifoForWriting(fifo);
          try {
            child = this.launcherInstance.spawn({
              args: [
                this.launcherInstance.rSource('script-wrapper.R'),
                request.scriptName,
                String(limits.cpuSeconds),
                this.launcherInstance.rSource('progress.R'),
                this.libraryDir(request),
              ],
              cwd: work,
              home: work,
              tmp,
              writable: [work, tmp],
              readable: this.packageLibrary ? [this.packageLibrary.root] : [],
              network: request.network === true,
              limits: this.rLimits(limits),
              env: traceEnvironment(request.trace ?? null),
              stdio: ['ignore', 'pipe', 'pipe', writeFd],
            });
          } finally {
            // The child has its own copy; the report ends when R and what it started are gone.
            await closeDescriptor(writeFd);
          }
        } catch (error) {
          await report.stop(0);
          await fifos.release(fifo);
          throw isSpawnFailure(error) ? new REngineUnavailableError(error.message) : error;
        }
        let settle = (): void => undefined;
        const settled = new Promise<void>((resolve) => (settle = resolve));
        this.running.set(controller, settled);
        controller.signal.addEventListener('abort', () => killProcessGroup(child), {
          once: true,
        });
        // The worker gave the job up (lease lost, shutdown): stop R as if the engine stopped.
        const giveUp = (): void => controller.abort('stopped');
        request.signal?.addEventListener('abort', giveUp, { once: true });
        if (request.signal?.aborted) {
          giveUp(); // given up (a cancel) while R was being started
        }
        const timer = setTimeout(() => controller.abort('timeout'), request.timeoutMs);
        const watch = watchWrites([work, tmp], limits.writeMb, () => controller.abort('write'));
        const output = routeOutput(request);
        const scan = new OutputScan();
        for (const stream of ['stdout', 'stderr'] as const) {
          const splitter = new LineSplitter((line) => {
            scan.line(line);
            output?.(stream, line);
          });
          child[stream]?.on('data', (chunk: Buffer) => splitter.push(chunk));
          child[stream]?.on('end', () => splitter.end());
        }
        let exit: Exit;
        let reportBytes: Buffer;
        try {
          exit = await waitForExit(child);
        } catch (error) {
          throw isSpawnFailure(error)
            ? new REngineUnavailableError(`cannot start ${this.rscript}: ${error.message}`)
            : error;
        } finally {
          clearTimeout(timer);
          watch.stop();
          request.signal?.removeEventListener('abort', giveUp);
          // Background processes the script left behind die with the job (and its sandbox).
          killProcessGroup(child);
          reportBytes = await report.stop(DRAIN_GRACE_MS);
          await fifos.release(fifo);
          this.running.delete(controller);
          settle();
        }
        const runReport = spawnReport(reportBytes);
        const outcome = this.outcome(controller.signal, exit, runReport, limits);
        return namedLimit(outcome, limits, work, tmp, scan, runReport.writtenBytes);
      });
    } finally {
      await removeTree(parent).catch((error: Error) =>
        this.logger.warn(`could not remove a run's directory: ${error.message}`),
      );
    }
  }

  /** The spawned runs' FIFOs, in a directory of the service's (made on first use). */
  private async spawnFifoPool(): Promise<FifoPool> {
    if (!this.spawnFifos) {
      const dir = this.runtimeRoot
        ? join(this.runtimeRoot, 'fifos')
        : await mkdtemp(join(tmpdir(), 'svc-fifos-'));
      await mkdir(dir, { recursive: true, mode: 0o711 });
      await chmod(dir, 0o711);
      this.spawnFifos = new FifoPool(dir, this.launcherInstance.sandboxUid);
    }
    return this.spawnFifos;
  }

  private async startForkServers(): Promise<void> {
    if (!isExecutable(this.rscript)) {
      throw new Error(`Rscript not found or not executable: ${this.rscript}`);
    }
    const root = this.runtimeRoot as string;
    const timeoutMs = (this.config.jobTimeoutSeconds ?? DEFAULT_JOB_TIMEOUT_S) * 1000;
    const limits = this.limits(timeoutMs);
    const sandboxed = this.launcherInstance.sandbox === 'bwrap';
    const started: Slot[] = [];
    for (let index = 0; index < this.maxConcurrentRuns; index += 1) {
      const dir = join(root, `slot-${index}`);
      const control = join(root, `control-${index}`);
      await mkdir(dir, { mode: 0o711 });
      await mkdir(control, { mode: 0o711 });
      const slot: Slot = {
        server: null as unknown as ForkServer,
        dir,
        fifos: new FifoPool(control, this.launcherInstance.sandboxUid),
        busy: false,
        application: null,
        sessionDirs: [],
      };
      slot.server = new ForkServer({
        launch: (env) =>
          this.launcherInstance.spawn({
            args: [
              this.launcherInstance.rSource('fork-server.R'),
              this.launcherInstance.rSource('progress.R'),
            ],
            cwd: dir,
            home: dir,
            tmp: join(dir, SERVER_TMP),
            writable: [dir],
            readable: [control, ...(this.packageLibrary ? [this.packageLibrary.root] : [])],
            network: false,
            limits: this.rLimits(limits),
            env,
            stdio: ['ignore', 'pipe', 'pipe'],
            // Its jobs are its children: they must not read or write its memory.
            undumpable: true,
          }),
        controlDir: control,
        sandboxUid: this.launcherInstance.sandboxUid,
        sandboxed,
        cpuLimitSeconds: limits.cpuSeconds,
        // Each server starts in a slot made as new; once it is ready, its session directory is
        // the only place in server-tmp a job can write (emptied after every job).
        prepareLaunch: () => this.resetSlot(dir),
        onReady: () => Promise.resolve(this.lockServerTmp(slot)),
        log: this.logger,
      });
      started.push(slot);
      this.slots.push(slot);
    }
    await Promise.all(started.map((slot) => slot.server.start()));
  }

  /** A slot's directories made as new: nothing of an earlier server or job is left. */
  private async resetSlot(dir: string): Promise<void> {
    for (const name of ['work', 'private', SERVER_TMP]) {
      await removeTree(join(dir, name)).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') {
          throw error;
        }
      });
    }
    chmodSync(dir, 0o711);
    const serverTmp = join(dir, SERVER_TMP);
    mkdirSync(serverTmp, { mode: 0o700 });
    this.launcherInstance.makeWritable(serverTmp);
    this.preparePrivate(dir);
  }

  /**
   * Once the server is ready (only it has run in the slot so far), notes its R session
   * directory and hands server-tmp back to the service: jobs may still write in the session
   * directory (R's C code, such as the pdf device, puts its temporary files there), which is
   * emptied after every job, but can neither replace it nor leave anything beside it.
   */
  private lockServerTmp(slot: Slot): void {
    const serverTmp = join(slot.dir, SERVER_TMP);
    slot.sessionDirs = readdirSync(serverTmp).map((name) => join(serverTmp, name));
    if (this.launcherInstance.sandboxUid !== null) {
      lchownSync(serverTmp, 0, 0);
      chmodSync(serverTmp, 0o711);
    }
  }

  private async stopForkServers(): Promise<void> {
    const slots = this.slots.splice(0);
    await Promise.all(slots.map((slot) => slot.server.stop()));
    await Promise.all(slots.map((slot) => slot.fifos.close()));
  }

  /**
   * A free slot, the one that last served the job's application first, then one whose server
   * has served no job yet: a slot that served another application is recycled before it runs
   * this one (see runForked).
   */
  private acquireSlot(application: string): Promise<Slot> {
    const free = this.slots.filter((slot) => !slot.busy);
    const slot =
      free.find((s) => s.application === application) ??
      free.find((s) => s.application === null) ??
      free[0];
    if (slot) {
      slot.busy = true;
      return Promise.resolve(slot);
    }
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  private releaseSlot(slot: Slot): void {
    const next = this.slotWaiters.shift();
    if (next) {
      next(slot);
    } else {
      slot.busy = false;
    }
  }

  /**
   * Runs a script in a child forked by a slot's fork server. The child's output comes through
   * a FIFO the service made and reads, its end through the server's protocol: nothing the job
   * can write is read by the service but through a descriptor the service opened.
   */
  private async runForked(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    const application = request.applicationName ?? '';
    const slot = await this.acquireSlot(application);
    const limits = this.limits(request.timeoutMs);
    let recycle = false;
    try {
      // Applications never share a sandbox: a server that ran another application's job is
      // replaced first (a new IPC namespace, new memory, a fresh session directory).
      if (slot.application !== null && slot.application !== application) {
        await slot.server.recycle();
      }
      slot.application = application;
      return await this.withRunDirectory(request.workDir, slot.dir, true, async (work, tmp) => {
        const controller = new AbortController();
        const stopped = (): void => controller.abort('stopped');
        request.signal?.addEventListener('abort', stopped, { once: true });
        const watch = watchWrites([work, tmp], limits.writeMb, () => controller.abort('write'));
        const output = routeOutput(request);
        const scan = new OutputScan();
        const lines = new LineSplitter((line) => {
          scan.line(line);
          output?.('stdout', line);
        });
        const fifo = await slot.fifos.take();
        const fd = await openFifoForReading(fifo);
        // The server reaps the job's child before it reports the end, so the bytes the child
        // (and what it waited for) wrote to files are added to the server's count by then.
        const writtenBefore = await slot.server.writtenBytes();
        let reader: ReturnType<typeof readFifo> | undefined;
        let status: ForkRunStatus;
        try {
          status = await slot.server.run({
            workDir: work,
            scriptName: request.scriptName,
            privateDir: dirname(tmp),
            output: fifo,
            // The server holds a writer from before the fork: reading starts now, and ends
            // when the job's last process has gone.
            // Bound to the job's context: the lines are logged with the job's id.
            onStarted: AsyncResource.bind(() => {
              reader ??= readFifo(fd, (chunk) => lines.push(chunk));
            }),
            libraryDir: this.libraryDir(request),
            traceparent: request.trace?.traceparent,
            timeoutMs: request.timeoutMs,
            signal: request.signal?.aborted ? request.signal : controller.signal,
          });
        } finally {
          watch.stop();
          if (reader) {
            await reader.stop(DRAIN_GRACE_MS);
          } else {
            await closeDescriptor(fd);
          }
          lines.end();
          await slot.fifos.release(fifo);
          request.signal?.removeEventListener('abort', stopped);
        }
        // The child could not prepare its run: the server is not trusted with the next one.
        recycle = status.kind === 'setup';
        if (controller.signal.reason === 'write' && status.kind === 'killed') {
          return writeLimitOutcome(limits);
        }
        const writtenAfter = await slot.server.writtenBytes();
        const written =
          writtenBefore !== undefined && writtenAfter !== undefined
            ? writtenAfter - writtenBefore
            : undefined;
        return namedLimit(forkOutcome(status, request.timeoutMs), limits, work, tmp, scan, written);
      });
    } finally {
      this.recycleSlot(slot, recycle);
    }
  }

  /**
   * Cleans a slot after a job (the job's temporary directory, never following what the job put
   * there), then releases it: after the job's outcome is known, so the client does not wait for
   * it, and before the slot's next job. When that fails, or the run asked for it, the server
   * and its slot are made anew; a slot that cannot be is reported by the health check.
   */
  private recycleSlot(slot: Slot, recycle: boolean): void {
    const tmp = join(slot.dir, 'private', 'tmp');
    const clean = async (): Promise<void> => {
      for (const dir of [tmp, ...slot.sessionDirs]) {
        await emptyDirectory(dir);
      }
    };
    const recycled = (recycle ? Promise.reject(new Error('recycle')) : clean())
      .catch(async (error: Error) => {
        if (!recycle) {
          this.logger.warn(`could not clean a fork server's slot (${error.message}); recycling it`);
        }
        slot.application = null;
        await slot.server.recycle();
      })
      .catch((error: Error) =>
        this.logger.warn(`could not make a fork server's slot anew: ${error.message}`),
      )
      .finally(() => {
        this.recycling.delete(recycled);
        this.releaseSlot(slot);
      });
    this.recycling.add(recycled);
  }

  private outcome(
    signal: AbortSignal,
    exit: Exit,
    report: RunReport,
    limits: JobLimits,
  ): ScriptRunOutcome {
    const usage = report.cpuMs === undefined ? {} : { rCpuMs: report.cpuMs };
    if (signal.aborted && signal.reason === 'timeout') {
      return {
        status: 'failed',
        reason: 'timeout',
        message: `the job exceeded its time limit of ${limits.timeoutMs / 1000} s`,
      };
    }
    if (signal.aborted && signal.reason === 'write') {
      return writeLimitOutcome(limits);
    }
    if (signal.aborted) {
      throw new REngineUnavailableError('the R engine was stopped while the job ran');
    }
    if (report.kind === 'r-error') {
      return { status: 'failed', reason: 'r-error', message: report.message, ...usage };
    }
    if (exit.code === 0) {
      return { status: 'succeeded', ...usage };
    }
    // bubblewrap reports R's death by a signal as the status 128 + the signal's number.
    if (exit.signal === 'SIGXCPU' || exit.code === 128 + osConstants.signals.SIGXCPU) {
      return cpuLimitOutcome(limits);
    }
    if (exit.signal === 'SIGXFSZ' || exit.code === 128 + osConstants.signals.SIGXFSZ) {
      return fileLimitOutcome(limits);
    }
    return {
      status: 'failed',
      reason: 'exit',
      message:
        exit.signal !== null
          ? `R was terminated by signal ${exit.signal}`
          : `R exited with status ${String(exit.code)}`,
      ...usage,
    };
  }

  /** Evaluates a line of R in a short-lived (sandboxed) process and returns what it printed. */
  private async evaluate(code: string, timeoutMs: number): Promise<string> {
    const dir = await mkdtemp(join(this.runtimeRoot ?? tmpdir(), 'eval-'));
    try {
      this.launcherInstance.makeWritable(dir);
      const child = this.launcherInstance.spawn(evaluation(code, dir));
      const output: Buffer[] = [];
      const errors: Buffer[] = [];
      child.stdout?.on('data', (chunk: Buffer) => output.push(chunk));
      child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk));
      const timer = setTimeout(() => killProcessGroup(child), timeoutMs);
      try {
        const exit = await waitForExit(child);
        if (exit.code !== 0) {
          const detail = Buffer.concat(errors).toString('utf8').trim().split('\n').pop();
          throw new Error(
            exit.signal !== null
              ? `killed by ${exit.signal}`
              : `exit status ${String(exit.code)}${detail ? `: ${detail}` : ''}`,
          );
        }
        return Buffer.concat(output).toString('utf8');
      } finally {
        clearTimeout(timer);
        killProcessGroup(child);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

const MIB = 1024 * 1024;
/** The fork server's own temporary directory inside its slot (R's session directory lives there). */
const SERVER_TMP = 'server-tmp';

/** How often a running job's written bytes are measured (only jobs that run this long pay). */
const WRITE_CHECK_INTERVAL_MS = 500;

/**
 * Measures what a running job has written every WRITE_CHECK_INTERVAL_MS and calls `exceeded`
 * once it passes the limit (0: no limit). RLIMIT_FSIZE caps each file; this caps their sum. The
 * measure walks the job's directories through descriptors, never following what it finds.
 */
function watchWrites(dirs: string[], limitMb: number, exceeded: () => void): { stop(): void } {
  if (limitMb <= 0) {
    return { stop: () => undefined };
  }
  let checking = false;
  const timer = setInterval(() => {
    if (checking) {
      return;
    }
    checking = true;
    void bytesUnder(dirs)
      .then((bytes) => {
        if (bytes > limitMb * MIB) {
          clearInterval(timer);
          exceeded();
        }
      })
      .catch(() => undefined)
      .finally(() => (checking = false));
  }, WRITE_CHECK_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

function writeLimitOutcome(limits: JobLimits): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job exceeded its limit of ${limits.writeMb} MiB of bytes written (R_MAX_WRITE_MB)`,
  };
}

/** What the shell, R and parallel say when the kernel refuses a fork (RLIMIT_NPROC). */
const FORK_REFUSED =
  /\b(cannot|unable to) fork\b|fork: (retry: )?Resource temporarily unavailable/i;

/** What the engine learns from R's output lines as they pass (each bounded in length). */
class OutputScan {
  forkRefused = false;

  line(text: string): void {
    if (!this.forkRefused && FORK_REFUSED.test(text)) {
      this.forkRefused = true;
    }
  }
}

/**
 * A spawned run's report from descriptor 3: "<kind> <cpu ms> <bytes written> <message>",
 * bounded and distrusted (the job may write there too: then it reports nothing usable).
 */
function spawnReport(bytes: Buffer): RunReport {
  const text = bytes.toString('utf8');
  const [kind = '', cpu = '', written = ''] = text.split(' ', 3);
  const count = (field: string): number | undefined => {
    const value = Number(field);
    return field !== '' && Number.isFinite(value) && value >= 0 ? value : undefined;
  };
  const cpuMs = count(cpu);
  const writtenBytes = count(written);
  const figures = {
    ...(cpuMs === undefined ? {} : { cpuMs }),
    ...(writtenBytes === undefined ? {} : { writtenBytes }),
  };
  if (kind === 'r-error') {
    const message = text.slice(kind.length + cpu.length + written.length + 3).replace(/\n$/, '');
    return { kind, message: message || 'R reported an error', ...figures };
  }
  return { kind: kind === 'ok' ? 'ok' : 'none', message: '', ...figures };
}

function processLimitOutcome(limits: JobLimits, detail: string): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job reached its limit of ${limits.processes} processes and threads (R_MAX_PROCESSES)${detail ? `: ${detail}` : ''}`,
  };
}

function cpuLimitOutcome(limits: JobLimits): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job exceeded its CPU time limit of ${limits.cpuSeconds} s (R_CPU_LIMIT_SECONDS)`,
  };
}

function fileLimitOutcome(limits: JobLimits): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job exceeded its file size limit of ${limits.fileMb} MiB (R_MAX_FILE_MB)`,
  };
}

/**
 * Names the limit behind a failure where R's own words or the way R ended show it: bytes
 * written (the files the job left in its directories: bytes sent to /dev/null or printed are
 * not written), an allocation refused under the memory limit, the CPU limit (R's time limit
 * error), a fork refused under the process limit, a file at the size limit.
 */
async function namedLimit(
  outcome: ScriptRunOutcome,
  limits: JobLimits,
  workDir: string,
  tmp: string,
  scan: OutputScan,
  writtenBytes: number | undefined,
): Promise<ScriptRunOutcome> {
  const usage = outcome.rCpuMs === undefined ? {} : { rCpuMs: outcome.rCpuMs };
  return { ...(await nameLimit(outcome, limits, workDir, tmp, scan, writtenBytes)), ...usage };
}

async function nameLimit(
  outcome: ScriptRunOutcome,
  limits: JobLimits,
  workDir: string,
  tmp: string,
  scan: OutputScan,
  writtenBytes: number | undefined,
): Promise<ScriptRunOutcome> {
  if (outcome.status === 'failed' && (outcome.reason === 'timeout' || outcome.reason === 'limit')) {
    return outcome;
  }
  // Files written and removed again within the watch's interval count too (write_bytes).
  if (limits.writeMb > 0 && (writtenBytes ?? 0) > limits.writeMb * MIB) {
    return writeLimitOutcome(limits);
  }
  if (
    limits.writeMb > 0 &&
    (await bytesUnder([workDir, tmp]).catch(() => 0)) > limits.writeMb * MIB
  ) {
    return writeLimitOutcome(limits);
  }
  // A fork refused under the process limit ends the job with that limit, even when the script
  // carried on: the shell and R report it in the output.
  if (limits.processes > 0 && scan.forkRefused) {
    return processLimitOutcome(limits, outcome.status === 'failed' ? outcome.message : '');
  }
  if (outcome.status !== 'failed') {
    return outcome;
  }
  const text = outcome.message;
  if (limits.memoryMb > 0 && /cannot allocate (vector|memory)|memory exhausted/i.test(text)) {
    return {
      status: 'failed',
      reason: 'limit',
      message: `the job exceeded its memory limit of ${limits.memoryMb} MiB (R_MEMORY_LIMIT_MB): ${text}`,
    };
  }
  if (/reached CPU time limit/i.test(text)) {
    return cpuLimitOutcome(limits);
  }
  if (limits.processes > 0 && FORK_REFUSED.test(text)) {
    return processLimitOutcome(limits, text);
  }
  if (limits.fileMb > 0 && (await hasFileAtLeast(workDir, limits.fileMb * MIB))) {
    return fileLimitOutcome(limits);
  }
  return outcome;
}

/** Whether the job left a file of at least `bytes` (read through descriptors, never followed). */
async function hasFileAtLeast(dir: string, bytes: number): Promise<boolean> {
  try {
    const tree = await listOutputFiles(dir, {
      exclude: new Set(),
      maxEntries: 100_000,
      maxDepth: 64,
      maxPathBytes: 4096,
    });
    try {
      return tree.files.some((file) => file.size >= bytes);
    } finally {
      await tree.close();
    }
  } catch {
    return false;
  }
}

/** The outcome of a forked run, in the same terms as a fresh process's. */
function forkOutcome(status: ForkRunStatus, timeoutMs: number): ScriptRunOutcome {
  const usage = status.cpuMs === undefined ? {} : { rCpuMs: status.cpuMs };
  switch (status.kind) {
    case 'ok':
      return { status: 'succeeded', ...usage };
    case 'r-error':
      return { status: 'failed', reason: 'r-error', message: status.message, ...usage };
    case 'exit':
      return status.code === 0
        ? { status: 'succeeded', ...usage }
        : {
            status: 'failed',
            reason: 'exit',
            message: `R exited with status ${status.code}`,
            ...usage,
          };
    case 'died':
      return {
        status: 'failed',
        reason: 'exit',
        message: 'R was terminated by a signal (a resource limit, or R crashed)',
      };
    case 'killed':
      if (status.reason === 'timeout') {
        return {
          status: 'failed',
          reason: 'timeout',
          message: `the job exceeded its time limit of ${timeoutMs / 1000} s`,
        };
      }
      throw new REngineUnavailableError('the R engine was stopped while the job ran');
    case 'setup':
      throw new REngineUnavailableError(`R could not prepare the job: ${status.message}`);
  }
}
