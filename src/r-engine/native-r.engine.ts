import { spawn, type ChildProcess } from 'node:child_process';
import { Logger } from '@nestjs/common';
import { accessSync, constants as fsConstants, createWriteStream, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import { availableParallelism, tmpdir } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { AppConfig } from '../config/app-config';
import { ForkServer, type ForkRunStatus } from './fork-server';
import {
  R_LOG_FILE,
  REngineUnavailableError,
  type REngine,
  type ScriptRunOutcome,
  type ScriptRunRequest,
} from './r-engine';

export type NativeRConfig = Pick<AppConfig, 'rHome' | 'rscriptPath' | 'rMemoryLimitMb'> &
  Partial<Pick<AppConfig, 'rScriptMode' | 'jobTimeoutSeconds'>>;

export type ScriptMode = 'fork' | 'spawn';

const PRLIMIT = '/usr/bin/prlimit';
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
/** Library locations the operator may point R at; paths, never secrets. */
const PASSED_R_VARIABLES = ['R_LIBS', 'R_LIBS_SITE', 'R_LIBS_USER'] as const;
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
  tryCatch(source(script), error = function(e) {
    call <- conditionCall(e)
    prefix <- if (is.null(call)) "Error: " else paste0("Error in ", deparse(call)[[1L]], " : ")
    message(prefix, conditionMessage(e))
    writeLines(enc2utf8(conditionMessage(e)), errorFile, useBytes = TRUE)
    quit(save = "no", status = 1L)
  })
})
`;

function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
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

/** Splits a byte stream into lines, keeping a partial last line until more arrives. */
class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(private readonly emit: (line: string) => void) {}

  push(chunk: Buffer): void {
    const lines = (this.pending + this.decoder.write(chunk)).split('\n');
    this.pending = lines.pop() ?? '';
    lines.forEach((line) => this.emit(line.replace(/\r$/, '')));
  }

  end(): void {
    const rest = this.pending + this.decoder.end();
    this.pending = '';
    if (rest !== '') {
      this.emit(rest.replace(/\r$/, ''));
    }
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) {
    return;
  }
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone.
  }
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

/**
 * Real R. In `fork` mode (R_SCRIPT_MODE, the default on Linux) a warm R parent, the fork server,
 * forks a child per script job; in `spawn` mode (the fallback) each job is a fresh Rscript
 * process in its own process group. Either way the job runs in its own directory, with a
 * minimal environment, under the memory limit and a CPU backstop, and is killed on timeout.
 */
export class NativeREngine implements REngine {
  readonly kind = 'native' as const;
  /** Each run is its own process: the slots configured are the limit. */
  readonly maxConcurrentRuns = Number.POSITIVE_INFINITY;
  private readonly rscript: string;
  /** Each running job's abort handle and a promise that settles when its R has gone. */
  private readonly running = new Map<AbortController, Promise<void>>();
  private cachedVersion: string | undefined;
  private scriptMode: ScriptMode;
  private forkServer: ForkServer | undefined;
  /** Home and temporary directory of the fork server; holds each forked run's private directory. */
  private forkRoot: string | undefined;

  constructor(
    private readonly config: NativeRConfig,
    private readonly logger: EngineLogger = new Logger('REngine'),
  ) {
    this.rscript = findRscript(config) ?? chosenRscript(config);
    this.scriptMode = effectiveScriptMode(config);
  }

  /** How script jobs run now: `spawn` also when fork was asked for but the server cannot start. */
  get mode(): ScriptMode {
    return this.scriptMode;
  }

  /** Pid of the fork server's R process (0 when there is none), for diagnostics and tests. */
  get forkServerPid(): number {
    return this.forkServer?.pid ?? 0;
  }

  async start(): Promise<void> {
    this.cachedVersion = undefined;
    if (this.scriptMode === 'fork') {
      try {
        await this.startForkServer();
        return;
      } catch (error) {
        await this.stopForkServer();
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
    if (this.forkServer?.version) {
      return this.forkServer.version;
    }
    this.cachedVersion ??= (await this.evaluate('cat(R.version.string)', PROBE_TIMEOUT_MS)).trim();
    return this.cachedVersion;
  }

  async healthy(): Promise<boolean> {
    try {
      if (this.forkServer) {
        return (await this.forkServer.ping()).trim() === '2';
      }
      return (await this.evaluate('cat(1+1)', HEALTH_TIMEOUT_MS)).trim() === '2';
    } catch {
      return false;
    }
  }

  async runScript(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    const { jobId, workDir, scriptName, timeoutMs, onOutput } = request;
    if (!(await stat(workDir)).isDirectory()) {
      throw new Error(`job ${jobId}: ${workDir} is not a directory`);
    }
    if (this.forkServer) {
      return this.runForked(request);
    }
    // prlimit would turn a missing Rscript into an exit status; check first so it stays retryable.
    if (!isExecutable(this.rscript)) {
      throw new REngineUnavailableError(`Rscript not found or not executable: ${this.rscript}`);
    }
    const privateDir = await mkdtemp(join(tmpdir(), 'svc-r-'));
    try {
      const wrapper = join(privateDir, 'wrapper.R');
      const errorFile = join(privateDir, 'error.txt');
      const tmp = join(privateDir, 'tmp');
      await writeFile(wrapper, WRAPPER);
      await mkdir(tmp);
      const log = createWriteStream(join(workDir, R_LOG_FILE));
      await once(log, 'open');
      // A failed log write (disk full) must not crash the service; the run's outcome stands.
      log.on('error', () => undefined);
      const controller = new AbortController();
      let child: ChildProcess;
      try {
        child = this.spawnR([wrapper, scriptName, errorFile], workDir, tmp, timeoutMs);
      } catch (error) {
        log.end();
        throw isSpawnFailure(error) ? new REngineUnavailableError(error.message) : error;
      }
      let settle = (): void => undefined;
      const settled = new Promise<void>((resolve) => (settle = resolve));
      this.running.set(controller, settled);
      controller.signal.addEventListener('abort', () => killGroup(child), { once: true });
      // The worker gave the job up (lease lost, shutdown): stop R as if the engine stopped.
      const giveUp = (): void => controller.abort('stopped');
      request.signal?.addEventListener('abort', giveUp, { once: true });
      const timer = setTimeout(() => controller.abort('timeout'), timeoutMs);
      for (const stream of ['stdout', 'stderr'] as const) {
        const splitter = new LineSplitter((line) => onOutput?.(stream, line));
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
        request.signal?.removeEventListener('abort', giveUp);
        // Background processes the script left behind die with the job.
        killGroup(child);
        await new Promise<void>((resolve) => log.end(resolve));
        this.running.delete(controller);
        settle();
      }
      return await this.outcome(controller.signal, exit, errorFile, timeoutMs);
    } finally {
      await rm(privateDir, { recursive: true, force: true });
    }
  }

  async stop(): Promise<void> {
    const runs = [...this.running];
    runs.forEach(([controller]) => controller.abort('stopped'));
    await Promise.all(runs.map(([, settled]) => settled));
    await this.stopForkServer();
  }

  private async startForkServer(): Promise<void> {
    if (!isExecutable(this.rscript)) {
      throw new Error(`Rscript not found or not executable: ${this.rscript}`);
    }
    // Readable and writable by the service only; the runs' directories get random names.
    this.forkRoot = await mkdtemp(join(tmpdir(), 'svc-fork-'));
    await chmod(this.forkRoot, 0o700);
    const timeoutMs = (this.config.jobTimeoutSeconds ?? DEFAULT_JOB_TIMEOUT_S) * 1000;
    const limits = this.limitArgs(timeoutMs);
    const r = [this.rscript, '--no-init-file'];
    // The server's limits are its children's: each forked job inherits the address-space cap and
    // a CPU limit counted from zero in the child, so the backstop holds for every job.
    this.forkServer = new ForkServer({
      command: limits ? PRLIMIT : this.rscript,
      args: limits ? [...limits, '--', ...r] : r.slice(1),
      env: this.rEnvironment(this.forkRoot, this.forkRoot),
      cwd: this.forkRoot,
      cpuLimitSeconds: limits ? this.cpuLimitSeconds(timeoutMs) : 0,
      log: this.logger,
    });
    await this.forkServer.start();
  }

  private async stopForkServer(): Promise<void> {
    await this.forkServer?.stop();
    this.forkServer = undefined;
    if (this.forkRoot) {
      await rm(this.forkRoot, { recursive: true, force: true });
      this.forkRoot = undefined;
    }
  }

  /** Runs a script in a child forked by the fork server; out.log is written by the child. */
  private async runForked(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    const server = this.forkServer;
    if (!server || !this.forkRoot) {
      throw new REngineUnavailableError('the fork server is not running');
    }
    const privateDir = await mkdtemp(join(this.forkRoot, 'run-'));
    try {
      await mkdir(join(privateDir, 'tmp'));
      const errorFile = join(privateDir, 'error.txt');
      const status = await server.run({
        workDir: request.workDir,
        scriptName: request.scriptName,
        privateDir,
        timeoutMs: request.timeoutMs,
        signal: request.signal,
      });
      if (request.onOutput) {
        const log = await readFile(join(request.workDir, R_LOG_FILE), 'utf8').catch(() => '');
        const lines = log.split('\n');
        if (lines[lines.length - 1] === '') {
          lines.pop();
        }
        lines.forEach((line) => request.onOutput?.('stdout', line.replace(/\r$/, '')));
      }
      return await forkOutcome(status, errorFile, request.timeoutMs);
    } finally {
      await rm(privateDir, { recursive: true, force: true });
    }
  }

  private async outcome(
    signal: AbortSignal,
    exit: Exit,
    errorFile: string,
    timeoutMs: number,
  ): Promise<ScriptRunOutcome> {
    if (signal.aborted && signal.reason === 'timeout') {
      return {
        status: 'failed',
        reason: 'timeout',
        message: `the job exceeded its time limit of ${timeoutMs / 1000} s`,
      };
    }
    if (signal.aborted) {
      throw new REngineUnavailableError('the R engine was stopped while the job ran');
    }
    const rError = await readFile(errorFile, 'utf8').catch(() => undefined);
    if (rError !== undefined) {
      return { status: 'failed', reason: 'r-error', message: rError.replace(/\n$/, '') };
    }
    if (exit.code === 0) {
      return { status: 'succeeded' };
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

  /**
   * Spawns Rscript without a shell, in its own process group, with only the variables R needs:
   * the service's own environment (database URL, secrets) never reaches a job.
   */
  private spawnR(
    args: string[],
    cwd: string,
    tmp: string,
    jobTimeoutMs: number | null,
  ): ChildProcess {
    const env = this.rEnvironment(cwd, tmp);
    // --no-init-file: neither the job's nor the host user's .Rprofile runs.
    let command = this.rscript;
    let commandArgs = ['--no-init-file', ...args];
    const limits = jobTimeoutMs === null ? null : this.limitArgs(jobTimeoutMs);
    if (limits) {
      commandArgs = [...limits, '--', command, ...commandArgs];
      command = PRLIMIT;
    }
    return spawn(command, commandArgs, {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  /** Only the variables R needs: the service's own environment (database URL, secrets) never reaches R. */
  private rEnvironment(home: string, tmp: string): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? DEFAULT_PATH,
      HOME: home,
      TMPDIR: tmp,
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      // A job file named .Renviron must not configure the job's R.
      R_ENVIRON_USER: join(tmp, 'no-such-renviron'),
    };
    if (this.config.rHome) {
      env.R_HOME = this.config.rHome;
    }
    for (const name of PASSED_R_VARIABLES) {
      if (process.env[name] !== undefined) {
        env[name] = process.env[name];
      }
    }
    return env;
  }

  /**
   * prlimit's arguments for a job with this time limit, or null without prlimit (util-linux;
   * Linux only). --as caps the address space of R and everything it starts: R reports an
   * allocation beyond it as an ordinary R error ("cannot allocate vector of size ...").
   * --cpu is a backstop, not the time limit: if the service dies (SIGKILL) its timers die with
   * it, and the kernel still ends a runaway R after the most CPU the job could use in its time
   * limit on every core.
   */
  private limitArgs(jobTimeoutMs: number): string[] | null {
    if (!isExecutable(PRLIMIT)) {
      return null;
    }
    const limits = [`--cpu=${this.cpuLimitSeconds(jobTimeoutMs)}`];
    if (this.config.rMemoryLimitMb > 0) {
      limits.push(`--as=${this.config.rMemoryLimitMb * 1024 * 1024}`);
    }
    return limits;
  }

  private cpuLimitSeconds(jobTimeoutMs: number): number {
    return Math.ceil(jobTimeoutMs / 1000) * availableParallelism() + 5;
  }

  /** Evaluates a line of R in a short-lived process and returns what it printed. */
  private async evaluate(code: string, timeoutMs: number): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'svc-r-'));
    try {
      const child = this.spawnR(['-e', code], dir, dir, null);
      const output: Buffer[] = [];
      const errors: Buffer[] = [];
      child.stdout?.on('data', (chunk: Buffer) => output.push(chunk));
      child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk));
      const timer = setTimeout(() => killGroup(child), timeoutMs);
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
        killGroup(child);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
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
