import { Global, Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { MetricsService } from './metrics.service';

/**
 * The metrics registry, global so that the parts that count (submission, the worker) can take
 * it in every role; the `/metrics` route is added by the API (SystemModule).
 */
@Global()
@Module({
  imports: [QueueModule],
  providers: [MetricsService],
  exports: [MetricsService],
})
export class MetricsModule {}
