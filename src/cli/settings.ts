import { readFileSync } from 'node:fs';
import type { ApplicationEntryDto } from '../applications/application-entry.dto';
import { CliCommand, CommandFailed, parseCommandArgs, UsageError } from './cli-command';
import { asCliActor, cliActor } from './run-command';

const USAGE = `usage: svc settings show <application> | set <application> <file.json|-> --expect-version <version>
  show <application>   its rights, settings and slots in force, as JSON (with "version")
  set <application> <file.json|-> --expect-version <version>
                       replace them with the JSON of the file (- : standard input), in the
                       form show prints; --expect-version takes the "version" that show
                       printed: if they changed since, nothing is replaced (exit status 1)`;

/** The entry to store, checked as the admin API checks its body; complaints are usage errors. */
async function entryOf(file: string): Promise<ApplicationEntryDto> {
  let body: unknown;
  try {
    body = JSON.parse(readFileSync(file === '-' ? 0 : file, 'utf8'));
  } catch (error) {
    throw new UsageError(`${file}: ${(error as Error).message}`);
  }
  const { HttpException } = await import('@nestjs/common');
  const { DTO_VALIDATION } = await import('../common/dto-validation');
  const { ApplicationEntryDto } = await import('../applications/application-entry.dto');
  try {
    return (await DTO_VALIDATION.transform(body, {
      type: 'custom',
      metatype: ApplicationEntryDto,
    })) as ApplicationEntryDto;
  } catch (error) {
    throw new UsageError(error instanceof HttpException ? error.message : String(error));
  }
}

/** The version `set` expects to replace: a whole number, as show prints it. */
function expectedVersion(value: string | undefined): number {
  if (value === undefined) {
    throw new UsageError(
      'settings set needs --expect-version <version>: the "version" that settings show printed',
    );
  }
  if (!/^\d{1,9}$/.test(value)) {
    throw new UsageError(`--expect-version takes a whole number, as settings show prints it`);
  }
  return Number(value);
}

async function settings(argv: string[]): Promise<number> {
  const { positionals, values } = parseCommandArgs(argv, {
    'expect-version': { type: 'string' },
  });
  const [command, application, file, ...extra] = positionals;
  if (command !== 'show' && command !== 'set') {
    throw new UsageError(command ? `unknown settings command "${command}"` : 'missing command');
  }
  if (!application) {
    throw new UsageError(`settings ${command} needs an application`);
  }
  if (command === 'show' && (file !== undefined || values['expect-version'] !== undefined)) {
    throw new UsageError('settings show takes only an application');
  }
  if (command === 'set' && file === undefined) {
    throw new UsageError('settings set needs a JSON file (or - for standard input)');
  }
  if (extra.length > 0) {
    throw new UsageError('too many arguments');
  }
  const version = command === 'set' ? expectedVersion(values['expect-version']) : null;
  const entry = command === 'set' ? await entryOf(file) : null;
  // What acting needs, loaded once the arguments are right.
  const { loadConfig, openStateForCli } = await import('./cli-state');
  const { HttpException, HttpStatus } = await import('@nestjs/common');
  const { ApplicationSettingsRepository } =
    await import('../applications/application-settings.repository');
  const { applicationEtag, ApplicationSettingsService } =
    await import('../applications/application-settings.service');
  const { AuditService } = await import('../audit/audit.service');
  const { AuditRepository } = await import('../audit/audit.repository');
  const config = loadConfig();
  const { dataSource, close } = await openStateForCli(config);
  try {
    const service = new ApplicationSettingsService(
      config,
      new ApplicationSettingsRepository(dataSource),
      undefined,
      new AuditService(new AuditRepository(dataSource), config),
    );
    if (entry === null || version === null) {
      console.log(JSON.stringify(await service.view(application), null, 2));
      return 0;
    }
    const replaced = await asCliActor(() =>
      service.replace(application, entry, applicationEtag(version), cliActor().principal),
    ).catch(async (error: unknown) => {
      if (
        error instanceof HttpException &&
        error.getStatus() === Number(HttpStatus.PRECONDITION_FAILED)
      ) {
        const inForce = (await service.view(application)).version;
        throw new CommandFailed(
          `the settings of ${application} changed since you read them (version ${inForce} ` +
            `is in force, not ${version}); read them again with ` +
            `\`svc settings show ${application}\` and retry`,
        );
      }
      throw error;
    });
    console.log(JSON.stringify(replaced.view, null, 2));
    console.error(
      `changed the settings of ${application}: version ${replaced.view.version}` +
        (replaced.restartRequired.length
          ? `; ${replaced.restartRequired.join(', ')} take effect at the next start`
          : ''),
    );
    return 0;
  } finally {
    await close();
  }
}

export const settingsCommand: CliCommand = {
  name: 'settings',
  summary: "show or change an application's rights and settings",
  usage: USAGE,
  run: settings,
};
