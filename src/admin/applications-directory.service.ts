import { Injectable } from '@nestjs/common';
import { ApplicationSettingsService } from '../applications/application-settings.service';
import { CatalogService } from '../catalog/catalog.service';
import { ApplicationJobCounts, JobRecordsRepository } from '../queue/job-records.repository';

/** An application as the admin API lists it: where it is known from, and its jobs. */
export interface ApplicationListEntry {
  application: string;
  /** It has files in the catalog. */
  inCatalog: boolean;
  /** Its rights and settings: stored at run time, named by the configuration, or neither. */
  settings: 'stored' | 'configuration' | 'none';
  jobs: Omit<ApplicationJobCounts, 'applicationName'>;
}

const NO_JOBS = { queued: 0, running: 0, succeeded: 0, failed: 0 };

/**
 * Which applications exist (docs/api.md#applications): those with catalog files, stored or
 * configured settings, or jobs. Read from the database on each call, so every node answers alike.
 */
@Injectable()
export class ApplicationsDirectory {
  constructor(
    private readonly catalog: CatalogService,
    private readonly settings: ApplicationSettingsService,
    private readonly jobs: JobRecordsRepository,
  ) {}

  async list(): Promise<ApplicationListEntry[]> {
    const [catalogued, named, counts] = await Promise.all([
      this.catalog.listApplications(),
      this.settings.namedApplications(),
      this.jobs.countsByApplication(),
    ]);
    const inCatalog = new Set(catalogued);
    const stored = new Set(named.stored);
    const configured = new Set(named.configured);
    const jobsOf = new Map(counts.map(({ applicationName, ...jobs }) => [applicationName, jobs]));
    const names = new Set([...inCatalog, ...stored, ...configured, ...jobsOf.keys()]);
    return [...names].sort().map((application) => ({
      application,
      inCatalog: inCatalog.has(application),
      settings: stored.has(application)
        ? 'stored'
        : configured.has(application)
          ? 'configuration'
          : 'none',
      jobs: jobsOf.get(application) ?? NO_JOBS,
    }));
  }

  /**
   * The applications known from the catalog and the stored or configured settings, sorted,
   * without reading the jobs (for a view whose statements already find the applications that
   * have recent jobs).
   */
  async namedOrCatalogued(): Promise<string[]> {
    const [catalogued, named] = await Promise.all([
      this.catalog.listApplications(),
      this.settings.namedApplications(),
    ]);
    return [...new Set([...catalogued, ...named.stored, ...named.configured])].sort();
  }

  /** Whether the application is known in any of those ways. */
  async exists(application: string): Promise<boolean> {
    const named = await this.settings.namedApplications();
    if (named.stored.includes(application) || named.configured.includes(application)) {
      return true;
    }
    if ((await this.catalog.listApplications()).includes(application)) {
      return true;
    }
    return this.jobs.hasJobs(application);
  }
}
