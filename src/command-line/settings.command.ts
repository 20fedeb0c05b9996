import type { ApplicationEntryDto } from '../applications/application-entry.dto';
import {
  checkedAs,
  CommandFailed,
  CommandOutput,
  InputReader,
  parseCommandArgs,
  ServiceCommand,
  UsageError,
} from './cli-command';
import { cliActor } from './cli-actor';
import type { CommandServices } from './command-services';

const USAGE = `usage: svc settings show <application> | set <application> <file.json|-> --expect-version <version>
  show <application>   its rights, settings and slots in force, as JSON (with "version")
  set <application> <file.json|-> --expect-version <version>
                       replace them with the JSON of the file (- : standard input), in the
                       form show prints; --expect-version takes the "version" that show
                       printed: if they changed since, nothing is replaced (exit status 1)`;

type SettingsRequest =
  | { command: 'show'; application: string }
  | { command: 'set'; application: string; version: number; body: unknown };

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

function parseSettingsArgs(argv: string[], read: InputReader): SettingsRequest {
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
  if (command === 'show') {
    return { command, application };
  }
  const version = expectedVersion(values['expect-version']);
  let body: unknown;
  try {
    body = JSON.parse(read(file));
  } catch (error) {
    throw new UsageError(`${file}: ${(error as Error).message}`);
  }
  return { command, application, version, body };
}

/** The entry to store, checked as the admin API checks its body. */
async function entryOf(body: unknown): Promise<ApplicationEntryDto> {
  const { ApplicationEntryDto } = await import('../applications/application-entry.dto');
  return checkedAs(body, ApplicationEntryDto);
}

async function actOnSettings(
  request: SettingsRequest,
  services: CommandServices,
  output: CommandOutput,
): Promise<number> {
  const { application } = request;
  const service = await services.applicationSettings();
  if (request.command === 'show') {
    output.out(JSON.stringify(await service.view(application), null, 2));
    return 0;
  }
  const entry = await entryOf(request.body);
  const { HttpException, HttpStatus } = await import('@nestjs/common');
  const { applicationEtag } = await import('../applications/application-settings.service');
  const replaced = await service
    .replace(application, entry, applicationEtag(request.version), cliActor().principal)
    .catch(async (error: unknown) => {
      if (
        error instanceof HttpException &&
        error.getStatus() === Number(HttpStatus.PRECONDITION_FAILED)
      ) {
        const inForce = (await service.view(application)).version;
        throw new CommandFailed(
          `the settings of ${application} changed since you read them (version ${inForce} ` +
            `is in force, not ${request.version}); read them again with ` +
            `\`svc settings show ${application}\` and retry`,
        );
      }
      throw error;
    });
  output.out(JSON.stringify(replaced.view, null, 2));
  output.err(
    `changed the settings of ${application}: version ${replaced.view.version}` +
      (replaced.restartRequired.length
        ? `; ${replaced.restartRequired.join(', ')} take effect at the next start`
        : ''),
  );
  return 0;
}

export const settingsCommand: ServiceCommand<SettingsRequest> = {
  name: 'settings',
  summary: "show or change an application's rights and settings",
  usage: USAGE,
  parse: parseSettingsArgs,
  check: async (request) => {
    if (request.command === 'set') {
      await entryOf(request.body);
    }
  },
  act: actOnSettings,
};
