import {
  ArgumentsHost,
  Catch,
  ExceptionFilter,
  HttpException,
  HttpStatus,
  Logger,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { isDatabaseUnavailable } from '../common/api-exception.filter';
import { ApiError } from '../common/api-error';
import { SoapFault, soapFaultEnvelope } from './soap-fault';

export const FAULT_CONTENT_TYPE = 'text/xml; charset=utf-8';

interface FaultAnswer {
  status: number;
  fault: SoapFault;
  headers: Record<string, string>;
}

function messageOf(exception: HttpException): string {
  const response = exception.getResponse();
  const detail =
    typeof response === 'string' ? response : (response as { message?: unknown }).message;
  return Array.isArray(detail)
    ? detail.join('; ')
    : typeof detail === 'string'
      ? detail
      : exception.message;
}

/**
 * Every error of the SOAP endpoint as a SOAP 1.1 Fault (SPEC §7), never the REST error body:
 * what the caller must change (REST's 4xx) is soap:Client, the rest soap:Server, with HTTP 500
 * as WS-I BP R1126 requires. One exception: a missing or wrong credential keeps its 401 and
 * WWW-Authenticate, so that HTTP clients that authenticate on a challenge can retry.
 */
@Catch()
export class SoapFaultFilter implements ExceptionFilter {
  private readonly logger = new Logger('SOAP');

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request>();
    const res = ctx.getResponse<Response>();
    const answer = this.answerOf(exception, req);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (!req.complete) {
      // A fault found before the body was read whole (too large, malformed): do not drain it.
      res.setHeader('Connection', 'close');
    }
    for (const [name, value] of Object.entries(answer.headers)) {
      res.setHeader(name, value);
    }
    res.status(answer.status).type(FAULT_CONTENT_TYPE).send(soapFaultEnvelope(answer.fault));
  }

  private answerOf(exception: unknown, req: Request): FaultAnswer {
    const serverError: number = HttpStatus.INTERNAL_SERVER_ERROR;
    if (exception instanceof SoapFault) {
      return { status: serverError, fault: exception, headers: {} };
    }
    if (exception instanceof HttpException) {
      const status: number = exception.getStatus();
      const headers = exception instanceof ApiError ? { ...exception.headers } : {};
      const code = status < 500 ? 'Client' : 'Server';
      return {
        status: status === 401 ? status : serverError,
        fault: new SoapFault(code, messageOf(exception)),
        headers,
      };
    }
    if (isDatabaseUnavailable(exception)) {
      this.logger.warn(
        `${req.method} ${req.originalUrl}: database unavailable: ${(exception as Error).message}`,
      );
      return {
        status: serverError,
        fault: new SoapFault(
          'Server',
          'The database is unavailable; nothing was stored. Try again shortly.',
        ),
        headers: { 'Retry-After': '5' },
      };
    }
    this.logger.error(
      `${req.method} ${req.originalUrl}: ${(exception as Error)?.stack ?? String(exception)}`,
    );
    return {
      status: serverError,
      fault: new SoapFault('Server', 'Internal error; it has been logged.'),
      headers: {},
    };
  }
}
