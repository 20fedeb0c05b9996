import 'reflect-metadata';
import { SERVICE_VERSION } from '../config/project-root';
import { adminCommand } from './admin';
import { catalogCommand } from './catalog';
import {
  CliCommand,
  CommandFailed,
  EXIT_FAILED,
  EXIT_STATUSES,
  EXIT_USAGE,
  UsageError,
} from './cli-command';
import { environmentCommand } from './environment';
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
  environmentCommand,
];

const USAGE = `usage: svc <command> [arguments]   (svc <command> --help for its arguments; svc --version)
${COMMANDS.map((command) => `  ${command.name.padEnd(12)}${command.summary}`).join('\n')}
The database is the one the service uses: DATABASE_URL, else the embedded one in DATA_DIR;
while a service owns DATA_DIR, commands work through its database (docs/operations.md).
${EXIT_STATUSES}`;

const HELP = new Set(['--help', '-h', 'help']);

/**
 * The `svc` command line: arguments are checked before any configuration is read or any
 * database is opened, so `--help` and mistakes never touch one. This module and the commands'
 * own load only what checking arguments needs (cli-command.ts).
 */
async function svc(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    console.error(USAGE);
    return EXIT_USAGE;
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
  if (!command) {
    console.error(`svc: unknown command "${name}"\n${USAGE}`);
    return EXIT_USAGE;
  }
  if (args.includes('--help') || args.includes('-h')) {
    console.log(`${command.usage}\n${EXIT_STATUSES}`);
    return 0;
  }
  try {
    return await command.run(args);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`svc ${name}: ${error.message}\n${command.usage}`);
      return EXIT_USAGE;
    }
    if (error instanceof CommandFailed) {
      console.error(`svc ${name}: ${error.message}`);
      return EXIT_FAILED;
    }
    // Loaded already when a service refused (no such schedule, a bad field): its own message.
    const { HttpException } = await import('@nestjs/common');
    if (error instanceof HttpException) {
      console.error(`svc ${name}: ${error.message}`);
      return EXIT_FAILED;
    }
    throw error;
  }
}

runCommand('svc', svc);
