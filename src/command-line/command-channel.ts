/**
 * The command socket: how `svc` asks the running service that owns DATA_DIR to perform a
 * ServiceCommand, so that the command line loads no database, framework or feature of its own.
 *
 * A Unix socket named COMMAND_SOCKET in the embedded database's socket directory: a
 * directory of the service's user that no one else may enter (the command line checks that it is
 * its own user's, trustedSocketDirectory). One request per connection, one answer, each a single
 * line of JSON. Whatever crosses is hostile to the side that reads it: bounded in bytes and time,
 * checked against its schema, and a request names only a command of SERVICE_COMMANDS, whose
 * arguments the service parses again with the command line's own parser.
 */

/** The socket's name in the database's socket directory. */
export const COMMAND_SOCKET = 'svc.command';

/** A request's bytes (its arguments and the file it read) at most. */
export const REQUEST_MAX_BYTES = 1024 * 1024;
/** How long a connection may take to send its whole request. */
export const REQUEST_TIMEOUT_MS = 5_000;
/** An answer's bytes at most (what the command printed, as JSON). */
export const ANSWER_MAX_BYTES = 16 * 1024 * 1024;
/** How long the command line waits for the answer. */
export const ANSWER_TIMEOUT_MS = 60_000;
/** Connections the service serves at once; more are closed unanswered. */
export const MAX_CONNECTIONS = 4;

/** What the command line sends: the command's name, its arguments, and the file it read (or null). */
export interface CommandRequest {
  command: string;
  args: string[];
  input: string | null;
}

/** How a command ended: its exit status, or refused (as a UsageError or a CommandFailed). */
export type CommandEnd = { status: number } | { refused: 'usage' | 'failed'; message: string };

/** What the service answers: the lines the command wrote, and how it ended. */
export type CommandAnswer = { stdout: string; stderr: string } & CommandEnd;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const hasOnly = (value: Record<string, unknown>, keys: string[]): boolean =>
  Object.keys(value).every((key) => keys.includes(key));

/** The JSON value of one line, or an Error naming what is not JSON. */
function jsonOf(line: string, what: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`${what} is not JSON`);
  }
}

/** The request in `line`, or an Error saying what is wrong with it. */
export function parseCommandRequest(line: string): CommandRequest {
  const value = jsonOf(line, 'the request');
  if (
    !isRecord(value) ||
    !hasOnly(value, ['command', 'args', 'input']) ||
    typeof value.command !== 'string' ||
    !Array.isArray(value.args) ||
    value.args.length > 64 ||
    !value.args.every((arg) => typeof arg === 'string') ||
    !(value.input === null || typeof value.input === 'string')
  ) {
    throw new Error(
      'the request is not {"command": string, "args": [string, at most 64], "input": string|null}',
    );
  }
  return { command: value.command, args: value.args, input: value.input };
}

/** The answer in `line`, or an Error saying what is wrong with it. */
export function parseCommandAnswer(line: string): CommandAnswer {
  const value = jsonOf(line, 'its answer');
  if (isRecord(value) && typeof value.stdout === 'string' && typeof value.stderr === 'string') {
    const { stdout, stderr } = value;
    if (
      Number.isInteger(value.status) &&
      (value.status as number) >= 0 &&
      (value.status as number) <= 255
    ) {
      return { stdout, stderr, status: value.status as number };
    }
    if (
      (value.refused === 'usage' || value.refused === 'failed') &&
      typeof value.message === 'string'
    ) {
      return { stdout, stderr, refused: value.refused, message: value.message };
    }
  }
  throw new Error('its answer is not one of a command');
}
