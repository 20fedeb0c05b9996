import { Injectable, Logger, NestMiddleware } from '@nestjs/common';
import { NodeConfig } from '../config/config-slices';
import type { NextFunction, Request, Response } from 'express';
import { currentLogContext, requestIdMiddleware } from '../common/log-context';
import { runAsRequest } from '../common/request-actor';
import { HttpMetricsMiddleware } from '../metrics/http-metrics.middleware';
import { followRequest } from './access-log';

/**
 * The request-wide middlewares as one: `X-Content-Type-Options: nosniff`, the request id of the log lines, then (inside its log
 * context) the access log line (ACCESS_LOG) and the HTTP timing of the metrics. Registered once, so Express matches one layer per
 * request instead of two (each registered middleware is a router layer of its own).
 */
@Injectable()
export class RequestMiddleware implements NestMiddleware {
  private readonly accessLog = new Logger('Access');

  constructor(
    private readonly metrics: HttpMetricsMiddleware,
    private readonly config: NodeConfig,
  ) {}

  use(req: Request, res: Response, next: NextFunction): void {
    // First, so that every answer has it, errors and 404s included: a browser never guesses a
    // type other than the one sent (a job's text result shown as HTML).
    res.setHeader('X-Content-Type-Options', 'nosniff');
    requestIdMiddleware(req, res, () => {
      if (this.config.accessLog) {
        followRequest(req, res, (fields) => this.accessLog.log(fields));
      }
      // The audit trail's who and from where (the principal is added once authenticated).
      runAsRequest(currentLogContext().requestId ?? null, req.socket.remoteAddress ?? null, () =>
        this.metrics.use(req, res, next),
      );
    });
  }
}
