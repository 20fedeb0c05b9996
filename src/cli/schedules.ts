import { CliCommand, parseCommandArgs, UsageError } from './cli-command';
import { asCliActor } from './run-command';

const USAGE = `usage: svc schedules list <application> | pause|resume|delete <application> <id>
  list <application>          its schedules, tab-separated under a header row
  pause <application> <id>    stop planning runs until resumed
  resume <application> <id>   plan runs again from now on
  delete <application> <id>   delete the schedule (its jobs stay)`;

/** The first line of `schedules list`: the names of its tab-separated columns. */
const SCHEDULES_HEADER = ['ID', 'NAME', 'CRON', 'TIME ZONE', 'PAUSED', 'NEXT RUN', 'LAST RUN'].join(
  '\t',
);

const COMMANDS = new Set(['list', 'pause', 'resume', 'delete']);

async function schedules(argv: string[]): Promise<number> {
  const { positionals } = parseCommandArgs(argv, {});
  const [command, application, id, ...extra] = positionals;
  if (!COMMANDS.has(command)) {
    throw new UsageError(command ? `unknown schedules command "${command}"` : 'missing command');
  }
  if (!application) {
    throw new UsageError(`schedules ${command} needs an application`);
  }
  if (command === 'list' ? id !== undefined : id === undefined) {
    throw new UsageError(
      command === 'list' ? 'too many arguments' : `schedules ${command} needs a schedule id`,
    );
  }
  if (extra.length > 0) {
    throw new UsageError('too many arguments');
  }
  // What acting needs, loaded once the arguments are right.
  const { loadConfig, openStateForCli } = await import('./cli-state');
  const { CatalogService } = await import('../catalog/catalog.service');
  const { KnownApplications } = await import('../catalog/known-applications');
  const { CallbackUrlPolicy } = await import('../callbacks/callback-url.policy');
  const { HostLookup } = await import('../callbacks/host-lookup');
  const { AuditService } = await import('../audit/audit.service');
  const { AuditRepository } = await import('../audit/audit.repository');
  const { ScheduleRepository } = await import('../schedules/schedule.repository');
  const { SchedulesService } = await import('../schedules/schedules.service');
  const { DatabaseEvents } = await import('../storage/database-events.service');
  const { NodeIdentity } = await import('../storage/node-identity');
  const config = loadConfig();
  const { dataSource, target, close } = await openStateForCli(config);
  try {
    // The command's own node id before what it notifies: every service node hears the change.
    const events = new DatabaseEvents(target, new NodeIdentity(), dataSource);
    const catalog = new CatalogService(dataSource);
    const service = new SchedulesService(
      new ScheduleRepository(dataSource, events),
      catalog,
      new KnownApplications(config, catalog),
      new CallbackUrlPolicy(config, new HostLookup()),
      config,
      new AuditService(new AuditRepository(dataSource), config),
    );
    return await asCliActor(async () => {
      switch (command) {
        case 'list':
          console.log(SCHEDULES_HEADER);
          for (const schedule of await service.list(application, '')) {
            console.log(
              [
                schedule.id,
                schedule.name,
                schedule.cron,
                schedule.timeZone,
                schedule.paused ? 'yes' : 'no',
                schedule.nextRunTime ?? '-',
                schedule.lastRun?.time ?? schedule.lastRun?.plannedTime ?? '-',
              ].join('\t'),
            );
          }
          return 0;
        case 'delete':
          await service.remove(application, id);
          console.log(`deleted schedule ${id} of ${application}`);
          return 0;
        default: {
          const paused = command === 'pause';
          await service.setPaused(application, id, paused, '');
          console.log(`${paused ? 'paused' : 'resumed'} schedule ${id} of ${application}`);
          return 0;
        }
      }
    });
  } finally {
    await close();
  }
}

export const schedulesCommand: CliCommand = {
  name: 'schedules',
  summary: "list an application's schedules, pause, resume or delete one",
  usage: USAGE,
  run: schedules,
};
