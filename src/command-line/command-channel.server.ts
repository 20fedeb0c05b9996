import { chmodSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ApiKeysService } from '../api-keys/api-keys.service';
import { ApplicationSettingsService } from '../applications/application-settings.service';
import { AuditService } from '../audit/audit.service';
import { SecurityConfig } from '../config/config-slices';
import { SchedulesService } from '../schedules/schedules.service';
import { AdminAccountsService } from '../security/admin-accounts.service';
import { DATABASE_TARGET, type DatabaseTarget } from '../storage/database-options';
import { CommandFailed, CommandOutput, refusalOf, UsageError } from './cli-command';
import {
  ANSWER_MAX_BYTES,
  COMMAND_SOCKET,
  CommandAnswer,
  CommandEnd,
  CommandRequest,
  MAX_CONNECTIONS,
  parseCommandRequest,
  REQUEST_MAX_BYTES,
  REQUEST_TIMEOUT_MS,
} from './command-channel';
import type { CommandServices } from './command-services';
import { performCommand } from './perform-command';
import { SERVICE_COMMANDS } from './service-commands';

/** The request in `line`; a request that is not of its schema is refused. */
function requestOf(line: string): CommandRequest {
  try {
    return parseCommandRequest(line);
  } catch (error) {
    throw new CommandFailed(`command socket: ${(error as Error).message}`);
  }
}

/** What a command writes, kept for the answer up to what an answer may hold. */
class AnswerOutput implements CommandOutput {
  stdout = '';
  stderr = '';
  private bytes = 0;
  overflow = false;

  out(line: string): void {
    this.stdout = this.add(this.stdout, line);
  }

  err(line: string): void {
    this.stderr = this.add(this.stderr, line);
  }

  private add(text: string, line: string): string {
    // The answer is JSON: at most 6 bytes per UTF-16 unit (\uXXXX); a margin for the rest.
    this.bytes += line.length * 6 + 1;
    if (this.bytes > ANSWER_MAX_BYTES - 4096) {
      this.overflow = true;
      return text;
    }
    return `${text}${line}\n`;
  }
}

/**
 * The service's side of the command socket (command-channel.ts): on the embedded database, it
 * listens in the database's private socket directory and performs the ServiceCommands that `svc`
 * sends, with this service's own services, so a command takes effect here at once and is audited
 * as `cli:<OS user>`, as when the command line acts alone. A request is refused when it is larger
 * than REQUEST_MAX_BYTES, incomplete after REQUEST_TIMEOUT_MS, not of the request's schema or not
 * one of SERVICE_COMMANDS; its arguments are parsed again by the command's own parser.
 */
@Injectable()
export class CommandChannel implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('CommandLine');
  private server: Server | null = null;
  private readonly connections = new Set<Socket>();
  private readonly services: CommandServices;

  constructor(
    @Inject(DATABASE_TARGET) private readonly target: DatabaseTarget,
    config: SecurityConfig,
    apiKeys: ApiKeysService,
    settings: ApplicationSettingsService,
    admins: AdminAccountsService,
    audit: AuditService,
    schedules: SchedulesService,
    @InjectDataSource() dataSource: DataSource,
  ) {
    this.services = {
      config,
      audit: () => Promise.resolve(audit),
      apiKeys: () => Promise.resolve(apiKeys),
      applicationSettings: () => Promise.resolve(settings),
      adminAccounts: () => Promise.resolve(admins),
      schedules: () => Promise.resolve(schedules),
      transaction: (work) => dataSource.transaction(work),
    };
  }

  /** The socket's path, or null where there is none (on a database server: no DATA_DIR owner). */
  get path(): string | null {
    return this.target.kind === 'embedded'
      ? join(this.target.socketDirectory, COMMAND_SOCKET)
      : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    const path = this.path;
    if (path === null) {
      return;
    }
    rmSync(path, { force: true });
    // Half-open: the command line ends its side once it has sent the request, then reads.
    const server = createServer({ allowHalfOpen: true }, (socket) => this.serve(socket));
    server.maxConnections = MAX_CONNECTIONS;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => resolve());
    });
    // The directory is the service's user's alone already; the socket too, whatever the umask.
    chmodSync(path, 0o600);
    server.on('error', (error) => this.logger.warn(`command socket: ${error.message}`));
    this.server = server;
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.connections) {
      socket.destroy();
    }
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  private serve(socket: Socket): void {
    this.connections.add(socket);
    socket.once('close', () => this.connections.delete(socket));
    socket.on('error', () => socket.destroy());
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const answer = (reply: CommandAnswer): void => {
      settled = true;
      clearTimeout(timer);
      // Nothing more is read: what a client sends past its request or the limit is not taken in.
      socket.removeAllListeners('data');
      socket.pause();
      socket.end(`${JSON.stringify(reply)}\n`);
      // A client that does not read its answer does not keep the connection.
      setTimeout(() => socket.destroy(), REQUEST_TIMEOUT_MS).unref();
    };
    const refuse = (message: string): void =>
      answer({ stdout: '', stderr: '', refused: 'failed', message: `command socket: ${message}` });
    const timer = setTimeout(
      () => refuse(`no whole request within ${REQUEST_TIMEOUT_MS / 1000} s`),
      REQUEST_TIMEOUT_MS,
    );
    socket.on('data', (chunk: Buffer) => {
      if (settled) {
        return;
      }
      const end = chunk.indexOf(0x0a);
      bytes += end === -1 ? chunk.length : end;
      if (bytes > REQUEST_MAX_BYTES) {
        refuse(`a request is at most ${REQUEST_MAX_BYTES} bytes`);
        return;
      }
      chunks.push(end === -1 ? chunk : chunk.subarray(0, end));
      if (end !== -1) {
        settled = true;
        clearTimeout(timer);
        socket.pause();
        void this.perform(Buffer.concat(chunks).toString('utf8')).then(answer);
      }
    });
    socket.once('end', () => {
      if (!settled) {
        refuse('the request ended before its end of line');
      }
    });
  }

  /** Parses the request and performs its command; whatever happens, an answer. */
  private async perform(line: string): Promise<CommandAnswer> {
    const output = new AnswerOutput();
    let end: CommandEnd;
    try {
      const request = requestOf(line);
      const command = SERVICE_COMMANDS.find((candidate) => candidate.name === request.command);
      if (!command) {
        throw new CommandFailed(
          `command socket: "${request.command.slice(0, 64)}" is not a command it performs`,
        );
      }
      const parsed = command.parse(request.args, () => {
        if (request.input === null) {
          throw new UsageError('the command line sent no file');
        }
        return request.input;
      });
      this.logger.debug(`svc ${command.name} ${request.args[0] ?? ''}`);
      await command.check?.(parsed);
      end = { status: await performCommand(command, parsed, this.services, output) };
    } catch (error) {
      const refusal = await refusalOf(error);
      if (refusal === null) {
        this.logger.warn(`command socket: ${(error as Error).message}`);
      }
      end = refusal ?? {
        refused: 'failed',
        message: `the service could not perform it: ${(error as Error).message}`,
      };
    }
    if (output.overflow) {
      end = { refused: 'failed', message: `its answer is over ${ANSWER_MAX_BYTES} bytes` };
    }
    return { stdout: output.stdout, stderr: output.stderr, ...end };
  }
}
