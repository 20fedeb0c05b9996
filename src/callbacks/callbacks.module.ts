import { Module } from '@nestjs/common';
import { QueueModule } from '../queue/queue.module';
import { CallbackRetryPolicy } from './callback-retry.policy';
import { CallbackUrlPolicy } from './callback-url.policy';
import { CallbackRepository } from './callback.repository';
import { HostLookup } from './host-lookup';

/**
 * Job callbacks: the URL check at submission and the delivery state. The delivery itself runs
 * on worker nodes as callback jobs (CallbackJobExecutor, in WorkerModule).
 */
@Module({
  imports: [QueueModule],
  providers: [CallbackRepository, CallbackUrlPolicy, CallbackRetryPolicy, HostLookup],
  exports: [CallbackRepository, CallbackUrlPolicy, CallbackRetryPolicy, HostLookup],
})
export class CallbacksModule {}
