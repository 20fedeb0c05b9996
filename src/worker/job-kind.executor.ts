import { Injectable } from '@nestjs/common';
import { ClaimedJob, JobExecutor, JobKind, ResultData } from '../queue/queue.types';
import { FunctionCallJobExecutor } from './function-call.executor';
import { ScriptJobExecutor } from './script-job.executor';

/** The worker's executor: script jobs to ScriptJobExecutor, XML and JSON jobs to function calls. */
@Injectable()
export class JobKindExecutor implements JobExecutor {
  constructor(
    private readonly scripts: ScriptJobExecutor,
    private readonly functionCalls: FunctionCallJobExecutor,
  ) {}

  /** The script engine's limit (webR: one); function calls share it on webR and queue in the pool on native R. */
  get capacity(): number | undefined {
    return this.scripts.capacity;
  }

  execute(job: ClaimedJob, signal: AbortSignal): Promise<ResultData> {
    switch (job.kind) {
      case JobKind.SCRIPT:
        return this.scripts.execute(job, signal);
      case JobKind.XML:
      case JobKind.JSON:
        return this.functionCalls.execute(job, signal);
      case JobKind.CALLBACK:
      case JobKind.MAIL_REPLY:
        // Not R: the worker hands delivery jobs to their kind's executor.
        return Promise.reject(new Error(`job ${job.id}: a ${job.kind} job is not run by R`));
    }
  }
}
