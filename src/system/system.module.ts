import { MiddlewareConsumer, Module, NestModule, RequestMethod } from '@nestjs/common';
import { HttpMetricsMiddleware } from '../metrics/http-metrics.middleware';
import { RequestMiddleware } from './request-middleware';
import { SystemService } from './system.service';

/**
 * Health and node information, plus the two request-wide middlewares: the request id of the
 * log lines and the HTTP timing of the metrics. Its controllers (SystemController,
 * MetricsController) are declared in ApiModule, which orders the routes.
 */
@Module({
  providers: [SystemService, HttpMetricsMiddleware, RequestMiddleware],
  exports: [SystemService],
})
export class SystemModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequestMiddleware).forRoutes({ path: '*path', method: RequestMethod.ALL });
  }
}
