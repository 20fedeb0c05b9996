import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadConfig } from '../config/app-config';
import { CatalogService } from '../catalog/catalog.service';
import { loadCatalogFolder } from '../catalog/catalog-folder';
import { auditRowJson, AuditRepository } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { UsageError } from '../command-line/cli-command';
import { openStateForCli } from './cli-state';
import { cliActor } from '../command-line/cli-actor';

/**
 * `svc catalog load <dir> [--keep-existing]`: upserts a catalog folder into the configured
 * database; with `--keep-existing` only files the catalog lacks are added.
 */
export async function catalogLoad(dirArgument: string, keepExisting: boolean): Promise<number> {
  const dir = resolve(dirArgument);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new UsageError(`${dir} is not a directory`);
  }
  const config = loadConfig();
  const { dataSource, close } = await openStateForCli(config);
  try {
    const audit = new AuditService(new AuditRepository(dataSource), config);
    const actor = cliActor();
    const report = await loadCatalogFolder(new CatalogService(dataSource), dir, {
      keepExisting,
      audit: (applicationName, section, name) =>
        auditRowJson(
          audit.rowOf(
            {
              action: 'catalog.changed',
              applicationName,
              details: { section, file: name, change: 'stored' },
            },
            actor,
          ),
        ),
    });
    for (const file of report.created) {
      console.log(`created ${file}`);
    }
    for (const file of report.updated) {
      console.log(`updated ${file}`);
    }
    for (const file of report.kept) {
      console.log(`kept ${file} (the catalog has it already)`);
    }
    for (const file of report.skipped) {
      console.log(`skipped ${file} (not <application>/<SECTION>/<file>)`);
    }
    console.log(
      `${report.created.length} created, ${report.updated.length} updated, ` +
        `${report.kept.length} kept, ${report.skipped.length} skipped`,
    );
    return 0;
  } finally {
    await close();
  }
}
