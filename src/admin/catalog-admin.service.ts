import { Injectable, Logger, Optional } from '@nestjs/common';
import { auditRowJson } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { REST_PREFIX } from '../common/public-uri';
import { CATALOG_SECTIONS, CatalogSection } from '../catalog/catalog-file.entity';
import { CatalogService } from '../catalog/catalog.service';
import { CatalogView } from './catalog-view';

/** Longest file name the catalog stores (its column). */
const MAX_FILE_NAME_LENGTH = 255;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

export function checkSection(section: string): CatalogSection {
  if (!(CATALOG_SECTIONS as readonly string[]).includes(section)) {
    throw ApiError.badRequest(
      `"${section.slice(0, 80)}" is not a catalog section; use one of ${CATALOG_SECTIONS.join(', ')}.`,
    );
  }
  return section as CatalogSection;
}

/** A catalog file name is a plain name: no path separator, no `..`, no control character. */
export function checkFileName(name: string): string {
  const shown = JSON.stringify(name.slice(0, 80));
  if (name === '' || name.length > MAX_FILE_NAME_LENGTH) {
    throw ApiError.badRequest(
      `A catalog file name must have 1 to ${MAX_FILE_NAME_LENGTH} characters.`,
    );
  }
  if (/[/\\]/.test(name) || name.includes('..') || CONTROL_CHARACTERS.test(name)) {
    throw ApiError.badRequest(
      `The catalog file name ${shown} is not a plain file name: no path separators, no "..", no control characters.`,
    );
  }
  return name;
}

/** Link of a catalog file; the application travels in X-SVC-Application-Name, like every admin call. */
export function catalogFileUri(base: string, section: string, name: string): string {
  return `${base}${REST_PREFIX}/admin/catalog/${section}/${encodeURIComponent(name)}`;
}

/** The admin API's side of the catalog (SPEC §8): checks names and sizes, logs every change. */
@Injectable()
export class CatalogAdminService {
  private readonly logger = new Logger('Catalog');

  constructor(
    private readonly catalog: CatalogService,
    @Optional() private readonly audit?: AuditService,
  ) {}

  /** The audit row of a change to a catalog file, for the changing statement. */
  private auditRow(applicationName: string, details: Record<string, unknown>): string | null {
    return this.audit
      ? auditRowJson(this.audit.rowOf({ action: 'catalog.changed', applicationName, details }))
      : null;
  }

  async view(applicationName: string, base: string): Promise<CatalogView> {
    const files = await this.catalog.listFiles(applicationName);
    return {
      directories: CATALOG_SECTIONS.map((section) => ({
        type: section,
        files: files
          .filter((file) => file.section === section)
          .map((file) => ({ name: file.name, dataUri: catalogFileUri(base, section, file.name) })),
      })),
    };
  }

  async read(applicationName: string, section: string, name: string): Promise<Buffer> {
    const content = await this.catalog.getFile(
      applicationName,
      checkSection(section),
      checkFileName(name),
    );
    if (content === null) {
      throw ApiError.notFound(
        `Application ${applicationName} has no catalog file ${section}/${name}.`,
      );
    }
    return content;
  }

  /** Stores a file; returns true when it was created (false: replaced). */
  async write(
    applicationName: string,
    section: string,
    name: string,
    content: Buffer,
  ): Promise<boolean> {
    const created = await this.catalog.putFile(
      applicationName,
      checkSection(section),
      checkFileName(name),
      content,
      this.auditRow(applicationName, {
        section,
        file: name,
        change: 'stored',
        bytes: content.length,
      }),
    );
    this.logger.log(
      `${created ? 'created' : 'updated'} ${applicationName}/${section}/${name} (${content.length} bytes)`,
    );
    return created;
  }

  async remove(applicationName: string, section: string, name: string): Promise<void> {
    const deleted = await this.catalog.deleteFile(
      applicationName,
      checkSection(section),
      checkFileName(name),
      this.auditRow(applicationName, { section, file: name, change: 'deleted' }),
    );
    if (!deleted) {
      throw ApiError.notFound(
        `Application ${applicationName} has no catalog file ${section}/${name}.`,
      );
    }
    this.logger.log(`deleted ${applicationName}/${section}/${name}`);
  }
}
