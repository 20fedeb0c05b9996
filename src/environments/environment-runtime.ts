import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DatabaseConfig } from '../config/config-slices';
import { PackageRepository } from '../packages/package.repository';
import { EnvironmentStore } from '../r-engine/native/environment-store';
import { R_ENGINE, type REngine } from '../r-engine/r-engine';
import { EnvironmentRepository, type StoredEnvironment } from './environment.repository';
import type { ResolvedPackage } from './environment-resolution';
import {
  MAX_SOURCE_PACKAGE_BYTES,
  PackageRepositoryReader,
  sourcePackagePath,
} from './package-repositories';

/** The library a job runs in. */
export interface JobEnvironment {
  environmentId: string;
  /** The digest naming the library: resolved contents, R x.y, platform. */
  librarySha256: string;
  libraryDir: string;
}

/** The application has an environment this node cannot give its job: the job fails with this. */
export class EnvironmentUnavailable extends Error {
  override readonly name = 'EnvironmentUnavailable';
}

/** The end of a failed build's log kept with the environment (and shown by the admin API). */
const MAX_BUILD_ERROR_CHARS = 8000;

/**
 * The environments on a worker node: before a job of an application with an environment runs,
 * the library it runs in. The one the application asks for is built when a job first needs it
 * (once per library across nodes that share R_ENVIRONMENTS_DIR: a PostgreSQL advisory lock per
 * library), and put in force when it is built; a failed build is recorded and the one in force
 * before stays. A job runs in whatever is in force when it starts: a switch never touches a
 * running job, whose library (immutable, content-addressed) stays where it is.
 */
@Injectable()
export class EnvironmentRuntime {
  private readonly logger = new Logger('Environments');
  /** Builds under way on this node, by library digest. */
  private readonly building = new Map<string, Promise<void>>();
  private rIdentity: { rMinor: string; platform: string } | undefined;

  constructor(
    private readonly environments: EnvironmentRepository,
    private readonly packages: PackageRepository,
    private readonly reader: PackageRepositoryReader,
    private readonly database: DatabaseConfig,
    @Inject(R_ENGINE) private readonly engine: REngine,
    @InjectDataSource() private readonly dataSource: DataSource,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  /** The library a job of `applicationName` runs in; null when it has no environment in force. */
  async forJob(applicationName: string): Promise<JobEnvironment | null> {
    const state = await this.environments.forJobs(applicationName);
    if (state === null) {
      return null;
    }
    const store = this.engine.environments;
    if (store === null) {
      throw new EnvironmentUnavailable(
        `Application ${applicationName} has an R environment (its renv.lock), which the ${this.engine.kind} engine cannot build: its jobs run on native R nodes (docs/environments.md).`,
      );
    }
    const { rMinor, platform } = await this.identity();
    let inForce = state.active;
    const { requested } = state;
    if (requested.id !== inForce?.id && requested.buildError === null) {
      const started = Date.now();
      const built = await this.ensureLibrary(store, requested, rMinor, platform);
      if (built.ok) {
        await this.environments.built(requested.id, {
          librarySha256: built.librarySha256,
          rVersion: rMinor,
          platform,
          packages: built.packages,
          seconds: Math.round((Date.now() - started) / 100) / 10,
        });
        inForce = requested;
      } else {
        this.logger.warn(
          `the environment ${requested.id} of ${applicationName} failed to build (${built.error.split('\n')[0]}); ${inForce ? `environment ${inForce.id} stays in force` : 'its jobs run without one'}`,
        );
        await this.environments.buildFailed(requested.id, built.error);
      }
    }
    if (inForce === null) {
      return null;
    }
    const library = await this.ensureLibrary(store, inForce, rMinor, platform);
    if (!library.ok) {
      throw new EnvironmentUnavailable(
        `The R environment ${inForce.id} of application ${applicationName} could not be made on this node: ${library.error}`,
      );
    }
    return {
      environmentId: inForce.id,
      librarySha256: library.librarySha256,
      libraryDir: store.libraryDir(library.librarySha256),
    };
  }

  /** R's `major.minor` and the platform, which a built package belongs to. */
  private async identity(): Promise<{ rMinor: string; platform: string }> {
    if (this.rIdentity === undefined) {
      const version = /R version (\d+)\.(\d+)/.exec(await this.engine.version());
      this.rIdentity = {
        rMinor: version ? `${version[1]}.${version[2]}` : 'unknown',
        platform: `${process.arch}-${process.platform}`,
      };
    }
    return this.rIdentity;
  }

  /**
   * The environment's library on this node, built if it is not there: once at a time per
   * library on this node, and, with a database server (nodes that may share the directory),
   * under an advisory lock, so that the second node finds what the first built.
   */
  private async ensureLibrary(
    store: EnvironmentStore,
    environment: StoredEnvironment,
    rMinor: string,
    platform: string,
  ): Promise<
    | {
        ok: true;
        librarySha256: string;
        packages: Array<{ name: string; version: string; cached: boolean }>;
      }
    | { ok: false; error: string }
  > {
    const librarySha256 = EnvironmentStore.libraryDigest(
      environment.contentsSha256,
      rMinor,
      platform,
    );
    const cachedOnly = environment.resolved.map((pkg) => ({
      name: pkg.name,
      version: pkg.version,
      cached: true,
    }));
    if (await store.hasLibrary(librarySha256)) {
      return { ok: true, librarySha256, packages: cachedOnly };
    }
    let outcome:
      | { ok: true; packages: Array<{ name: string; version: string; cached: boolean }> }
      | { ok: false; error: string } = { ok: true, packages: cachedOnly };
    const build = async (): Promise<void> => {
      const built = await store.build(
        librarySha256,
        environment.resolved,
        rMinor,
        platform,
        (pkg) => this.source(environment, pkg as ResolvedPackage),
      );
      outcome = built.ok
        ? built
        : {
            ok: false,
            error: `${built.failedPackage} failed to build:\n${built.log}`.slice(
              -MAX_BUILD_ERROR_CHARS,
            ),
          };
    };
    let running = this.building.get(librarySha256);
    if (running === undefined) {
      const started = Date.now();
      running = this.locked(librarySha256, build).finally(() =>
        this.building.delete(librarySha256),
      );
      this.building.set(librarySha256, running);
      try {
        await running;
      } catch (error) {
        outcome = { ok: false, error: (error as Error).message };
      }
      this.metrics?.environmentBuilt(
        environment.applicationName,
        outcome.ok,
        (Date.now() - started) / 1000,
        outcome.ok ? outcome.packages : [],
      );
    } else {
      await running.catch(() => undefined);
      outcome = (await store.hasLibrary(librarySha256))
        ? { ok: true, packages: cachedOnly }
        : { ok: false, error: 'its build on this node failed' };
    }
    return outcome.ok ? { ok: true, librarySha256, packages: outcome.packages } : outcome;
  }

  /** Runs `fn` under the library's advisory lock (a database server), else as it is. */
  private async locked(librarySha256: string, fn: () => Promise<void>): Promise<void> {
    if (this.database.embeddedDatabase) {
      // One node per DATA_DIR: nobody to wait for, and the embedded database's one connection
      // must not be held for a build.
      return fn();
    }
    const key = createHash('sha256').update(librarySha256).digest().readBigInt64BE(0);
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('SELECT pg_advisory_lock($1::bigint)', [key.toString()]);
      try {
        await fn();
      } finally {
        await runner.query('SELECT pg_advisory_unlock($1::bigint)', [key.toString()]);
      }
    } finally {
      await runner.release();
    }
  }

  /** A package's source package, checked against the digest it was resolved with. */
  private async source(environment: StoredEnvironment, pkg: ResolvedPackage): Promise<Buffer> {
    const bytes =
      pkg.origin === 'upload'
        ? await this.packages.archive(environment.applicationName, pkg.name, pkg.sourceSha256)
        : await this.reader.read(
            pkg.repository ?? '',
            sourcePackagePath(pkg.name, pkg.version, pkg.origin === 'archive'),
            MAX_SOURCE_PACKAGE_BYTES,
          );
    if (bytes === null || createHash('sha256').update(bytes).digest('hex') !== pkg.sourceSha256) {
      throw new Error(
        `the source of ${pkg.name} ${pkg.version} changed since the lockfile was resolved (set the lockfile again)`,
      );
    }
    return bytes;
  }
}
