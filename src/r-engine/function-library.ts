import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { CatalogChanges } from '../catalog/catalog-changes';
import { CatalogService } from '../catalog/catalog.service';
import { QueueConfig } from '../config/config-slices';
import { ExportedFunction, exportedFunctions } from './exported-functions';

/** An application's function library: the `.R` files of its catalog section R_FUNCTIONS. */
export interface FunctionLibrary {
  /** Unique per loaded version: a session holding this id needs no reload. */
  id: number;
  /** The application's package generation: changes when this node installed or removed one. */
  packages: number;
  files: Array<{ name: string; content: string }>;
}

/**
 * Where an engine's function calls get an application's library: FunctionLibraryService, or a
 * test's own. The engines and the session pool take it; it imports nothing of them.
 */
export interface FunctionLibrarySource {
  get(applicationName: string): Promise<FunctionLibrary>;
}

export const FUNCTION_SECTION = 'R_FUNCTIONS';

/**
 * Every node's copy of the applications' function libraries, read from the catalog once and
 * dropped when CatalogChanges says `<app>/R_FUNCTIONS` changed (whichever node or command made
 * the change). A dropped library gets a new id, so each warm session reloads it on its next call
 * for that application.
 *
 * Other nodes' changes arrive on the node's LISTEN connection; while that connection is down, and
 * when it is back, every library is dropped (a change may have been missed). On the embedded
 * database every change is made by this process and reported in-process. Without a LISTEN
 * connection (DATABASE_URL through a transaction-mode pooler, no DATABASE_LISTEN_URL) the node
 * compares the section's fingerprints every POLL_INTERVAL_MS instead.
 */
@Injectable()
export class FunctionLibraryService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('FunctionLibrary');
  private readonly cache = new Map<string, Promise<FunctionLibrary>>();
  /** Each loaded library's exported functions; gone with the library. */
  private readonly exports = new WeakMap<FunctionLibrary, ExportedFunction[]>();
  private nextId = 1;
  private pollTimer: NodeJS.Timeout | null = null;
  private fingerprints: Map<string, string> | null = null;
  private readonly packageGenerations = new Map<string, number>();
  private readonly unsubscribe: Array<() => void> = [];

  constructor(
    private readonly catalog: CatalogService,
    private readonly changes: CatalogChanges,
    private readonly config: QueueConfig,
  ) {}

  /** The application's library; read from the catalog on first use and after a change. */
  get(applicationName: string): Promise<FunctionLibrary> {
    let library = this.cache.get(applicationName);
    if (!library) {
      library = this.read(applicationName);
      this.cache.set(applicationName, library);
      // A failed read is not remembered.
      library.catch(() => {
        if (this.cache.get(applicationName) === library) {
          this.cache.delete(applicationName);
        }
      });
    }
    return library;
  }

  /**
   * The functions the application's library exports (`@export`), read once per version of the
   * library: the listing, the direct call and a queued call's worker all ask here.
   */
  async exported(applicationName: string): Promise<ExportedFunction[]> {
    const library = await this.get(applicationName);
    let functions = this.exports.get(library);
    if (!functions) {
      functions = exportedFunctions(library.files);
      this.exports.set(library, functions);
    }
    return functions;
  }

  /** Forgets one application's library, or all of them. */
  invalidate(applicationName?: string): void {
    if (applicationName === undefined) {
      this.cache.clear();
    } else {
      this.cache.delete(applicationName);
    }
  }

  /** This node's packages of the application changed: its sessions must start afresh. */
  packagesChanged(applicationName: string): void {
    this.packageGenerations.set(
      applicationName,
      (this.packageGenerations.get(applicationName) ?? 0) + 1,
    );
    this.invalidate(applicationName);
  }

  /** The function files of `applicationName` changed: its library is read again. */
  private functionsChanged(applicationName: string): void {
    this.logger.debug(`function library of ${applicationName} changed: reloading it`);
    this.invalidate(applicationName);
  }

  async onModuleInit(): Promise<void> {
    this.unsubscribe.push(
      this.changes.subscribe((change) => {
        if (change === null) {
          // Changes made while no connection listened are unknown: start from the catalog again.
          this.invalidate();
        } else if (change.section === FUNCTION_SECTION) {
          this.functionsChanged(change.application);
        }
      }),
      this.changes.onLost(() => this.invalidate()),
    );
    if (this.changes.otherNodes === 'unheard') {
      await this.compareFingerprints();
      this.pollTimer = setInterval(
        () => void this.compareFingerprints(),
        this.config.pollIntervalMs,
      );
      this.pollTimer.unref();
    }
    await this.changes.listen();
  }

  onApplicationShutdown(): void {
    if (this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
    this.unsubscribe.forEach((stop) => stop());
  }

  /** The polling replacement of the notification: drops the libraries whose files changed. */
  private async compareFingerprints(): Promise<void> {
    try {
      const now = await this.catalog.sectionFingerprints(FUNCTION_SECTION);
      const before = this.fingerprints;
      this.fingerprints = now;
      if (!before) {
        return;
      }
      for (const applicationName of new Set([...before.keys(), ...now.keys()])) {
        if (before.get(applicationName) !== now.get(applicationName)) {
          this.functionsChanged(applicationName);
        }
      }
    } catch {
      // The database is unreachable: a change may be missed, so start from the catalog again.
      this.fingerprints = null;
      this.invalidate();
    }
  }

  private async read(applicationName: string): Promise<FunctionLibrary> {
    const id = this.nextId++;
    const packages = this.packageGenerations.get(applicationName) ?? 0;
    const names = (await this.catalog.listFiles(applicationName))
      .filter((file) => file.section === FUNCTION_SECTION && /\.r$/i.test(file.name))
      .map((file) => file.name);
    const files: FunctionLibrary['files'] = [];
    for (const name of names) {
      const content = await this.catalog.getFile(applicationName, FUNCTION_SECTION, name);
      if (content) {
        files.push({ name, content: content.toString('utf8') });
      }
    }
    return { id, packages, files };
  }
}
