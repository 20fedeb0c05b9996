import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig } from '../config/app-config';
import { CatalogService } from '../catalog/catalog.service';
import { UsageError } from '../command-line/cli-command';
import { openStateForCli } from './cli-state';
import { describeDatabase } from './run-command';

/** A name that cannot leave its folder when joined to a path. */
function isPlainName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !/[/\\\0]/.test(name);
}

/**
 * `svc catalog dump <dir>`: writes every application's catalog to `<dir>` in the layout
 * `catalog load` reads (`<dir>/<application>/<SECTION>/<file>`), for backups. The folder must be
 * new or empty, so a backup never mixes with older files that a later load would bring back.
 */
export async function catalogDump(dirArgument: string): Promise<number> {
  const dir = resolve(dirArgument);
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0)) {
    throw new UsageError(`${dir} is not an empty directory; choose a new one`);
  }
  const config = loadConfig();
  const { dataSource, close } = await openStateForCli(config);
  try {
    const catalog = new CatalogService(dataSource);
    mkdirSync(dir, { recursive: true });
    let written = 0;
    const skipped: string[] = [];
    for (const application of await catalog.listApplications()) {
      for (const { section, name } of await catalog.listFiles(application)) {
        const label = `${application}/${section}/${name}`;
        const content = await catalog.getFile(application, section, name);
        if (!isPlainName(application) || !isPlainName(name) || content === null) {
          skipped.push(label);
          continue;
        }
        mkdirSync(join(dir, application, section), { recursive: true });
        writeFileSync(join(dir, application, section, name), content);
        console.log(`wrote ${label} (${content.length} bytes)`);
        written++;
      }
    }
    for (const label of skipped) {
      console.log(`skipped ${label} (not a plain file name, or deleted meanwhile)`);
    }
    console.log(
      `${written} file(s) from the ${describeDatabase(config)} written to ${dir}` +
        (skipped.length ? `, ${skipped.length} skipped` : ''),
    );
    return 0;
  } finally {
    await close();
  }
}
