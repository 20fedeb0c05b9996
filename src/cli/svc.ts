import 'reflect-metadata';
import { catalogCommand } from './catalog';
import { CliCommand, UsageError } from './cli-command';
import { hashSecretCommand } from './hash-secret';
import { keysCommand } from './keys';
import { migrateCommand } from './migrate';
import { runCommand } from './run-command';

const COMMANDS: CliCommand[] = [migrateCommand, catalogCommand, hashSecretCommand, keysCommand];

const USAGE = `usage: svc <command> [arguments]   (svc <command> --help for its arguments)
${COMMANDS.map((command) => `  ${command.name.padEnd(12)}${command.summary}`).join('\n')}
The database is the one the service uses: DATABASE_URL, else the embedded one in DATA_DIR.
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
  if (HELP.has(name)) {
    console.log(USAGE);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
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
    throw error;
  }
}

runCommand('svc', svc);
