import { Module } from '@nestjs/common';
import { EnvironmentRuntimeModule } from '../environments/environment-runtime.module';
import { PackageSyncService } from '../packages/package-sync.service';
import { PackagesModule } from '../packages/packages.module';
import { CallbackJobExecutor } from '../callbacks/callback-job.executor';
import { CallbacksModule } from '../callbacks/callbacks.module';
import { CatalogModule } from '../catalog/catalog.module';
import { MailReplyJobExecutor } from '../mail-replies/mail-reply-job.executor';
import { ResultsModule } from '../results/results.module';
import { ScriptJobExecutor } from './script-job.executor';
import { FunctionCallJobExecutor } from './function-call.executor';
import { JobKindExecutor } from './job-kind.executor';
import { JobLogModule } from '../job-log/job-log.module';
import { REngineModule } from '../r-engine/r-engine.module';
import { QueueModule } from '../queue/queue.module';
import { JOB_EXECUTOR } from '../queue/queue.types';
import { WorkerService } from './worker.service';
import { WorkerNodeHeartbeat } from './worker-node-heartbeat.service';

/**
 * What a worker node adds: the R engine, the job executor, the claim loop, and the delivery of
 * callbacks and e-mail replies.
 * No controllers.
 */
@Module({
  imports: [
    QueueModule,
    JobLogModule,
    REngineModule,
    CatalogModule,
    CallbacksModule,
    ResultsModule,
    PackagesModule,
    // The library each job of an application with an environment runs in, built when first needed.
    EnvironmentRuntimeModule,
  ],
  providers: [
    ScriptJobExecutor,
    FunctionCallJobExecutor,
    JobKindExecutor,
    { provide: JOB_EXECUTOR, useExisting: JobKindExecutor },
    WorkerService,
    // The node's row in worker_node, for the console's list of workers.
    WorkerNodeHeartbeat,
    // Callbacks are delivered where jobs run, as callback jobs: API nodes only store and show them.
    CallbackJobExecutor,
    // E-mail replies likewise, as mail-reply jobs (where SMTP_URL is set).
    MailReplyJobExecutor,
    // Installs the applications' R packages on this node (after the engine, before claiming).
    PackageSyncService,
  ],
  exports: [WorkerService],
})
export class WorkerModule {}
