import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadConfig } from '../config/app-config';
import { CatalogService } from '../catalog/catalog.service';
import { loadCatalogFolder } from '../catalog/catalog-folder';
import { openDatabaseForCli, pendingMigrations } from '../storage/database-options';
import { runCommand } from './run-command';

/** `npm run catalog:load -- <dir>`: upserts a catalog folder into the configured database. */
async function main(argv: string[]): Promise<number> {
  const [dirArgument] = argv;
  if (!dirArgument) {
    console.error(
      'usage: npm run catalog:load -- <dir>   (laid out <dir>/<application>/<SECTION>/<file>)',
    );
    return 2;
  }
  const dir = resolve(dirArgument);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    console.error(`catalog:load: ${dir} is not a directory`);
    return 2;
  }
  const config = loadConfig();
  const { dataSource, close } = await openDatabaseForCli(config);
  try {
    if (config.embeddedDatabase) {
      await dataSource.runMigrations({ transaction: 'each' });
    } else if ((await pendingMigrations(dataSource)).length > 0) {
      console.error(
        'catalog:load: the database has pending migrations; run `npm run migration:run` first',
      );
      return 1;
    }
    const report = await loadCatalogFolder(new CatalogService(dataSource), dir);
    for (const file of report.created) {
      console.log(`created ${file}`);
    }
    for (const file of report.updated) {
      console.log(`updated ${file}`);
    }
    for (const file of report.skipped) {
      console.log(`skipped ${file} (not <application>/<SECTION>/<file>)`);
    }
    console.log(
      `${report.created.length} created, ${report.updated.length} updated, ${report.skipped.length} skipped`,
    );
    return 0;
  } finally {
    await close();
  }
}

runCommand('catalog:load', main);
