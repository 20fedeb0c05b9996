import { USER_NAME } from '../config/security-settings';
import { CommandOutput, parseCommandArgs, ServiceCommand, UsageError } from './cli-command';
import { cliActor } from './cli-actor';
import type { CommandServices } from './command-services';

const USAGE = `usage: svc admin create <name>
  create <name>   make a global admin in the database, or give that admin a new password: prints
                  the password (generated, shown once); the admin signs in as <name> with that
                  password, in every AUTH_MODE, at once on a running service (its data
                  kept, nothing restarted). The name is a user name of 1 to 128
                  characters without spaces or ":", not ADMIN_USER's nor one of USERS.`;

function parseAdminArgs(argv: string[]): string {
  const { positionals } = parseCommandArgs(argv, {});
  const [command, name, ...extra] = positionals;
  if (command !== 'create') {
    throw new UsageError(command ? `unknown admin command "${command}"` : 'missing command');
  }
  if (name === undefined) {
    throw new UsageError('admin create needs a name');
  }
  if (extra.length > 0) {
    throw new UsageError('too many arguments');
  }
  if (!USER_NAME.test(name)) {
    throw new UsageError(`"${name}" is not a user name: 1 to 128 characters without spaces or ":"`);
  }
  return name;
}

async function actOnAdmin(
  name: string,
  services: CommandServices,
  output: CommandOutput,
): Promise<number> {
  const { config } = services;
  // One name, one caller: the name of a configured user stays that user's.
  if (name === config.adminUser || Object.hasOwn(config.users, name)) {
    throw new UsageError(
      `"${name}" is ${name === config.adminUser ? 'ADMIN_USER' : 'a user of USERS'}; choose another name`,
    );
  }
  const accounts = await services.adminAccounts();
  const audit = await services.audit();
  const made = await services.transaction(async (manager) => {
    const result = await accounts.create(name, manager);
    await audit.record(
      { action: 'admin.created', details: { name, newPassword: !result.created } },
      manager,
      cliActor(),
    );
    return result;
  });
  output.out(made.password);
  output.err(
    made.created
      ? `created the global admin ${name}; sign in as ${name} with the password above`
      : `gave the global admin ${name} a new password (above); the old one stops working within a minute`,
  );
  return 0;
}

export const adminCommand: ServiceCommand<string> = {
  name: 'admin',
  summary: 'make a global admin (a password) while the service runs',
  usage: USAGE,
  parse: parseAdminArgs,
  act: actOnAdmin,
};
