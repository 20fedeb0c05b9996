import { Module } from '@nestjs/common';
import { CatalogModule } from '../catalog/catalog.module';
import { ScriptJobExecutor } from '../jobs/script-job.executor';
import { FunctionCallJobExecutor } from '../jobs/function-call.executor';
import { JobKindExecutor } from '../jobs/job-kind.executor';
import { JobLogRepository } from '../jobs/job-log.repository';
import { REngineModule } from '../r-engine/r-engine.module';
import { QueueModule } from './queue.module';
import { JOB_EXECUTOR, WorkerService } from './worker.service';

/** What a worker node adds: the R engine, the job executor and the claim loop. No controllers. */
@Module({
  imports: [QueueModule, REngineModule, CatalogModule],
  providers: [
    JobLogRepository,
    ScriptJobExecutor,
    FunctionCallJobExecutor,
    JobKindExecutor,
    { provide: JOB_EXECUTOR, useExisting: JobKindExecutor },
    WorkerService,
  ],
  exports: [WorkerService],
})
export class WorkerModule {}
