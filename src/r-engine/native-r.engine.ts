import { type ChildProcess } from 'node:child_process';
import { Logger } from '@nestjs/common';
import {
  createWriteStream,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import {
  chmod,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  writeFile,
} from 'node:fs/promises';
import { once } from 'node:events';
import { availableParallelism, constants as osConstants, tmpdir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { followFile, LineSplitter } from './file-follower';
import { routeOutput } from './job-progress';
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
import {
  R_LOG_FILE,
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

/**
 * Runs the job script and reports an R error through a file that the job cannot mistake for a
 * result: the file lives in the run's private directory, outside workDir. Arguments: the script
 * name and that file's path. The console line mimics R's own "Error in <call> : <message>".
 */
const WRAPPER = `local({
  args <- commandArgs(trailingOnly = TRUE)
  script <- args[[1L]]
  errorFile <- args[[2L]]
  # The CPU limit as an R error that names it; the kernel's limit stays the backstop.
  cpuLimit <- as.numeric(args[[3L]])
  if (cpuLimit > 0) setTimeLimit(cpu = cpuLimit)
  progress <- eval(parse(file = args[[4L]], keep.source = FALSE))
  # The application's packages come first (a directory that does not exist is left out).
  if (length(args) >= 5L && nzchar(args[[5L]])) .libPaths(c(args[[5L]], .libPaths()))
  attach(list(svc_progress = progress$make(progress$printed)), name = "svc",
         warn.conflicts = FALSE)
  # Bytes written by R and the programs it ran and waited for (the kernel adds theirs to R's),
  # then the CPU milliseconds of both (usage statistics).
  written <- function() {
    io <- tryCatch(readLines("/proc/self/io"), error = function(e) character(0L))
    cpu <- round(1000 * sum(proc.time()[c(1L, 2L, 4L, 5L)], na.rm = TRUE))
    try(writeLines(c(sub("^wchar: ", "", grep("^wchar: ", io, value = TRUE)), cpu),
                   file.path(dirname(errorFile), "written.txt")), silent = TRUE)
  }
  tryCatch(source(script), error = function(e) {
    call <- conditionCall(e)
    prefix <- if (is.null(call)) "Error: " else paste0("Error in ", deparse(call)[[1L]], " : ")
    message(prefix, conditionMessage(e))
    writeLines(enc2utf8(conditionMessage(e)), errorFile, useBytes = TRUE)
    written()
    quit(save = "no", status = 1L)
  })
  written()
})
`;

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
  /** Bound into the server's sandbox: work/ (the job's directory while it runs), private/. */
  dir: string;
  busy: boolean;
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
    if (this.runtimeRoot) {
      await rm(this.runtimeRoot, { recursive: true, force: true });
      this.runtimeRoot = undefined;
      this.packageLibrary = null;
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
      'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; in a container see docs/operations.md)';
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
   * sandbox is made before its jobs exist), and moves back after; R and the engine's own readers
   * use the run's path meanwhile. Without a sandbox it stays where it is. `private/` (R's temp
   * directory, the error and usage files) is made here unless the caller prepared it (a fork
   * slot does that ahead of its next job); the caller removes `parent`'s contents afterwards.
   */
  private async withRunDirectory<T>(
    workDir: string,
    parent: string,
    privatePrepared: boolean,
    body: (runWork: string, tmp: string, errorFile: string) => Promise<T>,
  ): Promise<T> {
    const sandboxed = this.launcherInstance.sandbox === 'bwrap';
    const runWork = sandboxed ? join(parent, 'work') : workDir;
    const privateDir = join(parent, 'private');
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
      return await body(runWork, join(privateDir, 'tmp'), join(privateDir, 'error.txt'));
    } finally {
      if (moved) {
        renameSync(runWork, workDir);
      }
    }
  }

  /** A run's private/tmp, handed to the sandbox user with its parent (never a slot's server-tmp). */
  private preparePrivate(parent: string): void {
    const privateDir = join(parent, 'private');
    mkdirSync(join(privateDir, 'tmp'), { recursive: true });
    this.launcherInstance.makeWritable(parent, { recursive: false });
    this.launcherInstance.makeWritable(privateDir);
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
      return await this.withRunDirectory(
        request.workDir,
        parent,
        false,
        async (work, tmp, errorFile) => {
          const wrapper = join(tmp, '..', 'wrapper.R');
          await writeFile(wrapper, WRAPPER);
          const log = createWriteStream(join(work, R_LOG_FILE));
          await once(log, 'open');
          // A failed log write (disk full) must not crash the service; the run's outcome stands.
          log.on('error', () => undefined);
          const controller = new AbortController();
          let child: ChildProcess;
          try {
            child = this.launcherInstance.spawn({
              args: [
                wrapper,
                request.scriptName,
                errorFile,
                String(limits.cpuSeconds),
                this.launcherInstance.rSource('progress.R'),
                this.libraryDir(request),
              ],
              cwd: work,
              home: work,
              tmp,
              writable: [work, dirname(tmp)],
              readable: this.packageLibrary ? [this.packageLibrary.root] : [],
              network: request.network === true,
              limits: this.rLimits(limits),
              stdio: ['ignore', 'pipe', 'pipe'],
            });
          } catch (error) {
            log.end();
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
          for (const stream of ['stdout', 'stderr'] as const) {
            const splitter = new LineSplitter((line) => output?.(stream, line));
            child[stream]?.on('data', (chunk: Buffer) => {
              log.write(chunk);
              splitter.push(chunk);
            });
            child[stream]?.on('end', () => splitter.end());
          }
          let exit: Exit;
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
            await new Promise<void>((resolve) => log.end(resolve));
            this.running.delete(controller);
            settle();
          }
          const outcome = this.outcome(controller.signal, exit, errorFile, limits);
          return namedLimit(outcome, limits, work, dirname(tmp));
        },
      );
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
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
      this.launcherInstance.makeWritable(dir);
      // The server's limits are its children's: each forked job inherits the address-space cap,
      // the process and file-size limits, and a CPU limit counted from zero in the child.
      const serverTmp = join(dir, SERVER_TMP);
      await mkdir(serverTmp);
      this.launcherInstance.makeWritable(serverTmp);
      this.preparePrivate(dir);
      const server = new ForkServer({
        launch: (env) =>
          this.launcherInstance.spawn({
            args: [
              this.launcherInstance.rSource('fork-server.R'),
              this.launcherInstance.rSource('progress.R'),
            ],
            cwd: dir,
            home: dir,
            tmp: serverTmp,
            writable: [dir],
            readable: [control, ...(this.packageLibrary ? [this.packageLibrary.root] : [])],
            network: false,
            limits: this.rLimits(limits),
            env,
            stdio: ['ignore', 'pipe', 'pipe'],
          }),
        controlDir: control,
        sandboxUid: this.launcherInstance.sandboxUid,
        sandboxed,
        cpuLimitSeconds: limits.cpuSeconds,
        log: this.logger,
      });
      started.push({ server, dir, busy: false });
      this.slots.push(started[started.length - 1]);
    }
    await Promise.all(started.map((slot) => slot.server.start()));
  }

  private async stopForkServers(): Promise<void> {
    const slots = this.slots.splice(0);
    await Promise.all(slots.map((slot) => slot.server.stop()));
  }

  private acquireSlot(): Promise<Slot> {
    const free = this.slots.find((slot) => !slot.busy);
    if (free) {
      free.busy = true;
      return Promise.resolve(free);
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

  /** Runs a script in a child forked by a slot's fork server; out.log is written by the child. */
  private async runForked(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    const slot = await this.acquireSlot();
    const limits = this.limits(request.timeoutMs);
    try {
      return await this.withRunDirectory(
        request.workDir,
        slot.dir,
        true,
        async (work, tmp, errorFile) => {
          const controller = new AbortController();
          const stopped = (): void => controller.abort('stopped');
          request.signal?.addEventListener('abort', stopped, { once: true });
          const watch = watchWrites([work, tmp], limits.writeMb, () => controller.abort('write'));
          // The child writes out.log itself: followed while it runs, so its lines come as printed.
          const output = routeOutput(request);
          const follower = output
            ? followFile(join(work, R_LOG_FILE), (line) => output('stdout', line))
            : null;
          let status: ForkRunStatus;
          try {
            status = await slot.server.run({
              workDir: work,
              scriptName: request.scriptName,
              privateDir: dirname(tmp),
              libraryDir: this.libraryDir(request),
              timeoutMs: request.timeoutMs,
              signal: request.signal?.aborted ? request.signal : controller.signal,
            });
          } finally {
            watch.stop();
            await follower?.stop();
            request.signal?.removeEventListener('abort', stopped);
          }
          if (controller.signal.reason === 'write' && status.kind === 'killed') {
            return writeLimitOutcome(limits);
          }
          return namedLimit(
            await forkOutcome(status, errorFile, request.timeoutMs),
            limits,
            work,
            dirname(tmp),
          );
        },
      );
    } finally {
      this.recycleSlot(slot);
    }
  }

  /**
   * Cleans a slot and prepares its next run's private directory, then releases it: after the
   * job's outcome is known, so the client does not wait for it, and before the slot's next job.
   */
  private recycleSlot(slot: Slot): void {
    const recycled = cleanSlot(slot.dir)
      .then(() => this.preparePrivate(slot.dir))
      .catch((error: Error) =>
        this.logger.warn(`could not clean a fork server's slot: ${error.message}`),
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
    errorFile: string,
    limits: JobLimits,
  ): ScriptRunOutcome {
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
    const rError = readSmallFile(errorFile);
    if (rError !== undefined) {
      return { status: 'failed', reason: 'r-error', message: rError.replace(/\n$/, '') };
    }
    if (exit.code === 0) {
      return { status: 'succeeded' };
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

/**
 * Removes what a job left in its slot outside its working directory (which has moved back to the
 * executor): files in the server's R session directory and anything else, so that the next job
 * of the slot finds nothing of it.
 */
async function cleanSlot(dir: string): Promise<void> {
  for (const entry of readdirSync(dir)) {
    if (entry !== SERVER_TMP) {
      await removeTree(join(dir, entry));
    }
  }
  const serverTmp = join(dir, SERVER_TMP);
  for (const session of readdirSync(serverTmp)) {
    const path = join(serverTmp, session);
    if (session.startsWith('Rtmp') && lstatSync(path).isDirectory()) {
      for (const entry of readdirSync(path)) {
        await removeTree(join(path, entry));
      }
    } else {
      await removeTree(path);
    }
  }
}

/** Entries a tree may have to be removed with synchronous calls. */
const SMALL_TREE_ENTRIES = 32;

/**
 * Removes a file or directory tree. What a job usually leaves (its private directory: an empty
 * temp directory and R's status file) goes with a few synchronous calls (a quarter of the CPU of
 * the thread-pool form); a tree larger than SMALL_TREE_ENTRIES, or one that changes meanwhile,
 * is removed on the thread pool.
 */
async function removeTree(path: string): Promise<void> {
  try {
    let budget = SMALL_TREE_ENTRIES;
    const removeSmall = (at: string, isDirectory: boolean): void => {
      if (--budget < 0) {
        throw new Error('too large to remove synchronously');
      }
      if (!isDirectory) {
        unlinkSync(at);
        return;
      }
      for (const entry of readdirSync(at, { withFileTypes: true })) {
        removeSmall(join(at, entry.name), entry.isDirectory());
      }
      rmdirSync(at);
    };
    removeSmall(path, lstatSync(path).isDirectory());
  } catch {
    await rm(path, { recursive: true, force: true });
  }
}

/**
 * A small file the engine's R side wrote (an error message, the usage figures), read at once: a
 * synchronous read of a local file costs a quarter of the CPU of its thread-pool form. Undefined
 * when it is not there.
 */
function readSmallFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** How often a running job's written bytes are measured (only jobs that run this long pay). */
const WRITE_CHECK_INTERVAL_MS = 500;

/** Bytes in the files under these directories (a job's working and temporary directories). */
async function bytesUnder(dirs: string[]): Promise<number> {
  let total = 0;
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        await walk(path);
      } else if (entry.isFile()) {
        total += (await lstat(path).catch(() => ({ size: 0 }))).size;
      }
    }
  };
  for (const dir of dirs) {
    await walk(dir);
  }
  return total;
}

/**
 * Measures what a running job has written every WRITE_CHECK_INTERVAL_MS and calls `exceeded`
 * once it passes the limit (0: no limit). RLIMIT_FSIZE caps each file; this caps their sum.
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
 * Names the limit behind a failure where R's own words or the way R ended show it: an
 * allocation refused under the memory limit, the CPU limit (R's time limit error), a fork
 * refused under the process limit, a file at the size limit.
 */
async function namedLimit(
  outcome: ScriptRunOutcome,
  limits: JobLimits,
  workDir: string,
  privateDir: string,
): Promise<ScriptRunOutcome> {
  // R's last words (written.txt): the bytes it wrote, then its CPU milliseconds.
  const [writtenText = '0', cpuText] = (readSmallFile(join(privateDir, 'written.txt')) ?? '').split(
    '\n',
  );
  const cpuMs = Number(cpuText);
  const named = await nameLimit(outcome, limits, workDir, Number(writtenText) || 0);
  return cpuText && Number.isFinite(cpuMs) ? { ...named, rCpuMs: cpuMs } : named;
}

async function nameLimit(
  outcome: ScriptRunOutcome,
  limits: JobLimits,
  workDir: string,
  written: number,
): Promise<ScriptRunOutcome> {
  if (outcome.status === 'failed' && (outcome.reason === 'timeout' || outcome.reason === 'limit')) {
    return outcome;
  }
  if (limits.writeMb > 0 && written > limits.writeMb * MIB) {
    return writeLimitOutcome(limits);
  }
  const log = await readFile(join(workDir, R_LOG_FILE), 'utf8').catch(() => '');
  // A fork refused under the process limit ends the job with that limit, even when the script
  // carried on: the shell and R report it in the log.
  if (limits.processes > 0 && FORK_REFUSED.test(log)) {
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

async function hasFileAtLeast(dir: string, bytes: number): Promise<boolean> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() ? await hasFileAtLeast(path, bytes) : false) {
      return true;
    }
    if (entry.isFile() && (await lstat(path).catch(() => ({ size: 0 }))).size >= bytes) {
      return true;
    }
  }
  return false;
}

/** The outcome of a forked run, in the same terms as a fresh process's. */
async function forkOutcome(
  status: ForkRunStatus,
  errorFile: string,
  timeoutMs: number,
): Promise<ScriptRunOutcome> {
  switch (status.kind) {
    case 'ok':
      return { status: 'succeeded' };
    case 'r-error': {
      const message = await readFile(errorFile, 'utf8').catch(() => 'R reported an error');
      return { status: 'failed', reason: 'r-error', message: message.replace(/\n$/, '') };
    }
    case 'exit':
      return status.code === 0
        ? { status: 'succeeded' }
        : { status: 'failed', reason: 'exit', message: `R exited with status ${status.code}` };
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
