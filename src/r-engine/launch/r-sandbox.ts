import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants as fsConstants,
  copyFileSync,
  existsSync,
  mkdtempSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { seccompArchOf, seccompProgram } from './seccomp-filter';

/**
 * The bubblewrap sandbox native R runs in (RLauncher builds its command line from these): its
 * mounts, and what hardens it besides its namespaces (the seccomp filter, --disable-userns, an
 * unreadable copy of R's executable).
 */

export const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
/**
 * The parts of /etc that R and the libraries it loads read: R's own settings, the BLAS/LAPACK
 * alternatives, fonts, the linker cache, the time zone. Not the rest of /etc (it may hold
 * credentials such as /etc/postgresql or a .pgpass-like file of the operator).
 */
const ETC_FOR_R = [
  '/etc/R',
  '/etc/alternatives',
  '/etc/fonts',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/localtime',
  '/etc/timezone',
  '/etc/mime.types',
];
/** What name resolution and TLS need, for applications allowed the network. */
const ETC_FOR_NETWORK = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/services',
  '/etc/protocols',
];

/** The part of a launch request (RLaunchRequest) the sandbox's mounts are made of. */
export interface SandboxMounts {
  cwd: string;
  writable: string[];
  readable?: string[];
  network: boolean;
}

/** Where R and the service's R programs are, bound read-only into the sandbox. */
export interface SandboxPaths {
  rscript: string;
  rHome: string | null;
  /** The directory of the service's R programs as R reads them (RLauncher.rSource). */
  rSourcesDir: string;
}

/** The launcher's options (RLauncherOptions) its sandbox's hardening depends on. */
export interface ConfinementOptions {
  rscript: string;
  rHome: string | null;
  runtimeDir?: string | null;
  warn?: (message: string) => void;
}

export interface Confinement {
  /** The compiled seccomp filter; null on an architecture the filter does not know. */
  seccompFile: string | null;
  disableUserns: boolean;
  /** An execute-only copy of R's executable, bound over it (`path`) in the sandbox. */
  unreadableR: { copy: string; path: string } | null;
}

/** Messages already reported by some launcher of this process. */
const warned = new Set<string>();
const rHomes = new Map<string, string | null>();
const bwrapOptions = new Map<string, string>();
/** Files the launchers of this process wrote (path and source). */
const written = new Set<string>();
let ownRuntimeDir: string | undefined;

/** The launcher's own directory for the process (see RLauncherOptions.runtimeDir). */
function defaultRuntimeDir(): string {
  if (!ownRuntimeDir) {
    const dir = mkdtempSync(join(tmpdir(), 'svc-r-launcher-'));
    // bubblewrap runs as the sandbox user when it binds the copy of R's executable from here.
    chmodSync(dir, 0o711);
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    ownRuntimeDir = dir;
  }
  return ownRuntimeDir;
}

/**
 * Writes a file of the launcher's into its directory once per process, by rename: a running
 * sandbox may still hold an earlier copy (a busy executable cannot be rewritten in place).
 */
function writeOnce(
  dir: string,
  name: string,
  content: Buffer | { copyOf: string },
  mode = 0o600,
): string {
  const path = join(dir, name);
  const key = `${path}\0${'copyOf' in content ? content.copyOf : ''}`;
  // Checked once per launcher: a runtime directory may have been removed and made again.
  if (!written.has(key) || !existsSync(path)) {
    const partial = join(dir, `.${name}.${process.pid}`);
    if (Buffer.isBuffer(content)) {
      writeFileSync(partial, content, { mode });
    } else {
      copyFileSync(content.copyOf, partial);
    }
    chmodSync(partial, mode);
    renameSync(partial, path);
    written.add(key);
  }
  return path;
}

/**
 * An execute-only copy (mode 0111) of R's executable. The kernel marks a process that executes
 * a file it cannot read as not dumpable (fs/exec.c, would_dump), so R started from this copy
 * cannot be traced or have its /proc/<pid>/mem opened by any other process of the sandbox, its
 * own forks included. Its owner cannot read it either: also when R runs as the service's user.
 */
function unreadableCopy(dir: string, executable: string): string {
  const name = `R-${createHash('sha256').update(executable).digest('hex').slice(0, 16)}`;
  return writeOnce(dir, name, { copyOf: executable }, 0o111);
}

/** R's home as the configured Rscript sees it (once per process), or null. */
function rHomeOf(rscript: string): string | null {
  if (!rHomes.has(rscript)) {
    // Unsandboxed, but R's own start-up only: no user profile, no site files, no job code.
    const result = spawnSync(rscript, ['--vanilla', '-e', 'cat(R.home())'], {
      env: { PATH: process.env.PATH ?? DEFAULT_PATH, LANG: 'C.UTF-8' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const home = result.status === 0 ? result.stdout.trim() : '';
    rHomes.set(rscript, home.startsWith('/') ? home : null);
  }
  return rHomes.get(rscript) ?? null;
}

/** Whether this bubblewrap knows an option (its --help lists it). */
function bwrapHas(bwrap: string, option: string): boolean {
  if (!bwrapOptions.has(bwrap)) {
    const help = spawnSync(bwrap, ['--help'], { encoding: 'utf8', timeout: 10_000 });
    bwrapOptions.set(bwrap, `${help.stdout ?? ''}`);
  }
  return new RegExp(`^\\s*${option}\\b`, 'm').test(bwrapOptions.get(bwrap) ?? '');
}

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** bwrap on the PATH, or null. */
export function findBwrap(): string | null {
  for (const dir of (process.env.PATH ?? DEFAULT_PATH).split(delimiter)) {
    if (dir && isExecutable(join(dir, 'bwrap'))) {
      return join(dir, 'bwrap');
    }
  }
  return null;
}

/**
 * What hardens the sandbox besides its namespaces (RLauncher works it out once): the seccomp
 * filter, bubblewrap's --disable-userns where it has it, and the unreadable copy of R's
 * executable that makes R non-dumpable.
 */
export function sandboxConfinement(options: ConfinementOptions, bwrap: string | null): Confinement {
  const warn = (message: string): void => {
    if (!warned.has(message)) {
      warned.add(message);
      (options.warn ?? ((text: string) => process.emitWarning(text)))(message);
    }
  };
  const dir = options.runtimeDir ?? defaultRuntimeDir();
  const arch = seccompArchOf(process.arch);
  if (!arch) {
    warn(
      `no seccomp filter for R on ${process.arch}: ptrace, the keyring and new namespaces stay open to R within its sandbox`,
    );
  }
  const rHome = options.rHome ?? rHomeOf(options.rscript);
  const executable = rHome ? join(rHome, 'bin', 'exec', 'R') : null;
  if (!executable || !isExecutable(executable)) {
    warn(
      `R's executable was not found (${executable ?? 'R_HOME unknown'}): a fork server's jobs can read and write its memory`,
    );
  }
  return {
    seccompFile: arch ? writeOnce(dir, `seccomp-${arch}.bpf`, seccompProgram(arch)) : null,
    disableUserns: bwrap !== null && bwrapHas(bwrap, '--disable-userns'),
    unreadableR:
      executable && isExecutable(executable)
        ? { copy: unreadableCopy(dir, executable), path: executable }
        : null,
  };
}

/**
 * bubblewrap's arguments for a request: a read-only system, the caller's readable and writable
 * directories, and `hardening` (seccomp, user namespaces, the unreadable R).
 */
export function bwrapArguments(
  request: SandboxMounts,
  paths: SandboxPaths,
  hardening: string[],
): string[] {
  const args = [
    '--unshare-all',
    ...(request.network ? ['--share-net'] : []),
    '--die-with-parent',
    // A new session: R cannot push characters into the terminal of the service (TIOCSTI).
    '--new-session',
    '--ro-bind',
    '/usr',
    '/usr',
    '--symlink',
    'usr/lib',
    '/lib',
    '--symlink',
    'usr/lib64',
    '/lib64',
    '--symlink',
    'usr/bin',
    '/bin',
    '--symlink',
    'usr/sbin',
    '/sbin',
  ];
  const readable = new Set<string>(request.readable ?? []);
  readable.add(paths.rSourcesDir);
  if (paths.rHome && !paths.rHome.startsWith('/usr/')) {
    readable.add(paths.rHome);
  }
  if (!paths.rscript.startsWith('/usr/')) {
    readable.add(dirname(dirname(paths.rscript)));
  }
  for (const path of [...ETC_FOR_R, ...(request.network ? ETC_FOR_NETWORK : [])]) {
    args.push('--ro-bind-try', path, path);
  }
  for (const path of readable) {
    args.push('--ro-bind', path, path);
  }
  args.push('--proc', '/proc', '--dev', '/dev');
  // A read-only /tmp: R's temporary files go to the private directory (TMPDIR).
  args.push('--perms', '0555', '--dir', '/tmp');
  for (const path of request.writable) {
    args.push('--bind', path, path);
  }
  args.push(...hardening);
  // Nothing of the sandbox's own skeleton (/, /dev, /dev/shm) stays writable: jobs that share
  // a sandbox in turn (a fork server's slot) could leave files there for the next one.
  args.push('--remount-ro', '/dev', '--remount-ro', '/');
  args.push('--chdir', request.cwd);
  return args;
}

/** Why R does not run in bubblewrap (RLauncher's probe), and what the operator can do. */
export interface SandboxProblem {
  cause: string;
  fix: string;
}

const INSTALL_BUBBLEWRAP = 'install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)';
const ALLOW_NAMESPACES =
  'let bubblewrap make namespaces (in Docker: docs/operations.md#the-r-sandbox; in Kubernetes the pod needs hostUsers: false, the seccomp profile svc-bwrap.json installed on its node (or seccompProfile Unconfined), appArmorProfile Unconfined and procMount: Unmasked: docs/operations.md#kubernetes)';

/** bubblewrap is not on the PATH. */
export const BWRAP_MISSING: SandboxProblem = {
  cause: 'bwrap (Debian/Ubuntu package bubblewrap) is not installed',
  fix: `${INSTALL_BUBBLEWRAP} and ${ALLOW_NAMESPACES}`,
};

/**
 * The directories from / down to a path (the path included) that a user who is neither their
 * owner nor in their group cannot pass (no o+x), as the sandbox's user (nobody) is for files of
 * root; the path itself also when it is not readable (no o+r) by that user.
 */
export function closedToOthers(path: string): string[] {
  const closed: string[] = [];
  const parts = path.split('/').filter((part) => part !== '');
  for (let i = 1; i <= parts.length; i++) {
    const dir = `/${parts.slice(0, i).join('/')}`;
    let mode: number;
    try {
      mode = statSync(dir).mode;
    } catch {
      break;
    }
    const needed = i === parts.length ? 0o005 : 0o001;
    if ((mode & needed) !== needed) {
      closed.push(dir);
    }
  }
  return closed;
}

/**
 * What bubblewrap's failed start means. "Can't find source path P: Permission denied" is not
 * a missing or blocked bubblewrap: the user R runs as in the sandbox (nobody when the service
 * runs as root) cannot reach P (the checkout's R programs, or R itself) because a directory
 * above it lets no other user through. The problem then names P, the directories that block
 * it and the chmod that opens them.
 */
export function bwrapFailure(
  status: number | null,
  output: string,
  sandboxUid: number | null,
): SandboxProblem {
  const detail = output.trim().split('\n').pop() ?? '';
  const failed = `R did not run in bubblewrap (exit status ${String(status)}${detail ? `: ${detail}` : ''})`;
  const unreachable = /Can't find source path (.+): Permission denied/.exec(output);
  if (!unreachable) {
    return { cause: failed, fix: ALLOW_NAMESPACES };
  }
  const path = unreachable[1];
  const user =
    sandboxUid === null ? "the service's user" : `uid ${sandboxUid}, R's user in the sandbox`;
  const closed = sandboxUid === null ? [] : closedToOthers(path);
  const above = closed.filter((dir) => dir !== path);
  const commands = [
    ...(above.length > 0 ? [`chmod o+x ${above.join(' ')}`] : []),
    ...(closed.includes(path) ? [`chmod o+rx ${path}`] : []),
  ];
  const blocked = closed.length > 0 ? ` (closed to other users: ${closed.join(', ')})` : '';
  const open =
    commands.length > 0
      ? commands.join(' && ')
      : `give ${user} read and search access to ${path} and every directory above it`;
  return {
    cause: `${failed}: bubblewrap works, but ${user} cannot reach ${path}${blocked}`,
    fix: `${open}, or move the checkout (or R) to a directory every user can reach, such as /opt or /srv`,
  };
}
