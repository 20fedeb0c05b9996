import { Injectable, Logger } from '@nestjs/common';
import { auditRowJson } from '../audit/audit.repository';
import { type AuditActor, type AuditRecord, AuditService } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { rRepositoriesOf } from '../config/app-config';
import { EnvironmentsConfig } from '../config/config-slices';
import { PackageRepository } from '../packages/package.repository';
import { contentsDigest, resolveLockfile } from './environment-resolution';
import { EnvironmentRepository, type StoredEnvironment } from './environment.repository';
import { PackageRepositoryReader } from './package-repositories';
import type { EnvironmentPointers } from './environments-view';
import { lockfileDigest, parseLockfile } from './renv-lockfile';

/** What setting a lockfile did: a new environment, or the one asked for already (unchanged). */
export interface SetEnvironmentOutcome {
  created: boolean;
  environment: StoredEnvironment;
}

/**
 * Applications' R environments (docs/environments.md), shared by the admin API, the command
 * line and the catalog load: a lockfile is checked and resolved against the sources the
 * operator allows before anything is stored, so an environment in the history always names a
 * source for each of its packages.
 */
@Injectable()
export class EnvironmentsService {
  private readonly logger = new Logger('Environments');

  constructor(
    private readonly config: EnvironmentsConfig,
    private readonly environments: EnvironmentRepository,
    private readonly packages: PackageRepository,
    private readonly reader: PackageRepositoryReader,
    private readonly audit: AuditService,
  ) {}

  /** Who acts: the request's caller, or `actor` outside a request (the command line). */
  private auditRow(record: AuditRecord, actor: AuditActor | null): string {
    return auditRowJson(this.audit.rowOf(record, actor));
  }

  /**
   * Makes the lockfile `bytes` the application's environment: 400 naming the entry when it is
   * not a lockfile svc takes or a package is in no allowed source; unchanged when the
   * application asks for the same resolved environment already.
   */
  async set(
    applicationName: string,
    bytes: Buffer,
    createdBy: string,
    actor: AuditActor | null = null,
  ): Promise<SetEnvironmentOutcome> {
    const lockfile = parseLockfile(bytes);
    const uploads = await this.packages.list(applicationName);
    const resolved = await resolveLockfile(
      lockfile,
      { repositories: rRepositoriesOf(this.config), uploads },
      this.reader,
    );
    const lockfileSha256 = lockfileDigest(lockfile);
    const contentsSha256 = contentsDigest(resolved);
    const current = await this.environments.requested(applicationName);
    if (
      current?.lockfileSha256 === lockfileSha256 &&
      current.contentsSha256 === contentsSha256 &&
      // A lockfile given again after its build failed is built again (the sources may be fixed).
      current.buildError === null
    ) {
      return { created: false, environment: current };
    }
    const id = await this.environments.add(
      { applicationName, lockfile, lockfileSha256, resolved, contentsSha256, createdBy },
      this.config.environmentHistory,
      this.auditRow(
        {
          action: 'environment.set',
          applicationName,
          details: { contentsSha256, packages: resolved.length },
        },
        actor,
      ),
    );
    this.logger.log(
      `application ${applicationName} asks for environment ${id} (${resolved.length} packages, ${contentsSha256.slice(0, 12)}, by ${createdBy})`,
    );
    return { created: true, environment: await this.get(applicationName) };
  }

  /** The environment the application asks for; null when none. */
  requested(applicationName: string): Promise<StoredEnvironment | null> {
    return this.environments.requested(applicationName);
  }

  /** Which environments the application asks for and runs its jobs in. */
  async pointers(applicationName: string): Promise<EnvironmentPointers> {
    const state = await this.environments.forJobs(applicationName);
    return { requestedId: state?.requested.id ?? null, activeId: state?.active?.id ?? null };
  }

  /** The environment the application asks for; 404 when none. */
  async get(applicationName: string): Promise<StoredEnvironment> {
    const environment = await this.environments.requested(applicationName);
    if (environment === null) {
      throw ApiError.notFound(`Application ${applicationName} has no R environment.`);
    }
    return environment;
  }

  /** The application's environments kept (ENVIRONMENT_HISTORY), newest first. */
  history(applicationName: string): Promise<StoredEnvironment[]> {
    return this.environments.history(applicationName);
  }

  /** One environment of the application's history; 404 when it has none of that id. */
  async one(applicationName: string, id: string): Promise<StoredEnvironment> {
    const found = (await this.history(applicationName)).find(
      (environment) => environment.id === id,
    );
    if (found === undefined) {
      throw this.notInHistory(applicationName, id);
    }
    return found;
  }

  private notInHistory(applicationName: string, id: string): ApiError {
    return ApiError.notFound(
      `Application ${applicationName} has no environment ${JSON.stringify(id.slice(0, 40))} in its history.`,
    );
  }

  /** Goes back to an earlier environment of the application: nothing is resolved or built again. */
  async rollback(
    applicationName: string,
    id: string,
    actor: AuditActor | null = null,
  ): Promise<StoredEnvironment> {
    const from = await this.environments.requested(applicationName);
    const known =
      /^[1-9]\d{0,17}$/.test(id) &&
      (await this.environments.request(
        applicationName,
        id,
        this.auditRow(
          {
            action: 'environment.rolledBack',
            applicationName,
            details: { environmentId: id, from: from?.id ?? null },
          },
          actor,
        ),
      ));
    if (!known) {
      throw this.notInHistory(applicationName, id);
    }
    this.logger.log(`application ${applicationName} went back to environment ${id}`);
    return this.get(applicationName);
  }

  /** The application asks for no environment any more; 404 when it asked for none. */
  async remove(applicationName: string, actor: AuditActor | null = null): Promise<void> {
    const current = await this.environments.requested(applicationName);
    const removed =
      current !== null &&
      (await this.environments.clear(
        applicationName,
        this.auditRow(
          {
            action: 'environment.removed',
            applicationName,
            details: { environmentId: current.id },
          },
          actor,
        ),
      ));
    if (!removed) {
      throw ApiError.notFound(`Application ${applicationName} has no R environment.`);
    }
    this.logger.log(`application ${applicationName} asks for no environment any more`);
  }
}
