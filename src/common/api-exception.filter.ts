import {
  ArgumentsHost,
  Catch,
  ExceptionFilter,
  HttpException,
  HttpStatus,
  Logger,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Request, Response } from 'express';
import { STATUS_CODES } from 'node:http';
import { QueryFailedError } from 'typeorm';
import { ApiError } from './api-error';
import { afterRefusedBody } from './limited-body';
import { methodNotAllowedFor, registeredRoutes } from './method-not-allowed';
import { errorFormat } from './negotiation';
import { ErrorRepresentation } from './representation/error-view';
import { renderRepresentation } from './representation/rest-representation';

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EPIPE',
  'EHOSTUNREACH',
]);

/** True for errors that mean "the database cannot be reached" rather than "this query is wrong". */
export function isDatabaseUnavailable(error: unknown): boolean {
  // Duck-typed: errors from Node's own modules may come from another realm (e.g. under jest).
  if (typeof error !== 'object' || error === null) {
    return false;
  }
  const driverError = (error instanceof QueryFailedError ? error.driverError : error) as {
    code?: unknown;
  };
  const code = typeof driverError.code === 'string' ? driverError.code : '';
  const rawMessage = (error as { message?: unknown }).message;
  const message = typeof rawMessage === 'string' ? rawMessage : '';
  return (
    CONNECTION_ERROR_CODES.has(code) ||
    code.startsWith('08') || // connection exceptions
    code === '57P01' || // admin shutdown
    code === '57P03' || // cannot connect now
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
      message,
    )
  );
}

/** Errors raised outside Nest's own exceptions that carry an HTTP status (raw-body's 413, etc.). */
function statusOf(error: unknown): number | undefined {
  const candidate = error as { status?: unknown; statusCode?: unknown; expose?: unknown };
  const status = typeof candidate.status === 'number' ? candidate.status : candidate.statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 && candidate.expose !== false
    ? status
    : undefined;
}

/**
 * Every error answer of the REST API: the `error` body of SPEC §4 in the negotiated format
 * (XML when nothing acceptable was asked for), never a stack trace. Unknown errors are logged
 * and answered 500; an unreachable database is 503 so clients retry.
 *
 * The one 405 of the API is made here too: a 404 for a path that routes serve with other methods
 * only is a 405 with `Allow`, from the routes Nest registered (method-not-allowed.ts). Such a
 * request reaches no handler of those routes, only the REST catch-all (public) or Nest's
 * not-found handler, so it is answered before authentication, as a missing path is; a handler's
 * own 404 (an unknown job) stays, since its route takes the method.
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('HTTP');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(thrown: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request>();
    const res = ctx.getResponse<Response>();
    const exception =
      thrown instanceof HttpException && (thrown.getStatus() as HttpStatus) === HttpStatus.NOT_FOUND
        ? (methodNotAllowedFor(
            registeredRoutes(this.adapterHost.httpAdapter?.getInstance()),
            req,
          ) ?? thrown)
        : thrown;
    let status: HttpStatus;
    let message: string;
    const headers: Record<string, string> = {};
    if (exception instanceof HttpException) {
      status = exception.getStatus();
      const response = exception.getResponse();
      const detail =
        typeof response === 'string' ? response : (response as { message?: unknown }).message;
      // Nest's own validation errors carry a list of messages.
      message = Array.isArray(detail)
        ? detail.join('; ')
        : typeof detail === 'string'
          ? detail
          : exception.message;
      if (exception instanceof ApiError) {
        Object.assign(headers, exception.headers);
      }
      if (status === HttpStatus.NOT_FOUND && !(exception instanceof ApiError)) {
        message = `No resource at ${req.method} ${req.path}.`;
      }
    } else if (isDatabaseUnavailable(exception)) {
      status = HttpStatus.SERVICE_UNAVAILABLE;
      message = 'The database is unavailable; nothing was stored. Try again shortly.';
      headers['Retry-After'] = '5';
      this.logger.warn(
        `${req.method} ${req.originalUrl}: database unavailable: ${(exception as Error).message}`,
      );
    } else if (statusOf(exception) !== undefined) {
      status = statusOf(exception) ?? 400;
      message =
        status === HttpStatus.PAYLOAD_TOO_LARGE
          ? 'The request body is larger than the configured limit.'
          : ((exception as Error).message ?? STATUS_CODES[status] ?? 'Bad request');
    } else {
      status = HttpStatus.INTERNAL_SERVER_ERROR;
      message = 'Internal error; it has been logged.';
      this.logger.error(
        `${req.method} ${req.originalUrl}: ${(exception as Error)?.stack ?? String(exception)}`,
      );
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const { format, mediaType } = errorFormat(req);
    for (const [name, value] of Object.entries(headers)) {
      res.setHeader(name, value);
    }
    const send = (): void => {
      res
        .status(status)
        .type(`${mediaType}; charset=utf-8`)
        .send(
          renderRepresentation(
            new ErrorRepresentation({ status, error: STATUS_CODES[status] ?? 'Error', message }),
            format,
          ),
        );
    };
    if (status === HttpStatus.PAYLOAD_TOO_LARGE) {
      // The connection is closed after the answer (the rest of a large body is not wanted), but
      // only once a bounded rest of the body has been read, so that the client sees the answer.
      res.setHeader('Connection', 'close');
      afterRefusedBody(req, send);
    } else {
      send();
    }
  }
}
