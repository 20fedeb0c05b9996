import { Global, Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';
import { WorkerMetricsServer } from './worker-metrics.server';

/**
 * The metrics registry, global so that the parts that count (submission, the worker) can take
 * it in every role. The API serves `/metrics` (MetricsController); a worker can serve it on
 * its own port (WorkerMetricsServer).
 */
@Global()
@Module({
  providers: [MetricsService, WorkerMetricsServer],
  exports: [MetricsService],
})
export class MetricsModule {}
