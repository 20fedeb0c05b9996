import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { MetricsService } from './metrics.service';

/**
 * Times every HTTP request and records it by route pattern (`/svc/api/rest/results/:app`, not
 * the concrete path, so label values stay few); unmatched paths share the route `unmatched`.
 */
@Injectable()
export class HttpMetricsMiddleware implements NestMiddleware {
  constructor(private readonly metrics: MetricsService) {}

  use(req: Request, res: Response, next: NextFunction): void {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const routePath = (req.route as { path?: unknown } | undefined)?.path;
      const route = typeof routePath === 'string' ? `${req.baseUrl}${routePath}` : 'unmatched';
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.metrics.httpRequest(req.method, route, res.statusCode, seconds);
    });
    next();
  }
}
