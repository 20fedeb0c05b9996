import 'reflect-metadata';
import { HttpException, Logger } from '@nestjs/common';
import { SERVICE_VERSION } from '../config/app-config';
import { adminCommand } from './admin';
import { catalogCommand } from './catalog';
import { CliCommand, UsageError } from './cli-command';
import { hashSecretCommand } from './hash-secret';
import { keysCommand } from './keys';
import { migrateCommand } from './migrate';
import { runCommand } from './run-command';
import { schedulesCommand } from './schedules';
import { settingsCommand } from './settings';

const COMMANDS: CliCommand[] = [
  migrateCommand,
  catalogCommand,
  hashSecretCommand,
  keysCommand,
  schedulesCommand,
  settingsCommand,
  adminCommand,
];

const USAGE = `usage: svc <command> [arguments]   (svc <command> --help for its arguments; svc --version)
${COMMANDS.map((command) => `  ${command.name.padEnd(12)}${command.summary}`).join('\n')}
The database is the one the service uses: DATABASE_URL, else the embedded one in DATA_DIR;
while a service owns DATA_DIR, commands work through its database (docs/operations.md).
Exit status: 0 done, 1 failed, 2 wrong arguments, 78 bad configuration.`;

const HELP = new Set(['--help', '-h', 'help']);

/**
 * The `svc` command line: arguments are checked before any configuration is read or any
 * database is opened, so `--help` and mistakes never touch one.
 */
async function svc(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    console.error(USAGE);
    return 2;
  }
  if (name === '--version' || name === '-V') {
    console.log(`svc ${SERVICE_VERSION}`);
    return 0;
  }
  if (HELP.has(name)) {
    console.log(USAGE);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  // The services' log lines repeat what the command prints; their warnings and errors stay.
  Logger.overrideLogger(['warn', 'error', 'fatal']);
  if (!command) {
    console.error(`svc: unknown command "${name}"\n${USAGE}`);
    return 2;
  }
  if (args.includes('--help') || args.includes('-h')) {
    console.log(command.usage);
    return 0;
  }
  try {
    return await command.run(args);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`svc ${name}: ${error.message}\n${command.usage}`);
      return 2;
    }
    if (error instanceof HttpException) {
      // Refused by the service's own checks (no such schedule, a stale If-Match, a bad field).
      console.error(`svc ${name}: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

runCommand('svc', svc);
