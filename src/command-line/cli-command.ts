import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { CommandEnd } from './command-channel';
import type { CommandServices } from './command-services';

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

/** Where a command writes its lines: the terminal, or the answer a running service sends back. */
export interface CommandOutput {
  /** A line of the command's answer (standard output). */
  out(line: string): void;
  /** A line told beside the answer (standard error). */
  err(line: string): void;
}

/**
 * Reads the file a command names (`-`: standard input) as text. In the command line it reads
 * the file; in a running service it gives the text the command line read and sent.
 */
export type InputReader = (file: string) => string;

/**
 * A subcommand that acts on what a service holds (keys, settings, admins, schedules). `parse`
 * checks the arguments and loads nothing; `act` does the work with the services, in the running
 * service that owns DATA_DIR when there is one (command-channel.ts, which parses the arguments
 * again with the same `parse`), else in the command line's own process on the database it opens.
 */
export interface ServiceCommand<Request = unknown> {
  name: string;
  /** One line for `svc --help`. */
  summary: string;
  /** Printed by `svc <name> --help` (stdout) and after a usage error (stderr). */
  usage: string;
  parse(args: string[], read: InputReader): Request;
  /**
   * The checks of what the arguments carry that need the admin API's validation (a key's
   * expiry, a settings file's fields): run before anything is opened, where `act` will run.
   */
  check?(request: Request): Promise<void>;
  act(request: Request, services: CommandServices, output: CommandOutput): Promise<number>;
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

/**
 * How an error ends a command: wrong arguments, or a refusal with the reason a user can act on (a
 * service's own refusals included: no such schedule, a bad field). Null: not a refusal but a
 * failure. NestJS is loaded only to tell a service's refusal, which has loaded it already.
 */
export async function refusalOf(
  error: unknown,
): Promise<Extract<CommandEnd, { refused: string }> | null> {
  if (error instanceof UsageError) {
    return { refused: 'usage', message: error.message };
  }
  if (error instanceof CommandFailed) {
    return { refused: 'failed', message: error.message };
  }
  const { HttpException } = await import('@nestjs/common');
  return error instanceof HttpException ? { refused: 'failed', message: error.message } : null;
}

/**
 * `value` checked and converted as the admin API checks its body (`DTO_VALIDATION`); its
 * complaints are usage errors. Loads the validation only when a command has a body to check.
 */
export async function checkedAs<T extends object>(
  value: unknown,
  metatype: new () => T,
  /** The command line's name of a field the message names first (`expiresAt` → `--expires`). */
  names: Record<string, string> = {},
): Promise<T> {
  const { HttpException } = await import('@nestjs/common');
  const { DTO_VALIDATION } = await import('../common/dto-validation');
  try {
    return (await DTO_VALIDATION.transform(value, { type: 'custom', metatype })) as T;
  } catch (error) {
    const message = error instanceof HttpException ? error.message : String(error);
    throw new UsageError(message.replace(/^\w+/, (field) => names[field] ?? field));
  }
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
