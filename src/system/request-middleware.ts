import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { requestIdMiddleware } from '../common/log-context';
import { HttpMetricsMiddleware } from '../metrics/http-metrics.middleware';

/**
 * The two request-wide middlewares as one: the request id of the log lines, then (inside its log
 * context) the HTTP timing of the metrics. Registered once, so Express matches one layer per
 * request instead of two (each registered middleware is a router layer of its own).
 */
@Injectable()
export class RequestMiddleware implements NestMiddleware {
  constructor(private readonly metrics: HttpMetricsMiddleware) {}

  use(req: Request, res: Response, next: NextFunction): void {
    requestIdMiddleware(req, res, () => this.metrics.use(req, res, next));
  }
}
