import { CliCommand, parseCommandArgs, UsageError } from '../command-line/cli-command';

const USAGE = `usage: svc catalog load <dir> [--keep-existing] | dump <dir>
  load <dir>   upsert the files of <dir>/<application>/<SECTION>/<file> into the catalog, and
               make <dir>/<application>/renv.lock its environment (svc environment set)
               --keep-existing: add only files the catalog does not have (an admin's changes stay)
  dump <dir>   write the whole catalog into <dir>, a new or empty directory, in that layout`;

async function catalog(argv: string[]): Promise<number> {
  const { positionals, values } = parseCommandArgs(argv, {
    'keep-existing': { type: 'boolean' },
  });
  const [command, dir, ...extra] = positionals;
  if (command !== 'load' && command !== 'dump') {
    throw new UsageError(command ? `unknown catalog command "${command}"` : 'missing command');
  }
  if (!dir) {
    throw new UsageError(`catalog ${command} needs a directory`);
  }
  if (extra.length > 0) {
    throw new UsageError('too many arguments');
  }
  if (command === 'dump' && values['keep-existing']) {
    throw new UsageError('--keep-existing is an option of catalog load');
  }
  // What acting needs, loaded once the arguments are right.
  return command === 'load'
    ? (await import('./catalog-load')).catalogLoad(dir, values['keep-existing'] === true)
    : (await import('./catalog-dump')).catalogDump(dir);
}

export const catalogCommand: CliCommand = {
  name: 'catalog',
  summary: 'load the catalog from a folder, or dump it to one',
  usage: USAGE,
  run: catalog,
};
