import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { SERVICE_VERSION } from '../config/project-root';
import { embeddedDataDir } from '../config/config-files';
import {
  CliCommand,
  CommandFailed,
  EXIT_FAILED,
  EXIT_STATUSES,
  EXIT_USAGE,
  refusalOf,
  ServiceCommand,
  UsageError,
} from '../command-line/cli-command';
import { SERVICE_COMMANDS } from '../command-line/service-commands';
import { catalogCommand } from './catalog';
import { environmentCommand } from './environment';
import { hashSecretCommand } from './hash-secret';
import { migrateCommand } from './migrate';
import { runCommand } from './run-command';

const COMMANDS: Array<CliCommand | ServiceCommand> = [
  migrateCommand,
  catalogCommand,
  hashSecretCommand,
  ...SERVICE_COMMANDS,
  environmentCommand,
];

const USAGE = `usage: svc <command> [arguments]   (svc <command> --help for its arguments; svc --version)
${COMMANDS.map((command) => `  ${command.name.padEnd(12)}${command.summary}`).join('\n')}
The database is the one the service uses: DATABASE_URL, else the embedded one in DATA_DIR;
while a service owns DATA_DIR, that service performs keys, settings, admin and schedules, and
the other commands work through its database (docs/operations.md).
${EXIT_STATUSES}`;

const HELP = new Set(['--help', '-h', 'help']);

/**
 * A command on what a service holds: its arguments checked here; then, while a service owns
 * DATA_DIR, that service performs it (command-channel.ts) and this process loads no database,
 * framework or feature; else it is performed here, on the database this process opens.
 */
async function runServiceCommand(command: ServiceCommand, args: string[]): Promise<number> {
  let input: string | null = null;
  const request = command.parse(
    args,
    (file) => (input = readFileSync(file === '-' ? 0 : file, 'utf8')),
  );
  const { askService, commandSocketOf } = await import('../command-line/command-channel.client');
  const dataDir = embeddedDataDir();
  const socket = dataDir === null ? null : commandSocketOf(dataDir);
  const answer =
    socket === null ? null : await askService(socket, { command: command.name, args, input });
  if (answer === null) {
    const { performHere } = await import('./cli-state');
    return performHere(command, request, {
      out: (line) => console.log(line),
      err: (line) => console.error(line),
    });
  }
  process.stdout.write(answer.stdout);
  process.stderr.write(answer.stderr);
  if ('refused' in answer) {
    throw answer.refused === 'usage'
      ? new UsageError(answer.message)
      : new CommandFailed(answer.message);
  }
  return answer.status;
}

/**
 * The `svc` command line: arguments are checked before any configuration is read or any
 * database is opened, so `--help` and mistakes never touch one. This module and the commands'
 * own load only what checking arguments needs (command-line/cli-command.ts).
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
    return 'act' in command ? await runServiceCommand(command, args) : await command.run(args);
  } catch (error) {
    const refusal = await refusalOf(error);
    if (refusal === null) {
      throw error;
    }
    console.error(
      refusal.refused === 'usage'
        ? `svc ${name}: ${refusal.message}\n${command.usage}`
        : `svc ${name}: ${refusal.message}`,
    );
    return refusal.refused === 'usage' ? EXIT_USAGE : EXIT_FAILED;
  }
}

runCommand('svc', svc);
