import {
  chmod,
  mkdir,
  mkdtemp,
  readdir,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { killProcessGroup, type RLauncher, type RLimits } from '../launch/r-launcher';

/** What one install did: R's output (stdout and stderr as they came), whatever the outcome. */
export interface PackageInstallOutcome {
  ok: boolean;
  output: string;
}

/** An install that takes longer than this is killed (and fails). */
const INSTALL_TIMEOUT_MS = 10 * 60_000;
/** R's output kept for the status: the end, which says what went wrong. */
const MAX_OUTPUT_CHARS = 16_000;
const STORE = '.store';
const WORK = '.work';

/**
 * The packages the service manages on this node, one library per application under `root`:
 * `<root>/<application>/<package>` is a symbolic link to `.store/<sha256>/<package>`, the
 * install of one upload. An install builds into a fresh directory (R CMD INSTALL, through the
 * launcher: the sandbox, no network) and only a finished one is moved into the store; the
 * link is then replaced by a rename, so R sees the old version or the new one, never half of
 * one, and a failed build leaves the previous version in place. Jobs and sessions get the
 * application's directory first on `.libPaths()`, with `root` bound read-only.
 */
export class PackageLibrary {
  constructor(
    readonly root: string,
    private readonly launcher: () => RLauncher,
    /** More directories of packages that R reads (the environments' cache and libraries). */
    private readonly alsoReadable: string[] = [],
  ) {}

  /** What a job's, a session's or a fork server's sandbox binds read-only for R's packages. */
  get readableRoots(): string[] {
    return [this.root, ...this.alsoReadable];
  }

  /** The library of one application (it may not exist: R leaves such a path out). */
  dirOf(applicationName: string): string {
    return join(this.root, applicationName);
  }

  /** What is installed: `<application>/<package>` → sha256 of the upload. */
  async installed(): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const app of await listNames(this.root)) {
      for (const name of await listNames(this.dirOf(app))) {
        const target = await readlink(join(this.dirOf(app), name)).catch(() => null);
        const sha = target?.split('/')[1];
        if (sha) {
          found.set(`${app}/${name}`, sha);
        }
      }
    }
    return found;
  }

  async install(
    applicationName: string,
    name: string,
    sha256: string,
    archive: Buffer,
  ): Promise<PackageInstallOutcome> {
    const appDir = this.dirOf(applicationName);
    // chmod: the service's umask (PRIVATE_UMASK) would close them to the sandbox user, who reads
    // the library. 0711: a sandboxed install runs as another user, who must reach its directory
    // (never list).
    await mkdir(join(appDir, STORE), { recursive: true });
    await chmod(appDir, 0o755);
    await chmod(join(appDir, STORE), 0o755);
    await mkdir(join(this.root, WORK), { recursive: true });
    await chmod(join(this.root, WORK), 0o711);
    const launcher = this.launcher();
    const { work, library, tarball } = await installDirectory(
      launcher,
      join(this.root, WORK),
      `${name}.tar.gz`,
      archive,
    );
    try {
      const outcome = await installInSandbox(launcher, {
        args: [launcher.rSource('install-package.R'), tarball, library, appDir],
        work,
        readable: [this.root],
      });
      if (!outcome.ok) {
        return outcome;
      }
      if (!(await listNames(library)).includes(name)) {
        return {
          ok: false,
          output: `${outcome.output}\nR CMD INSTALL did not install a package named ${name}.`,
        };
      }
      const store = join(appDir, STORE, sha256);
      await rm(store, { recursive: true, force: true });
      await rename(library, store);
      const previous = await readlink(join(appDir, name)).catch(() => null);
      const link = join(appDir, `.${name}.new`);
      await rm(link, { force: true });
      await symlink(join(STORE, sha256, name), link);
      await rename(link, join(appDir, name));
      await this.dropStore(appDir, previous, sha256);
      return outcome;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Removes a package from an application's library (nothing when it is not there). */
  async remove(applicationName: string, name: string): Promise<void> {
    const appDir = this.dirOf(applicationName);
    const previous = await readlink(join(appDir, name)).catch(() => null);
    await rm(join(appDir, name), { force: true });
    await this.dropStore(appDir, previous, null);
  }

  /** Deletes the store directory a replaced or removed link pointed to. */
  private async dropStore(appDir: string, target: string | null, keep: string | null) {
    const sha = target?.split('/')[1];
    if (sha && sha !== keep) {
      await rm(join(appDir, STORE, sha), { recursive: true, force: true });
    }
  }
}

/**
 * A fresh directory under `parent` for one install, handed to the sandbox's user: the source
 * package in it, `lib` to install into, `tmp`.
 */
export async function installDirectory(
  launcher: RLauncher,
  parent: string,
  tarballName: string,
  archive: Buffer,
): Promise<{ work: string; library: string; tarball: string }> {
  const work = await mkdtemp(join(parent, 'install-'));
  const library = join(work, 'lib');
  const tarball = join(work, tarballName);
  await mkdir(library);
  await mkdir(join(work, 'tmp'));
  await writeFile(tarball, archive);
  launcher.makeWritable(work);
  return { work, library, tarball };
}

/** One `R CMD INSTALL` (through a program of r/) in the sandbox, without network. */
export interface SandboxedInstall {
  /** Arguments after Rscript's options: the program and its arguments. */
  args: string[];
  /** Its working directory, writable; nothing else is. */
  work: string;
  /** Directories R may read besides the system. */
  readable: string[];
  env?: Record<string, string>;
  limits?: RLimits | null;
  timeoutMs?: number;
}

/**
 * Runs an install in the sandbox and collects R's output (its end, MAX_OUTPUT_CHARS), whatever
 * the outcome; killed after its time limit. The one way the service builds R packages: uploads
 * (PackageLibrary) and environments (EnvironmentStore).
 */
export function installInSandbox(
  launcher: RLauncher,
  install: SandboxedInstall,
): Promise<PackageInstallOutcome> {
  const timeoutMs = install.timeoutMs ?? INSTALL_TIMEOUT_MS;
  return new Promise<PackageInstallOutcome>((resolve) => {
    let child: ChildProcess;
    try {
      child = launcher.spawn({
        args: install.args,
        cwd: install.work,
        home: install.work,
        tmp: join(install.work, 'tmp'),
        writable: [install.work],
        readable: install.readable,
        network: false,
        limits: install.limits ?? null,
        env: install.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (error) {
      resolve({ ok: false, output: `R could not start: ${(error as Error).message}` });
      return;
    }
    let output = '';
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-MAX_OUTPUT_CHARS);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killProcessGroup(child);
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ ok: false, output: `R could not start: ${error.message}` });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      killProcessGroup(child);
      const text = output.trimEnd();
      resolve(
        timedOut
          ? { ok: false, output: `${text}\nThe install took longer than ${timeoutMs / 1000} s.` }
          : { ok: code === 0, output: text },
      );
    });
  });
}

/** Names in a directory that R would see (no dot files); none when it does not exist. */
async function listNames(dir: string): Promise<string[]> {
  const entries = await readdir(dir).catch(() => [] as string[]);
  return entries.filter((entry) => !entry.startsWith('.'));
}
