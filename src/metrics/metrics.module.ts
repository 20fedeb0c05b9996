import { Global, Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { MetricsService } from './metrics.service';
import { WorkerMetricsServer } from './worker-metrics.server';

/**
 * The metrics registry, global so that the parts that count (submission, the worker) can take
 * it in every role. The API serves `/metrics` (MetricsController); a worker can serve it on
 * its own port (WorkerMetricsServer).
 */
@Global()
@Module({
  imports: [QueueModule],
  providers: [MetricsService, WorkerMetricsServer],
  exports: [MetricsService],
})
export class MetricsModule {}
