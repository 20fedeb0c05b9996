import { Injectable, Logger, OnApplicationShutdown, OnModuleInit, Optional } from '@nestjs/common';
import { ApplicationsConfig } from '../config/config-slices';
import { MetricsService } from '../metrics/metrics.service';
import { CatalogService } from './catalog.service';

/** How often the catalog's application names are read again. */
const REFRESH_MS = 30_000;

/**
 * The application names the service knows: those with catalog files and those named in the
 * configuration (access rules, settings, slots). Metrics label only these by name.
 */
@Injectable()
export class KnownApplications implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(KnownApplications.name);
  private readonly configured: Set<string>;
  private catalogued = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    config: ApplicationsConfig,
    private readonly catalog: CatalogService,
    @Optional() private readonly metrics?: MetricsService,
  ) {
    this.configured = new Set([
      ...Object.keys(config.applicationSecurity),
      ...Object.keys(config.applicationSettings),
      ...Object.keys(config.applicationSlots),
    ]);
  }

  has(name: string): boolean {
    return this.configured.has(name) || this.catalogued.has(name);
  }

  async onModuleInit(): Promise<void> {
    this.metrics?.labelApplicationsBy((name) => this.has(name));
    // Stored here: known at once; stored on another node, or deleted: at the next refresh.
    this.catalog.onFileStored((name) => this.catalogued.add(name));
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) {
      clearInterval(this.timer);
    }
  }

  private async refresh(): Promise<void> {
    try {
      this.catalogued = new Set(await this.catalog.listApplications());
    } catch (error) {
      this.logger.warn(`could not read the catalog's applications: ${(error as Error).message}`);
    }
  }
}
