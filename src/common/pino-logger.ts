import { LoggerService } from '@nestjs/common';
import pino, { Logger as Pino } from 'pino';
import { currentLogContext } from './log-context';
import { LOG_REDACT_CENSOR, LOG_REDACT_PATHS } from './log-redaction';

const NEST_STARTUP_CONTEXTS = new Set([
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestFactory',
]);

function isFields(message: unknown): message is Record<string, unknown> {
  return (
    message !== null &&
    typeof message === 'object' &&
    Object.getPrototypeOf(message) === Object.prototype
  );
}

/** Nest's logger interface on pino: one JSON line per event, with the Nest context as `context`. */
export class PinoLoggerService implements LoggerService {
  readonly pino: Pino;

  constructor(level: string, destination?: pino.DestinationStream) {
    // The mixin adds the request id or job id of the code that logs (see log-context.ts).
    const options = {
      level,
      base: { pid: process.pid },
      mixin: currentLogContext,
      redact: { paths: LOG_REDACT_PATHS, censor: LOG_REDACT_CENSOR },
    };
    this.pino = destination ? pino(options, destination) : pino(options);
  }

  private write(
    level: 'info' | 'warn' | 'error' | 'debug' | 'trace' | 'fatal',
    message: unknown,
    params: unknown[],
  ): void {
    const context =
      typeof params[params.length - 1] === 'string'
        ? (params[params.length - 1] as string)
        : undefined;
    if (message instanceof Error) {
      this.pino[level]({ context, err: message }, message.message);
    } else if (isFields(message)) {
      // A structured line (the access log): its fields as they are, `msg` as the message.
      const { msg, ...fields } = message;
      this.pino[level]({ context, ...fields }, typeof msg === 'string' ? msg : undefined);
    } else {
      this.pino[level](
        { context },
        typeof message === 'string' ? message : JSON.stringify(message),
      );
    }
  }

  log(message: unknown, ...params: unknown[]): void {
    const context = params[params.length - 1];
    // Nest's start-up chatter (one line per module and route) is detail, not news.
    this.write(
      typeof context === 'string' && NEST_STARTUP_CONTEXTS.has(context) ? 'debug' : 'info',
      message,
      params,
    );
  }
  error(message: unknown, ...params: unknown[]): void {
    // Nest passes (message, stack, context); keep the stack in the line.
    const [stack, context] = params;
    if (typeof stack === 'string' && typeof context === 'string') {
      this.pino.error({ context, stack }, String(message));
      return;
    }
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }
}
