import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CATALOG_SECTIONS, CatalogSection } from './catalog-file.entity';
import { CatalogService } from './catalog.service';

export interface CatalogLoadReport {
  created: string[];
  updated: string[];
  /** Files the catalog had already, left as they were (keepExisting). */
  kept: string[];
  skipped: string[];
  /** Lockfiles (`<application>/renv.lock`) handed to `lockfile`, with what it made of each. */
  lockfiles: Array<{ label: string; outcome: string }>;
}

/** An application's lockfile in a catalog folder: `<dir>/<application>/renv.lock`. */
export const LOCKFILE_NAME = 'renv.lock';

const APPLICATION_NAME = /^\w{1,64}$/;

/**
 * Loads a folder laid out `<dir>/<application>/<SECTION>/<file>` into the catalog (upsert:
 * same-named files are replaced, others kept; with `keepExisting` only files the catalog does
 * not have are added, so an admin's changes stay). Anything else in the folder is reported as
 * skipped.
 */
export async function loadCatalogFolder(
  catalog: CatalogService,
  dir: string,
  options: {
    keepExisting?: boolean;
    /** The audit row of a stored file (auditRowJson), written by the storing statement. */
    audit?: (application: string, section: CatalogSection, name: string) => string | null;
    /**
     * Takes an application's lockfile (the environments' feature, above the catalog); its
     * answer is reported. Without it, a lockfile is skipped like any other unknown entry.
     */
    lockfile?: (application: string, bytes: Buffer) => Promise<string>;
  } = {},
): Promise<CatalogLoadReport> {
  const report: CatalogLoadReport = {
    created: [],
    updated: [],
    kept: [],
    skipped: [],
    lockfiles: [],
  };
  for (const application of readdirSync(dir).sort()) {
    const appDir = join(dir, application);
    if (!statSync(appDir).isDirectory() || !APPLICATION_NAME.test(application)) {
      report.skipped.push(application);
      continue;
    }
    for (const section of readdirSync(appDir).sort()) {
      const sectionDir = join(appDir, section);
      if (section === LOCKFILE_NAME && options.lockfile && statSync(sectionDir).isFile()) {
        report.lockfiles.push({
          label: `${application}/${section}`,
          outcome: await options.lockfile(application, readFileSync(sectionDir)),
        });
        continue;
      }
      if (
        !statSync(sectionDir).isDirectory() ||
        !(CATALOG_SECTIONS as readonly string[]).includes(section)
      ) {
        report.skipped.push(`${application}/${section}`);
        continue;
      }
      for (const name of readdirSync(sectionDir).sort()) {
        const path = join(sectionDir, name);
        const label = `${application}/${section}/${name}`;
        if (!statSync(path).isFile()) {
          report.skipped.push(label);
          continue;
        }
        if (
          options.keepExisting &&
          (await catalog.getFile(application, section as CatalogSection, name)) !== null
        ) {
          report.kept.push(label);
          continue;
        }
        const created = await catalog.putFile(
          application,
          section as CatalogSection,
          name,
          readFileSync(path),
          options.audit?.(application, section as CatalogSection, name) ?? null,
        );
        (created ? report.created : report.updated).push(label);
      }
    }
  }
  return report;
}
