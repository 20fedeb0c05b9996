import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { CatalogChanges } from '../catalog/catalog-changes';
import { FunctionLibraryService } from '../r-engine/function-library';
import { R_ENGINE, type REngine } from '../r-engine/r-engine';
import { NodeIdentity } from '../storage/node-identity';
import { PACKAGES_SECTION, PackageRepository, type StoredPackage } from './package.repository';

/** The database stays the authority: a node compares its libraries with it this often. */
const SYNC_INTERVAL_MS = 60_000;
export const WEBR_UNSUPPORTED =
  'not supported by the webR engine: R packages cannot be built here (webR runs R as WebAssembly); use native R (R_ENGINE=native) on this node';

/**
 * A worker node's side of the managed R packages: makes the node's libraries match r_package
 * at start-up (before the node claims jobs), when a change is announced on the catalog channel
 * (CatalogChanges), after the node's LISTEN connection was down, and every
 * SYNC_INTERVAL_MS. Reports each install in r_package_node under the worker's node id, and
 * tells the function-call sessions of an application whose packages changed to start afresh.
 * Syncs run one at a time.
 */
@Injectable()
export class PackageSyncService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Packages');
  private queue: Promise<void> = Promise.resolve();
  private pending = false;
  private timer: NodeJS.Timeout | null = null;
  private stopping = false;
  private unsubscribe: (() => void) | null = null;

  constructor(
    @Inject(R_ENGINE) private readonly engine: REngine,
    private readonly packages: PackageRepository,
    private readonly libraries: FunctionLibraryService,
    private readonly changes: CatalogChanges,
    private readonly node: NodeIdentity,
  ) {}

  get nodeId(): string {
    return this.node.id;
  }

  async onModuleInit(): Promise<void> {
    this.unsubscribe = this.changes.subscribe((change) => {
      if (change === null || change.section === PACKAGES_SECTION) {
        void this.sync();
      }
    });
    await this.sync();
    this.timer = setInterval(() => void this.sync(), SYNC_INTERVAL_MS);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    if (this.timer) {
      clearInterval(this.timer);
    }
    await this.queue;
    // This node's libraries go with it (they live in the engine's runtime directory).
    await this.packages.forgetNode(this.nodeId).catch(() => undefined);
  }

  /** Brings this node's libraries in line with the database; resolves when it has. */
  sync(): Promise<void> {
    // One sync runs and at most one waits: a change during a sync is seen by the next.
    if (this.pending) {
      return this.queue;
    }
    this.pending = true;
    this.queue = this.queue.then(async () => {
      this.pending = false;
      if (this.stopping) {
        return;
      }
      try {
        await this.syncOnce();
      } catch (error) {
        this.logger.warn(`could not sync the R packages: ${(error as Error).message}`);
      }
    });
    return this.queue;
  }

  private async syncOnce(): Promise<void> {
    const wanted = await this.packages.list(null);
    const library = this.engine.packages;
    if (!library) {
      await this.reportUnsupported(wanted);
      return;
    }
    const reports = new Map(
      (await this.packages.reports({ nodeId: this.nodeId })).map((report) => [
        `${report.applicationName}/${report.packageName}`,
        report,
      ]),
    );
    const installed = await library.installed();
    const changed = new Set<string>();
    for (const pkg of wanted) {
      const key = `${pkg.applicationName}/${pkg.name}`;
      const report = reports.get(key);
      const have = installed.get(key);
      installed.delete(key);
      if (have === pkg.sha256 || (report?.sha256 === pkg.sha256 && report.state === 'failed')) {
        // Installed, or its build failed here already: a retry would fail the same way.
        if (report?.sha256 !== pkg.sha256) {
          await this.packages.report({ ...this.reportOf(pkg), state: 'installed', output: null });
        }
        continue;
      }
      if (await this.install(pkg)) {
        changed.add(pkg.applicationName);
      }
    }
    for (const key of installed.keys()) {
      const [applicationName, name] = key.split('/');
      await library.remove(applicationName, name);
      this.logger.log(`removed R package ${name} of ${applicationName}`);
      changed.add(applicationName);
    }
    changed.forEach((applicationName) => this.libraries.packagesChanged(applicationName));
  }

  /** Installs one upload; true when the library changed. */
  private async install(pkg: StoredPackage): Promise<boolean> {
    const library = this.engine.packages;
    const archive = await this.packages.archive(pkg.applicationName, pkg.name, pkg.sha256);
    if (!library || !archive) {
      return false; // replaced or deleted meanwhile: the next sync sees what is there now
    }
    const outcome = await library.install(pkg.applicationName, pkg.name, pkg.sha256, archive);
    await this.packages.report({
      ...this.reportOf(pkg),
      state: outcome.ok ? 'installed' : 'failed',
      output: outcome.ok ? null : outcome.output,
    });
    if (outcome.ok) {
      this.logger.log(`installed R package ${pkg.name} ${pkg.version} of ${pkg.applicationName}`);
    } else {
      this.logger.warn(
        `R package ${pkg.name} ${pkg.version} of ${pkg.applicationName} did not install; the version installed before (if any) stays`,
      );
    }
    return outcome.ok;
  }

  private async reportUnsupported(wanted: StoredPackage[]): Promise<void> {
    const reported = new Set(
      (await this.packages.reports({ nodeId: this.nodeId })).map(
        (report) => `${report.applicationName}/${report.packageName}/${report.sha256}`,
      ),
    );
    for (const pkg of wanted) {
      if (!reported.has(`${pkg.applicationName}/${pkg.name}/${pkg.sha256}`)) {
        await this.packages.report({
          ...this.reportOf(pkg),
          state: 'unsupported',
          output: WEBR_UNSUPPORTED,
        });
      }
    }
  }

  private reportOf(pkg: StoredPackage) {
    return {
      applicationName: pkg.applicationName,
      packageName: pkg.name,
      nodeId: this.nodeId,
      sha256: pkg.sha256,
    };
  }
}
