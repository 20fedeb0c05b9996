import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * One subcommand of `svc`: checks its arguments before it touches anything. Its module imports
 * only what checking them needs; what acting needs (the configuration, the database, the
 * services) it imports once the arguments are right, so that `--help`, a mistake and a command
 * that talks to a running service load no more than they use.
 */
export interface CliCommand {
  name: string;
  /** One line for `svc --help`. */
  summary: string;
  /** Printed by `svc <name> --help` (stdout) and after a usage error (stderr). */
  usage: string;
  run(args: string[]): Promise<number>;
}

/** Done. */
export const EXIT_DONE = 0;
/** Refused or failed: one line says why (no such key, changed meanwhile, no database, …). */
export const EXIT_FAILED = 1;
/** Wrong arguments: the problem, then the command's usage. */
export const EXIT_USAGE = 2;
/** A bad setting: one line per problem, as the server's (EX_CONFIG). */
export const EXIT_CONFIGURATION = 78;

/** The exit statuses as `svc --help` and every command's help list them. */
export const EXIT_STATUSES =
  `Exit status: ${EXIT_DONE} done, ${EXIT_FAILED} refused or failed (one line says why), ` +
  `${EXIT_USAGE} wrong arguments, ${EXIT_CONFIGURATION} bad configuration.`;

/** Wrong arguments: `svc` prints the message and the command's usage, and exits with 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * The command could not do what it was asked, for a reason the user can act on: `svc` prints
 * the message in one line and exits with 1.
 */
export class CommandFailed extends Error {
  override readonly name = 'CommandFailed';
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** Node's own argument parser, strict: an unknown option or a missing value is a UsageError. */
export function parseCommandArgs<T extends Options>(
  args: string[],
  options: T,
): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: true }>> {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}
