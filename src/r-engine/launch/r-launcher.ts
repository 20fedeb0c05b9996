import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { chownSync, closeSync, lchownSync, openSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { rSourcePath } from '../r-sources';
import {
  bwrapArguments,
  bwrapFailure,
  BWRAP_MISSING,
  DEFAULT_PATH,
  findBwrap,
  isExecutable,
  sandboxConfinement,
  type Confinement,
  type SandboxProblem,
} from './r-sandbox';

/** What isolates native R: bubblewrap namespaces, or nothing but the process boundary. */
export type SandboxKind = 'bwrap' | 'none';

/** Per-process limits of an R run, set with prlimit; 0 leaves one unset. */
export interface RLimits {
  cpuSeconds: number;
  memoryBytes: number;
  /** Processes and threads of the sandbox's user (RLIMIT_NPROC); enforced inside the sandbox only. */
  processes: number;
  /** Largest file R or a program it starts may write (RLIMIT_FSIZE). */
  fileBytes: number;
}

export interface RLaunchRequest {
  /** Arguments after `Rscript --no-init-file`. */
  args: string[];
  /** Working directory (must be one of `writable`, or below one, when sandboxed). */
  cwd: string;
  home: string;
  /** TMPDIR for R and the programs it starts. */
  tmp: string;
  /** Host directories R may write, mounted at the same path. Nothing else is writable. */
  writable: string[];
  /** Host directories R may read besides the system (e.g. the service's R sources). */
  readable?: string[];
  /** Share the host's network; otherwise R has only a loopback of its own. */
  network: boolean;
  limits: RLimits | null;
  /** Variables for R besides the minimal environment (never secrets). */
  env?: Record<string, string>;
  /**
   * The child's descriptors 0-2 (and more, if the caller needs them). In a sandbox the launcher
   * appends one: the seccomp filter, which bubblewrap reads and closes before R starts.
   */
  stdio: StdioOptions;
  /**
   * Makes R non-dumpable: no other process of its sandbox (its own forks included) can read or
   * write its memory (`/proc/<pid>/mem`), read its environment or trace it, and neither can R
   * itself read its own `/proc/self/io` or `environ` (nor can its forks: the mark is inherited).
   * For an R process that outlives the jobs it serves. Default: the fork servers (fork-server.R).
   */
  undumpable?: boolean;
}

export interface RLauncherOptions {
  rscript: string;
  rHome: string | null;
  sandbox: SandboxKind;
  /**
   * A copy of the service's own R programs (r/) that R reads, outside the checkout: a sandbox
   * binds this directory, so no path of the service's installation is visible to R.
   */
  sourcesDir?: string | null;
  /**
   * A directory of the service's own, searchable (mode 0711) but not writable by the sandbox
   * user, where the launcher writes the seccomp filter and the unreadable copy of R's executable
   * once. Default: a directory of its own under the system's temporary directory, removed when
   * the process exits.
   */
  runtimeDir?: string | null;
  /** Reports a protection that is missing here (once per message); default process.emitWarning. */
  warn?: (message: string) => void;
}

const PRLIMIT = '/usr/bin/prlimit';
const SETPRIV = '/usr/bin/setpriv';
/** Library locations the operator may point R at; paths, never secrets. */
const PASSED_R_VARIABLES = ['R_LIBS', 'R_LIBS_SITE', 'R_LIBS_USER'] as const;
/** The unprivileged user R runs as when the service runs as root (nobody). */
const SANDBOX_UID = 65534;
/** How to start one R process; `close()` releases the launcher's descriptors after the spawn. */
export interface LaunchLine {
  command: string;
  args: string[];
  stdio: StdioOptions;
  close: () => void;
}

const noop = (): void => undefined;
/** The stdio of a request as an array of its first three (or more) descriptors. */
function stdioArray(stdio: StdioOptions): Exclude<StdioOptions, string> {
  const array: Exclude<StdioOptions, string> =
    typeof stdio === 'string' ? [stdio, stdio, stdio] : [...stdio];
  while (array.length < 3) {
    array.push('ignore');
  }
  return array;
}

/** Kills a process group (a launched R and whatever it started outside a sandbox). */
export function killProcessGroup(child: ChildProcess): void {
  if (child.pid === undefined) {
    return;
  }
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone.
  }
}

/**
 * The one place native R processes start: script jobs (spawn mode), the fork servers, the
 * function-call sessions and the engine's probes. It gives R a minimal environment (never the
 * service's), prlimit limits, its own process group, and with `bwrap` a sandbox: its own mount,
 * PID, IPC, UTS, cgroup, user and (unless allowed) network namespaces, a read-only view of the
 * system (/usr and the parts of /etc that R needs), and nothing writable but the directories the
 * caller names. When the service runs as root, R runs as the unprivileged user nobody, so that
 * the process limit (RLIMIT_NPROC) applies and the files it creates are not root's.
 */
export class RLauncher {
  readonly sandbox: SandboxKind;
  private readonly bwrap: string | null;
  /** The uid R runs as in the sandbox when it differs from the service's (service is root). */
  readonly sandboxUid: number | null;
  private hardening: Confinement | undefined;

  constructor(private readonly options: RLauncherOptions) {
    this.sandbox = options.sandbox;
    this.bwrap = options.sandbox === 'bwrap' ? findBwrap() : null;
    this.sandboxUid =
      options.sandbox === 'bwrap' && process.getuid?.() === 0 && isExecutable(SETPRIV)
        ? SANDBOX_UID
        : null;
  }

  get rscript(): string {
    return this.options.rscript;
  }

  /** The path R reads one of the service's R programs from (fork-server.R, session.R, …). */
  rSource(name: string): string {
    return this.options.sourcesDir ? join(this.options.sourcesDir, name) : rSourcePath(name);
  }

  /** Starts R; throws synchronously when the program cannot be spawned. */
  spawn(request: RLaunchRequest): ChildProcess {
    const launch = this.launchLine(request);
    try {
      return spawn(launch.command, launch.args, {
        cwd: request.cwd,
        env: this.environment(request),
        detached: true,
        stdio: launch.stdio,
      });
    } finally {
      // The child has its own copy once spawn returns (libuv waits for the exec).
      launch.close();
    }
  }

  /**
   * Makes a directory (and what is in it) writable by sandboxed R: when R runs as another user
   * than the service, the directory is handed to that user. The service, root, still reads and
   * removes it. `recursive: false` hands over the directory alone (a run's parent directory).
   */
  makeWritable(dir: string, options: { recursive?: boolean } = {}): void {
    const uid = this.sandboxUid;
    if (uid === null) {
      return;
    }
    // readdir's entry types save a stat per file; links are handed over, never followed.
    // Synchronous, like the engine's other per-job calls on its local directories (see
    // docs/architecture.md): a call takes a quarter of the CPU of its thread-pool form.
    const walk = (path: string): void => {
      chownSync(path, uid, uid);
      for (const entry of readdirSync(path, { withFileTypes: true })) {
        const child = join(path, entry.name);
        if (entry.isDirectory()) {
          walk(child);
        } else {
          lchownSync(child, uid, uid);
        }
      }
    };
    if (options.recursive === false) {
      chownSync(dir, uid, uid);
    } else {
      walk(dir);
    }
  }

  /**
   * The program, arguments and stdio that start R for this request (prlimit, setpriv, bwrap).
   * In a sandbox the stdio holds one more descriptor than the request's, the seccomp filter's,
   * opened here: call `close()` once the child is spawned.
   */
  launchLine(request: RLaunchRequest): LaunchLine {
    const r = [this.options.rscript, '--no-init-file', ...request.args];
    const limits = request.limits ? limitArguments(request.limits) : [];
    const limited =
      limits.length > 0 && isExecutable(PRLIMIT) ? [PRLIMIT, ...limits, '--', ...r] : r;
    if (this.sandbox !== 'bwrap' || !this.bwrap) {
      return { command: limited[0], args: limited.slice(1), stdio: request.stdio, close: noop };
    }
    const confinement = this.confinement();
    const stdio = stdioArray(request.stdio);
    const filter = confinement.seccompFile ? openSync(confinement.seccompFile, 'r') : null;
    const hardening: string[] = [];
    if (filter !== null) {
      hardening.push('--seccomp', String(stdio.length));
      stdio.push(filter);
    }
    if (confinement.disableUserns) {
      hardening.push('--unshare-user', '--disable-userns');
    }
    const undumpable = request.undumpable ?? request.args[0] === this.rSource('fork-server.R');
    if (undumpable && confinement.unreadableR) {
      hardening.push('--ro-bind', confinement.unreadableR.copy, confinement.unreadableR.path);
    }
    const paths = {
      rscript: this.options.rscript,
      rHome: this.options.rHome,
      rSourcesDir: dirname(this.rSource('session.R')),
    };
    const sandboxed = [this.bwrap, ...bwrapArguments(request, paths, hardening), '--', ...limited];
    // As root, bwrap would keep uid 0 (limits such as RLIMIT_NPROC do not apply to root).
    const command =
      this.sandboxUid !== null
        ? [
            SETPRIV,
            `--reuid=${this.sandboxUid}`,
            `--regid=${this.sandboxUid}`,
            '--clear-groups',
            '--',
            ...sandboxed,
          ]
        : sandboxed;
    return {
      command: command[0],
      args: command.slice(1),
      stdio,
      close: () => {
        if (filter !== null) {
          closeSync(filter);
        }
      },
    };
  }

  /** The sandbox's hardening (see sandboxConfinement), worked out on first use. */
  private confinement(): Confinement {
    this.hardening ??= sandboxConfinement(this.options, this.bwrap);
    return this.hardening;
  }

  private environment(request: RLaunchRequest): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? DEFAULT_PATH,
      HOME: request.home,
      TMPDIR: request.tmp,
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      // A job file named .Renviron must not configure the job's R.
      R_ENVIRON_USER: join(request.tmp, 'no-such-renviron'),
      ...request.env,
    };
    if (this.options.rHome) {
      env.R_HOME = this.options.rHome;
    }
    for (const name of PASSED_R_VARIABLES) {
      if (process.env[name] !== undefined) {
        env[name] = process.env[name];
      }
    }
    return env;
  }
}

/** A line of R evaluated in a scratch directory of its own, no network, no limits (probes). */
export function evaluation(code: string, dir: string): RLaunchRequest {
  return {
    args: ['-e', code],
    cwd: dir,
    home: dir,
    tmp: dir,
    writable: [dir],
    network: false,
    limits: null,
    stdio: ['ignore', 'pipe', 'pipe'],
  };
}

function limitArguments(limits: RLimits): string[] {
  const args: string[] = [];
  if (limits.cpuSeconds > 0) {
    // R's own time limit (setTimeLimit) fires first and names the limit; the kernel's, a second
    // later (SIGXCPU, then SIGKILL), ends code that never returns to R's interpreter.
    args.push(`--cpu=${limits.cpuSeconds + 1}:${limits.cpuSeconds + 2}`);
  }
  if (limits.memoryBytes > 0) {
    args.push(`--as=${limits.memoryBytes}`);
  }
  if (limits.processes > 0) {
    args.push(`--nproc=${limits.processes}`);
  }
  if (limits.fileBytes > 0) {
    args.push(`--fsize=${limits.fileBytes}`);
  }
  return args;
}

/**
 * Whether R runs in bubblewrap here: starts R once in the sandbox and checks its answer.
 * Returns null when it works, else why not and what to do (bwrapFailure).
 */
export function probeSandbox(
  options: Omit<RLauncherOptions, 'sandbox'>,
  dir: string,
): SandboxProblem | null {
  if (!findBwrap()) {
    return BWRAP_MISSING;
  }
  const launcher = new RLauncher({ ...options, sandbox: 'bwrap' });
  const request = evaluation('cat(1 + 1)', dir);
  if (launcher.sandboxUid !== null) {
    spawnSync('chown', [String(launcher.sandboxUid), dir]);
  }
  const launch = launcher.launchLine(request);
  let result;
  try {
    result = spawnSync(launch.command, launch.args, {
      cwd: dir,
      env: { PATH: process.env.PATH ?? DEFAULT_PATH, HOME: dir, TMPDIR: dir, LANG: 'C.UTF-8' },
      encoding: 'utf8',
      timeout: 30_000,
      stdio: launch.stdio,
    });
  } finally {
    launch.close();
  }
  if (result.error) {
    return bwrapFailure(null, result.error.message, launcher.sandboxUid);
  }
  if (result.status === 0 && result.stdout.trim() === '2') {
    return null;
  }
  return bwrapFailure(result.status, result.stderr || result.stdout, launcher.sandboxUid);
}
