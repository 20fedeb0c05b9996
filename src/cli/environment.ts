import { readFileSync } from 'node:fs';
import type { AppConfig } from '../config/app-config';
import type { EnvironmentsService } from '../environments/environments.service';
import type { CliDatabase } from '../storage/database-options';
import { CliCommand, parseCommandArgs, UsageError } from '../command-line/cli-command';
import { asCliActor, cliActor } from '../command-line/cli-actor';

const USAGE = `usage: svc environment set <application> <renv.lock|-> | show <application>
                       | history <application> | rollback <application> <id> | remove <application>
  set <application> <renv.lock|->   give the application the environment of this lockfile (- :
                       standard input), checked and resolved against R_REPOSITORIES and its
                       uploaded packages as the admin API does; prints it as JSON
  show <application>   the environment it asks for, as JSON
  history <application>
                       its environments, newest first: id, asked for, packages, digest, when, by whom
  rollback <application> <id>
                       go back to an environment of its history (nothing is built again)
  remove <application> it asks for no environment any more (its history stays)`;

const COMMANDS = new Set(['set', 'show', 'history', 'rollback', 'remove']);
const APPLICATION = /^\w{1,64}$/;

/** The environments' service on a command line's database, acting as the command line. */
export async function environmentsForCli(
  config: AppConfig,
  database: CliDatabase,
): Promise<EnvironmentsService> {
  const { AuditService } = await import('../audit/audit.service');
  const { AuditRepository } = await import('../audit/audit.repository');
  const { CatalogChanges } = await import('../catalog/catalog-changes');
  const { PackageRepository } = await import('../packages/package.repository');
  const { EnvironmentRepository } = await import('../environments/environment.repository');
  const { EnvironmentsService } = await import('../environments/environments.service');
  const { PackageRepositoryReader } = await import('../environments/package-repositories');
  const { DatabaseEvents } = await import('../storage/database-events.service');
  const { NodeIdentity } = await import('../storage/node-identity');
  const { dataSource, target } = database;
  const events = new DatabaseEvents(target, new NodeIdentity(), dataSource);
  return new EnvironmentsService(
    config,
    new EnvironmentRepository(dataSource),
    new PackageRepository(dataSource, new CatalogChanges(events)),
    new PackageRepositoryReader(),
    new AuditService(new AuditRepository(dataSource), config),
  );
}

async function environment(argv: string[]): Promise<number> {
  const { positionals } = parseCommandArgs(argv, {});
  const [command, application, argument, ...extra] = positionals;
  if (!COMMANDS.has(command)) {
    throw new UsageError(command ? `unknown environment command "${command}"` : 'missing command');
  }
  if (!application) {
    throw new UsageError(`environment ${command} needs an application`);
  }
  if (!APPLICATION.test(application)) {
    throw new UsageError(`"${application.slice(0, 80)}" is not an application name (\\w{1,64})`);
  }
  const needsArgument = command === 'set' || command === 'rollback';
  if (needsArgument && argument === undefined) {
    throw new UsageError(
      command === 'set'
        ? 'environment set needs a lockfile (or - for standard input)'
        : 'environment rollback needs the id of an environment of the history',
    );
  }
  if (extra.length > 0 || (!needsArgument && argument !== undefined)) {
    throw new UsageError('too many arguments');
  }
  let lockfile: Buffer | null = null;
  if (command === 'set') {
    try {
      lockfile = readFileSync(argument === '-' ? 0 : argument);
    } catch (error) {
      throw new UsageError(`${argument}: ${(error as Error).message}`);
    }
  }
  // What acting needs, loaded once the arguments are right.
  const { loadConfig, openStateForCli } = await import('./cli-state');
  const { environmentView } = await import('../environments/environments-view');
  const config = loadConfig();
  const database = await openStateForCli(config);
  try {
    const service = await environmentsForCli(config, database);
    const show = (value: unknown): void => console.log(JSON.stringify(value, null, 2));
    return await asCliActor(async () => {
      switch (command) {
        case 'set': {
          const { created, environment: made } = await service.set(
            application,
            lockfile as Buffer,
            cliActor().principal ?? 'cli',
            cliActor(),
          );
          show(environmentView(made, await service.pointers(application)));
          console.error(
            created
              ? `${application} asks for environment ${made.id} now (${made.resolved.length} packages)`
              : `${application} asks for this environment already (${made.id}): nothing changed`,
          );
          break;
        }
        case 'show': {
          const current = await service.get(application);
          show(environmentView(current, await service.pointers(application)));
          break;
        }
        case 'history': {
          const { requestedId, activeId } = await service.pointers(application);
          console.log('id\tasked for\tin force\tpackages\tcontents\tcreated\tcreated by');
          for (const kept of await service.history(application)) {
            console.log(
              [
                kept.id,
                kept.id === requestedId ? 'yes' : 'no',
                kept.id === activeId ? 'yes' : 'no',
                kept.resolved.length,
                kept.contentsSha256.slice(0, 12),
                kept.createdAt.toISOString(),
                kept.createdBy,
              ].join('\t'),
            );
          }
          break;
        }
        case 'rollback': {
          const current = await service.rollback(application, argument, cliActor());
          show(environmentView(current, await service.pointers(application)));
          console.error(`${application} asks for environment ${current.id} again`);
          break;
        }
        default:
          await service.remove(application, cliActor());
          console.error(`${application} asks for no environment any more`);
      }
      return 0;
    });
  } finally {
    await database.close();
  }
}

export const environmentCommand: CliCommand = {
  name: 'environment',
  summary: "set, show or roll back an application's R environment (renv.lock)",
  usage: USAGE,
  run: environment,
};
