import { createHash } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { checkPackageName, readPackageDescription } from './package-archive';
import { PackageRepository } from './package.repository';
import type { PackageNodeView, PackageView } from './packages-view';

/** Largest source package the admin API takes. */
export const MAX_PACKAGE_BYTES = 64 * 1024 * 1024;
/** Media types of a .tar.gz that clients send; application/gzip is the registered one. */
export const PACKAGE_MEDIA_TYPES = [
  'application/gzip',
  'application/x-gzip',
  'application/octet-stream',
];

/**
 * The admin API's side of an application's R packages: checks and stores uploads, lists what
 * each worker node made of them, deletes them. Nodes install and remove on their own
 * (PackageSyncService), woken by the notification each change sends.
 */
@Injectable()
export class PackagesService {
  private readonly logger = new Logger('Packages');

  constructor(private readonly packages: PackageRepository) {}

  /**
   * Stores an upload of package `name` once its body (read by `body`, after the name and type
   * are checked) is a source package of that name. True when the package is new.
   */
  async upload(
    applicationName: string,
    name: string,
    contentType: string | undefined,
    body: () => Promise<Buffer>,
    installedBy: string,
  ): Promise<boolean> {
    checkPackageName(name);
    const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
    if (!PACKAGE_MEDIA_TYPES.includes(type)) {
      throw ApiError.unsupportedMediaType(
        `Send the source package as ${PACKAGE_MEDIA_TYPES.join(', ')} (got "${type.slice(0, 80) || 'no Content-Type'}").`,
      );
    }
    const archive = await body();
    const description = readPackageDescription(archive);
    if (description.name !== name) {
      throw ApiError.badRequest(
        `The archive holds package ${description.name} (its DESCRIPTION's Package field), not ${name}.`,
      );
    }
    const sha256 = createHash('sha256').update(archive).digest('hex');
    const created = await this.packages.store(
      { applicationName, name, version: description.version, sha256, installedBy },
      archive,
    );
    this.logger.log(
      `${created ? 'uploaded' : 'replaced'} R package ${name} ${description.version} of ${applicationName} (${archive.length} bytes, by ${installedBy})`,
    );
    return created;
  }

  async list(applicationName: string): Promise<PackageView[]> {
    const [packages, reports] = await Promise.all([
      this.packages.list(applicationName),
      this.packages.reports({ applicationName }),
    ]);
    return packages.map((pkg) => ({
      applicationName: pkg.applicationName,
      name: pkg.name,
      version: pkg.version,
      sha256: pkg.sha256,
      installedBy: pkg.installedBy,
      installedTime: pkg.installedAt,
      nodes: reports
        .filter((report) => report.packageName === pkg.name)
        .map((report): PackageNodeView => ({
          node: report.nodeId,
          // A report on an earlier upload: the node has not taken this one yet.
          state: report.sha256 === pkg.sha256 ? report.state : 'pending',
          reportedTime: report.reportedAt,
          output: report.sha256 === pkg.sha256 ? report.output : null,
        })),
    }));
  }

  async remove(applicationName: string, name: string): Promise<void> {
    if (!(await this.packages.remove(applicationName, checkPackageName(name)))) {
      throw ApiError.notFound(`Application ${applicationName} has no R package ${name}.`);
    }
    this.logger.log(`deleted R package ${name} of ${applicationName}`);
  }
}
