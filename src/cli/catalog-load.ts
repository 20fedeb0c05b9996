import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadConfig } from '../config/app-config';
import { CatalogService } from '../catalog/catalog.service';
import { loadCatalogFolder } from '../catalog/catalog-folder';
import { auditRowJson, AuditRepository } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { UsageError } from '../command-line/cli-command';
import { openStateForCli } from './cli-state';
import { asCliActor, cliActor } from '../command-line/cli-actor';
import { environmentsForCli } from './environment';

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
  const database = await openStateForCli(config);
  const { dataSource, close } = database;
  try {
    const audit = new AuditService(new AuditRepository(dataSource), config);
    const actor = cliActor();
    const environments = await environmentsForCli(config, database);
    const { HttpException } = await import('@nestjs/common');
    let refused = 0;
    const report = await loadCatalogFolder(new CatalogService(dataSource), dir, {
      keepExisting,
      lockfile: (application, bytes) =>
        asCliActor(() =>
          environments.set(application, bytes, actor.principal ?? 'cli', actor),
        ).then(
          ({ created, environment }) =>
            created
              ? `environment ${environment.id} (${environment.resolved.length} packages)`
              : `unchanged (environment ${environment.id})`,
          (error: unknown) => {
            if (error instanceof HttpException) {
              refused++;
              return `refused: ${error.message}`;
            }
            throw error;
          },
        ),
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
    for (const { label, outcome } of report.lockfiles) {
      console.log(`${label}: ${outcome}`);
    }
    for (const file of report.skipped) {
      console.log(`skipped ${file} (not <application>/<SECTION>/<file>)`);
    }
    console.log(
      `${report.created.length} created, ${report.updated.length} updated, ` +
        `${report.kept.length} kept, ${report.skipped.length} skipped` +
        (report.lockfiles.length > 0
          ? `, ${report.lockfiles.length - refused} lockfiles taken, ${refused} refused`
          : ''),
    );
    return refused > 0 ? 1 : 0;
  } finally {
    await close();
  }
}
