import { USER_NAME } from '../config/security-settings';
import { CliCommand, parseCommandArgs, UsageError } from './cli-command';
import { cliActor } from './run-command';

const USAGE = `usage: svc admin create <name>
  create <name>   make a global admin in the database, or give that admin a new password: prints
                  the password (generated, shown once); the admin signs in with HTTP Basic as
                  <name> and that password, in every AUTH_MODE, at once on a running service
                  (its data kept, nothing restarted). The name is a user name of 1 to 128
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

async function admin(argv: string[]): Promise<number> {
  const name = parseAdminArgs(argv);
  // The arguments are right: now load what the command needs (svc.ts loads no more than checking them needs).
  const { loadConfig, openStateForCli } = await import('./cli-state');
  const { AdminAccountsService } = await import('../security/admin-accounts.service');
  const { AdminAccountRepository } = await import('../security/admin-account.repository');
  const { AuditService } = await import('../audit/audit.service');
  const { AuditRepository } = await import('../audit/audit.repository');
  const config = loadConfig();
  // One name, one caller: the name of a configured user stays that user's.
  if (name === config.adminUser || Object.hasOwn(config.users, name)) {
    throw new UsageError(
      `"${name}" is ${name === config.adminUser ? 'ADMIN_USER' : 'a user of USERS'}; choose another name`,
    );
  }
  const { dataSource, close } = await openStateForCli(config);
  try {
    const accounts = new AdminAccountsService(new AdminAccountRepository(dataSource));
    const audit = new AuditService(new AuditRepository(dataSource), config);
    const made = await dataSource.transaction(async (manager) => {
      const result = await accounts.create(name, manager);
      await audit.record(
        { action: 'admin.created', details: { name, newPassword: !result.created } },
        manager,
        cliActor(),
      );
      return result;
    });
    console.log(made.password);
    console.error(
      made.created
        ? `created the global admin ${name}; sign in with HTTP Basic as ${name} and the password above`
        : `gave the global admin ${name} a new password (above); the old one stops working within a minute`,
    );
    return 0;
  } finally {
    await close();
  }
}

export const adminCommand: CliCommand = {
  name: 'admin',
  summary: 'make a global admin (a password) while the service runs',
  usage: USAGE,
  run: admin,
};
