import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RLauncher, RLimits } from '../launch/r-launcher';
import { installDirectory, installInSandbox } from './package-library';

/** One package of an environment, as its build needs it. */
export interface EnvironmentPackage {
  name: string;
  version: string;
  /** SHA-256 of its source package: with the version, R x.y and platform, its cache key. */
  sourceSha256: string;
  /** The packages of the environment it needs (installed before it). */
  requirements: string[];
}

/** What the build of one environment's library did. */
export type EnvironmentBuildOutcome =
  | { ok: true; packages: Array<{ name: string; version: string; cached: boolean }> }
  | { ok: false; failedPackage: string; log: string };

/** The file in an environment's library that says it is one: it holds the library's digest. */
export const ENVIRONMENT_MARKER = '.svc-environment';
const CACHE = 'cache';
const LIBRARIES = 'libraries';
const LOGS = 'logs';
const WORK = '.work';

/**
 * A node's built R packages and environments' libraries under `root` (R_ENVIRONMENTS_DIR),
 * content-addressed so that nodes sharing the directory build each package once:
 *
 * - `cache/<key>/<package>`: one package version built once, `<key>` the digest of (package,
 *   version, source digest, R x.y, platform); `logs/<key>.log` its R CMD INSTALL output.
 * - `libraries/<digest>/`: an environment, a directory of links into the cache (and the marker
 *   file), `<digest>` that of its resolved contents, R x.y and platform.
 *
 * Everything is built in a private directory under `.work/` and moved in place by a rename: a
 * node killed mid-build leaves a work directory (removed by the next build), never a half-built
 * package or library under its final name.
 */
export class EnvironmentStore {
  constructor(
    readonly root: string,
    private readonly launcher: () => RLauncher,
    private readonly limits: () => RLimits | null,
  ) {}

  /** The cache key of one package version for this R (`major.minor`) and platform. */
  static cacheKey(pkg: EnvironmentPackage, rMinor: string, platform: string): string {
    return createHash('sha256')
      .update(JSON.stringify([pkg.name, pkg.version, pkg.sourceSha256, rMinor, platform]))
      .digest('hex');
  }

  /** The digest naming an environment's library: its contents, R x.y and platform. */
  static libraryDigest(contentsSha256: string, rMinor: string, platform: string): string {
    return createHash('sha256')
      .update(JSON.stringify([contentsSha256, rMinor, platform]))
      .digest('hex');
  }

  libraryDir(digest: string): string {
    return join(this.root, LIBRARIES, digest);
  }

  /** True when the environment's library is complete here (its marker is written last). */
  async hasLibrary(digest: string): Promise<boolean> {
    return isFile(join(this.libraryDir(digest), ENVIRONMENT_MARKER));
  }

  /**
   * Makes the library `digest` of `packages`, building into the cache only what it lacks, each
   * package after those it requires, with only those on its library path. `source` fetches a
   * package's source package (checked by the caller against its digest). Stops at the first
   * package that fails to build: its name and the end of its log.
   */
  async build(
    digest: string,
    packages: EnvironmentPackage[],
    rMinor: string,
    platform: string,
    source: (pkg: EnvironmentPackage) => Promise<Buffer>,
  ): Promise<EnvironmentBuildOutcome> {
    await this.open();
    const byName = new Map(packages.map((pkg) => [pkg.name, pkg]));
    const keyOf = (pkg: EnvironmentPackage): string =>
      EnvironmentStore.cacheKey(pkg, rMinor, platform);
    const report: Array<{ name: string; version: string; cached: boolean }> = [];
    for (const pkg of installOrder(packages)) {
      const key = keyOf(pkg);
      const entry = join(this.root, CACHE, key);
      if (await isFile(join(entry, pkg.name, 'DESCRIPTION'))) {
        report.push({ name: pkg.name, version: pkg.version, cached: true });
        continue;
      }
      const dependencies = [...requiredClosure(pkg, byName)].map((name) =>
        join(this.root, CACHE, keyOf(byName.get(name) as EnvironmentPackage)),
      );
      const built = await this.install(pkg, key, await source(pkg), dependencies);
      if (!built.ok) {
        return { ok: false, failedPackage: `${pkg.name} ${pkg.version}`, log: built.log };
      }
      report.push({ name: pkg.name, version: pkg.version, cached: false });
    }
    if (!(await this.hasLibrary(digest))) {
      const work = await mkdtemp(join(this.root, WORK, 'library-'));
      try {
        for (const pkg of packages) {
          await symlink(join(this.root, CACHE, keyOf(pkg), pkg.name), join(work, pkg.name));
        }
        await writeFile(join(work, ENVIRONMENT_MARKER), `${digest}\n`);
        // chmod: the service's umask (PRIVATE_UMASK) would close them to the sandbox user.
        await chmod(join(work, ENVIRONMENT_MARKER), 0o644);
        await chmod(work, 0o755);
        await rename(work, this.libraryDir(digest)).catch(async (error: NodeJS.ErrnoException) => {
          // Another node (or build) made it meanwhile: the same contents under the same name.
          if (!(await this.hasLibrary(digest))) {
            throw error;
          }
        });
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    }
    return { ok: true, packages: report };
  }

  /** Makes its directories: before any sandbox binds the root (a missing one cannot be bound). */
  async open(): Promise<void> {
    // 0755: the sandbox's user reads the cache and libraries; only the service writes them.
    for (const dir of [
      this.root,
      join(this.root, CACHE),
      join(this.root, LIBRARIES),
      join(this.root, LOGS),
    ]) {
      await mkdir(dir, { recursive: true });
      await chmod(dir, 0o755);
    }
    // 0711: a sandboxed install runs as another user, who must reach its directory (never list).
    await mkdir(join(this.root, WORK), { recursive: true });
    await chmod(join(this.root, WORK), 0o711);
  }

  private async install(
    pkg: EnvironmentPackage,
    key: string,
    archive: Buffer,
    dependencies: string[],
  ): Promise<{ ok: boolean; log: string }> {
    const launcher = this.launcher();
    const { work, library, tarball } = await installDirectory(
      launcher,
      join(this.root, WORK),
      `${pkg.name}_${pkg.version}.tar.gz`,
      archive,
    );
    try {
      // The package sees what it requires and R's own library: never the node's site library
      // (R takes an empty R_LIBS_SITE for its default, the site library: it names the target).
      const libraries = [library, ...dependencies].join(':');
      const outcome = await installInSandbox(launcher, {
        args: [launcher.rSource('install-package.R'), tarball, library, dependencies.join(':')],
        work,
        readable: [join(this.root, CACHE)],
        env: {
          R_LIBS_SITE: libraries,
          R_LIBS_USER: libraries,
        },
        limits: this.limits(),
      });
      await writeFile(join(this.root, LOGS, `${key}.log`), outcome.output, { mode: 0o644 });
      if (!outcome.ok) {
        return { ok: false, log: outcome.output };
      }
      // What the install left is the package's: the directories are checked without following a
      // link (its processes are gone, so nothing changes them meanwhile), and only then is the
      // library moved into the cache by a rename, which follows nothing either.
      if (
        !(await isDirectory(library)) ||
        !(await isDirectory(join(library, pkg.name))) ||
        !(await isFile(join(library, pkg.name, 'DESCRIPTION')))
      ) {
        return {
          ok: false,
          log: `${outcome.output}\nR CMD INSTALL did not install a package named ${pkg.name}.`,
        };
      }
      await rename(library, join(this.root, CACHE, key)).catch(
        async (error: NodeJS.ErrnoException) => {
          if (!(await isFile(join(this.root, CACHE, key, pkg.name, 'DESCRIPTION')))) {
            throw error;
          }
        },
      );
      return { ok: true, log: outcome.output };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}

/** The packages in an order where each comes after those of the environment it requires. */
export function installOrder(packages: EnvironmentPackage[]): EnvironmentPackage[] {
  const byName = new Map(packages.map((pkg) => [pkg.name, pkg]));
  const ordered: EnvironmentPackage[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (pkg: EnvironmentPackage): void => {
    if (state.get(pkg.name) !== undefined) {
      // 'visiting': a cycle, which R cannot install either; the order then breaks it here.
      return;
    }
    state.set(pkg.name, 'visiting');
    for (const name of pkg.requirements) {
      const required = byName.get(name);
      if (required) {
        visit(required);
      }
    }
    state.set(pkg.name, 'done');
    ordered.push(pkg);
  };
  packages.forEach(visit);
  return ordered;
}

/** Every package of the environment that `pkg` needs, directly or not. */
function requiredClosure(
  pkg: EnvironmentPackage,
  byName: Map<string, EnvironmentPackage>,
): Set<string> {
  const seen = new Set<string>();
  const pending = [...pkg.requirements];
  while (pending.length > 0) {
    const name = pending.pop() as string;
    const required = byName.get(name);
    if (required && !seen.has(name) && name !== pkg.name) {
      seen.add(name);
      pending.push(...required.requirements);
    }
  }
  return seen;
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isDirectory();
  } catch {
    return false;
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isFile();
  } catch {
    return false;
  }
}
