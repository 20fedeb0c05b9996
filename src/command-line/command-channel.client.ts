import { lstatSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { runningOwner } from '../storage/data-dir-owner';
import { trustedSocketDirectory } from '../storage/embedded-postgres';
import {
  ANSWER_MAX_BYTES,
  ANSWER_TIMEOUT_MS,
  COMMAND_SOCKET,
  CommandAnswer,
  CommandRequest,
  parseCommandAnswer,
} from './command-channel';
import { CommandFailed } from './cli-command';

/**
 * The command socket of the service that owns DATA_DIR, once it is known to be this user's
 * (trustedSocketDirectory), or null when no service owns DATA_DIR or the owner has none (it is
 * starting, or of a version before the socket): the command then acts on the database itself.
 */
export function commandSocketOf(dataDir: string): string | null {
  const socketDirectory = runningOwner(dataDir)?.socketDirectory;
  if (!socketDirectory) {
    return null;
  }
  try {
    lstatSync(join(socketDirectory, COMMAND_SOCKET));
  } catch {
    return null;
  }
  return join(trustedSocketDirectory(dataDir, socketDirectory, COMMAND_SOCKET), COMMAND_SOCKET);
}

/**
 * Sends `request` to the command socket at `path` and reads the answer, within ANSWER_TIMEOUT_MS
 * and ANSWER_MAX_BYTES. Null when nothing listens there (the service has just stopped): the
 * command then acts on the database itself.
 */
export function askService(path: string, request: CommandRequest): Promise<CommandAnswer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let connected = false;
    const socket = connect(path);
    const fail = (why: string): void => {
      socket.destroy();
      reject(new CommandFailed(`the running service (${path}) ${why}`));
    };
    const timer = setTimeout(
      () => fail(`did not answer within ${ANSWER_TIMEOUT_MS / 1000} s`),
      ANSWER_TIMEOUT_MS,
    );
    socket.once('connect', () => {
      connected = true;
      socket.end(`${JSON.stringify(request)}\n`);
    });
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > ANSWER_MAX_BYTES) {
        clearTimeout(timer);
        fail(`answered more than ${ANSWER_MAX_BYTES} bytes`);
        return;
      }
      chunks.push(chunk);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (!connected && (error.code === 'ECONNREFUSED' || error.code === 'ENOENT')) {
        resolve(null);
      } else {
        fail(`could not be asked (${error.code ?? error.message})`);
      }
    });
    socket.once('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      if (!connected || bytes > ANSWER_MAX_BYTES) {
        return;
      }
      if (!text.endsWith('\n')) {
        fail('ended the connection without an answer (it may be stopping, or busy: retry)');
        return;
      }
      try {
        resolve(parseCommandAnswer(text.slice(0, -1)));
      } catch (error) {
        fail((error as Error).message);
      }
    });
  });
}
