import { parseArgs, type ParseArgsConfig } from 'node:util';

/** One subcommand of `svc`: checks its arguments before it touches anything. */
export interface CliCommand {
  name: string;
  /** One line for `svc --help`. */
  summary: string;
  /** Printed by `svc <name> --help` (stdout) and after a usage error (stderr). */
  usage: string;
  run(args: string[]): Promise<number>;
}

/** Wrong arguments: `svc` prints the message and the command's usage, and exits with 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
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
