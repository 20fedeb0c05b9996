import { asCliActor } from './cli-actor';
import type { CommandOutput, ServiceCommand } from './cli-command';
import type { CommandServices } from './command-services';

/**
 * Performs a parsed and checked command (ServiceCommand.check) as the command line's actor (its
 * audit rows name `cli:<OS user>`), wherever it runs: in the command line's own process or in the
 * service (CommandChannel).
 */
export function performCommand<Request>(
  command: ServiceCommand<Request>,
  request: Request,
  services: CommandServices,
  output: CommandOutput,
): Promise<number> {
  return asCliActor(() => command.act(request, services, output));
}
