import { CommandOutput, parseCommandArgs, ServiceCommand, UsageError } from './cli-command';
import type { CommandServices } from './command-services';

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

type SchedulesRequest =
  | { command: 'list'; application: string }
  | { command: 'pause' | 'resume' | 'delete'; application: string; id: string };

function parseSchedulesArgs(argv: string[]): SchedulesRequest {
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
  return command === 'list'
    ? { command, application }
    : { command: command as 'pause' | 'resume' | 'delete', application, id };
}

async function actOnSchedules(
  request: SchedulesRequest,
  services: CommandServices,
  output: CommandOutput,
): Promise<number> {
  const service = await services.schedules();
  const { application } = request;
  switch (request.command) {
    case 'list':
      output.out(SCHEDULES_HEADER);
      for (const schedule of await service.list(application, '')) {
        output.out(
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
      await service.remove(application, request.id);
      output.out(`deleted schedule ${request.id} of ${application}`);
      return 0;
    case 'pause':
    case 'resume': {
      const paused = request.command === 'pause';
      await service.setPaused(application, request.id, paused, '');
      output.out(`${paused ? 'paused' : 'resumed'} schedule ${request.id} of ${application}`);
      return 0;
    }
  }
}

export const schedulesCommand: ServiceCommand<SchedulesRequest> = {
  name: 'schedules',
  summary: "list an application's schedules, pause, resume or delete one",
  usage: USAGE,
  parse: parseSchedulesArgs,
  act: actOnSchedules,
};
