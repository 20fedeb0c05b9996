import { readFileSync } from 'node:fs';
import { HttpException } from '@nestjs/common';
import { ApplicationEntryDto } from '../applications/application-entry.dto';
import { ApplicationSettingsRepository } from '../applications/application-settings.repository';
import {
  applicationEtag,
  ApplicationSettingsService,
} from '../applications/application-settings.service';
import { AuditRepository } from '../audit/audit.repository';
import { AuditService } from '../audit/audit.service';
import { DTO_VALIDATION } from '../common/dto-validation';
import { loadConfig } from '../config/app-config';
import { CliCommand, parseCommandArgs, UsageError } from './cli-command';
import { asCliActor, cliActor, openStateForCli } from './run-command';

const USAGE = `usage: svc settings show <application> | set <application> <file.json|-> --if-match <version>
  show <application>   its rights, settings and slots in force, as JSON (with "version")
  set <application> <file.json|->
                       replace them with the JSON of the file (- : standard input), in the
                       form show prints; --if-match takes the version that show printed, and a
                       change made meanwhile is refused (as the admin API's If-Match)`;

/** The entry to store, checked as the admin API checks its body; complaints are usage errors. */
async function entryOf(file: string): Promise<ApplicationEntryDto> {
  let body: unknown;
  try {
    body = JSON.parse(readFileSync(file === '-' ? 0 : file, 'utf8'));
  } catch (error) {
    throw new UsageError(`${file}: ${(error as Error).message}`);
  }
  try {
    return (await DTO_VALIDATION.transform(body, {
      type: 'custom',
      metatype: ApplicationEntryDto,
    })) as ApplicationEntryDto;
  } catch (error) {
    throw new UsageError(error instanceof HttpException ? error.message : String(error));
  }
}

async function settings(argv: string[]): Promise<number> {
  const { positionals, values } = parseCommandArgs(argv, { 'if-match': { type: 'string' } });
  const [command, application, file, ...extra] = positionals;
  if (command !== 'show' && command !== 'set') {
    throw new UsageError(command ? `unknown settings command "${command}"` : 'missing command');
  }
  if (!application) {
    throw new UsageError(`settings ${command} needs an application`);
  }
  if (command === 'show' && (file !== undefined || values['if-match'] !== undefined)) {
    throw new UsageError('settings show takes only an application');
  }
  if (command === 'set' && file === undefined) {
    throw new UsageError('settings set needs a JSON file (or - for standard input)');
  }
  if (extra.length > 0) {
    throw new UsageError('too many arguments');
  }
  const entry = command === 'set' ? await entryOf(file) : null;
  const config = loadConfig();
  const { dataSource, close } = await openStateForCli(config);
  try {
    const service = new ApplicationSettingsService(
      config,
      new ApplicationSettingsRepository(dataSource),
      undefined,
      new AuditService(new AuditRepository(dataSource), config),
    );
    if (entry === null) {
      console.log(JSON.stringify(await service.view(application), null, 2));
      return 0;
    }
    const ifMatch = values['if-match'];
    const replaced = await asCliActor(() =>
      service.replace(
        application,
        entry,
        ifMatch === undefined || !/^\d+$/.test(ifMatch)
          ? ifMatch
          : applicationEtag(Number(ifMatch)),
        cliActor().principal,
      ),
    );
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
