import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { type Pool, type PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { CATALOG_CHANGED_CHANNEL, CatalogService } from '../catalog/catalog.service';
import { AppConfig } from '../config/app-config';
import { DatabaseTarget } from '../storage/database-options';
import { ListenConnection } from '../storage/listen-connection';
import { DATABASE_TARGET } from '../storage/storage.module';

/** An application's function library: the `.R` files of its catalog section R_FUNCTIONS. */
export interface FunctionLibrary {
  /** Unique per loaded version: a session holding this id needs no reload. */
  id: number;
  /** The application's package generation: changes when this node installed or removed one. */
  packages: number;
  files: Array<{ name: string; content: string }>;
}

/** `<application>/<section>` of a catalog change, or null: changes may have been missed. */
export type CatalogChangeListener = (
  change: { application: string; section: string } | null,
) => void;

export const FUNCTION_SECTION = 'R_FUNCTIONS';

/**
 * Every node's copy of the applications' function libraries, read from the catalog once and
 * dropped when `svc_catalog_changed` says `<app>/R_FUNCTIONS` changed (CatalogService sends it
 * with every change, whichever node or command made it). A dropped library gets a new id, so
 * each warm session reloads it on its next call for that application.
 *
 * On a server the notification arrives on a dedicated LISTEN connection; while that connection
 * is down every library is dropped (a change may have been missed). The embedded database is one
 * session whose changes all come from this process: its notifications are delivered to the
 * connection that made the change, so the pool's connections are watched instead. Without a
 * LISTEN connection (DATABASE_URL through a transaction-mode pooler, no DATABASE_LISTEN_URL) the
 * node compares the section's fingerprints every POLL_INTERVAL_MS instead.
 */
@Injectable()
export class FunctionLibraryService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('FunctionLibrary');
  private readonly cache = new Map<string, Promise<FunctionLibrary>>();
  private nextId = 1;
  private connection: ListenConnection | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private fingerprints: Map<string, string> | null = null;
  private readonly watched = new WeakSet<PoolClient>();
  private readonly packageGenerations = new Map<string, number>();
  private readonly changeListeners: CatalogChangeListener[] = [];

  constructor(
    private readonly catalog: CatalogService,
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(DATABASE_TARGET) private readonly target: DatabaseTarget,
    private readonly config: AppConfig,
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

  /** Forgets one application's library, or all of them. */
  invalidate(applicationName?: string): void {
    if (applicationName === undefined) {
      this.cache.clear();
    } else {
      this.cache.delete(applicationName);
    }
  }

  /**
   * Calls `listener` with every change announced on the catalog channel (the package sync
   * shares this node's one LISTEN connection), and with null when the connection was down.
   */
  onCatalogChanged(listener: CatalogChangeListener): void {
    this.changeListeners.push(listener);
  }

  /** This node's packages of the application changed: its sessions must start afresh. */
  packagesChanged(applicationName: string): void {
    this.packageGenerations.set(
      applicationName,
      (this.packageGenerations.get(applicationName) ?? 0) + 1,
    );
    this.invalidate(applicationName);
  }

  /** A `svc_catalog_changed` payload, `<application>/<section>`. */
  catalogChanged(payload: string): void {
    const [applicationName, section] = payload.split('/');
    if (applicationName && section) {
      this.changeListeners.forEach((listener) =>
        listener({ application: applicationName, section }),
      );
    }
    if (section === FUNCTION_SECTION && applicationName) {
      this.logger.debug(`function library of ${applicationName} changed: reloading it`);
      this.invalidate(applicationName);
    }
  }

  async onModuleInit(): Promise<void> {
    if (this.target.kind === 'embedded') {
      this.watchEmbeddedSession();
      return;
    }
    if (!this.target.listenUrl) {
      await this.compareFingerprints();
      this.pollTimer = setInterval(
        () => void this.compareFingerprints(),
        this.config.pollIntervalMs,
      );
      this.pollTimer.unref();
      return;
    }
    this.connection = new ListenConnection(
      {
        url: this.target.listenUrl,
        applicationName: 'svc-catalog-listener',
        channels: [CATALOG_CHANGED_CHANNEL],
        purpose: 'catalog changes',
      },
      {
        onNotification: (_channel, payload) => this.catalogChanged(payload),
        // Changes made while no connection listened are unknown: start from the catalog again.
        onListening: () => {
          this.invalidate();
          this.changeListeners.forEach((listener) => listener(null));
        },
        onLost: () => this.invalidate(),
      },
      this.logger,
    );
    await this.connection.start();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
    await this.connection?.stop();
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
          this.catalogChanged(`${applicationName}/${FUNCTION_SECTION}`);
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

  private watchEmbeddedSession(): void {
    const pool = (this.dataSource.driver as unknown as { master?: Pool }).master;
    if (!pool) {
      this.logger.warn('no connection pool to watch: function libraries reload only on restart');
      return;
    }
    const watch = (client: PoolClient): void => {
      if (!this.watched.has(client)) {
        this.watched.add(client);
        client.on('notification', (message) => {
          if (message.channel === CATALOG_CHANGED_CHANNEL) {
            this.catalogChanged(message.payload ?? '');
          }
        });
      }
    };
    pool.on('acquire', watch);
    pool.on('connect', (client) => {
      watch(client);
      // LISTEN belongs to the session; issuing it again on a new connection is harmless.
      client.query(`LISTEN ${CATALOG_CHANGED_CHANNEL}`).catch(() => undefined);
    });
    void this.dataSource.query(`LISTEN ${CATALOG_CHANGED_CHANNEL}`).catch((error: Error) => {
      this.logger.warn(`could not LISTEN for catalog changes: ${error.message}`);
    });
  }
}
