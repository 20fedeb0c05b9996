import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { routeLabelOf } from '../common/route-label';
import { MetricsService } from './metrics.service';

/**
 * Times every HTTP request and records it by route pattern (routeLabelOf): unknown paths share
 * the route `unmatched`, a 405 is counted under the resource it names.
 */
@Injectable()
export class HttpMetricsMiddleware implements NestMiddleware {
  constructor(private readonly metrics: MetricsService) {}

  use(req: Request, res: Response, next: NextFunction): void {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.metrics.httpRequest(req.method, routeLabelOf(req), res.statusCode, seconds);
    });
    next();
  }
}
