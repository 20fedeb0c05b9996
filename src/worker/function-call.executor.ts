import {
  EnvironmentRuntime,
  EnvironmentUnavailable,
  type JobEnvironment,
} from '../environments/environment-runtime';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { WorkerConfig } from '../config/config-slices';
import type { ClaimedJob, JobExecutor, ResultData } from '../queue/queue.types';
import { FUNCTION_CALL_ENGINE, FunctionCallEngine } from '../r-engine/function-call-engine';
import {
  CONTENT_TYPE_OF_KIND,
  FUNCTION_OF_KIND,
  functionCallErrorDocument,
  exportedFunctionOfFile,
  FunctionCallKind,
  payloadFileName,
} from '../job-core/function-call-result';
import { FunctionLibraryService } from '../r-engine/function-library';
import { resultData } from '../job-core/job-result';
import { JobLogRepository } from '../job-log/job-log.repository';
import { JobLogWriter } from '../job-log/job-log-writer';
import type { JobProgress } from '../r-engine/job-progress';
import { QueueRepository } from '../queue/queue.repository';
import { withNeededValues } from './needed-results';

/**
 * Runs a function-call job (SPEC §5.2): its payload goes to the application's svcXmlService or
 * svcJsonService on the function-call engine; the string returned is the result (type xml or
 * json). A queued call of an exported function (`<fn>.arguments.json`, src/functions/) calls it
 * with its JSON arguments, if the application still exports it, and its JSON value is the result. An R error, a missing function, an answer that is not one string, a timeout or a session
 * that died give success=false with the errorResult document (XML) or the flat JSON error.
 * Only an unreachable R (REngineUnavailableError) is thrown, so the worker retries the job.
 */
@Injectable()
export class FunctionCallJobExecutor implements JobExecutor {
  private readonly logger = new Logger(FunctionCallJobExecutor.name);

  constructor(
    private readonly config: WorkerConfig,
    @Inject(FUNCTION_CALL_ENGINE) private readonly engine: FunctionCallEngine,
    private readonly jobLog: JobLogRepository,
    private readonly libraries: FunctionLibraryService,
    private readonly environments: EnvironmentRuntime,
    private readonly queue: QueueRepository,
  ) {}

  async execute(job: ClaimedJob, signal: AbortSignal): Promise<ResultData> {
    const kind: FunctionCallKind = job.kind === 'xml' ? 'xml' : 'json';
    // The claim brought the files along.
    const file = job.files.find(
      (f) => f.name === payloadFileName(kind) || exportedFunctionOfFile(f.name) !== null,
    );
    const exported = file ? exportedFunctionOfFile(file.name) : null;
    const call = {
      jobId: job.id,
      applicationName: job.applicationName,
      submissionTime: job.submittedAt,
    };
    const fail = (message: string): ResultData =>
      resultData(
        false,
        kind,
        CONTENT_TYPE_OF_KIND[kind],
        Buffer.from(functionCallErrorDocument(kind, call, message), 'utf8'),
      );
    if (!file) {
      return fail('The job has no payload.');
    }
    if (exported !== null) {
      // The catalog may have changed since the job was queued: it runs only while exported.
      const functions = await this.libraries.exported(job.applicationName);
      if (!functions.some((f) => f.name === exported)) {
        return fail(`application ${job.applicationName} exports no function ${exported}`);
      }
    }
    // The job's log holds only its progress reports: opened with the first one, so a call that
    // reports none costs nothing.
    let log: Promise<JobLogWriter> | null = null;
    const onProgress = (progress: JobProgress): void => {
      log ??= JobLogWriter.open(this.jobLog, job.id, job.attempts, this.config.jobLogMaxBytes);
      log.then(
        (writer) => writer.progress(progress),
        (error: Error) => this.logger.warn(`job ${job.id}: no progress stored: ${error.message}`),
      );
    };
    let environment: JobEnvironment | null;
    try {
      environment = await this.environments.forJob(job.applicationName);
    } catch (error) {
      if (error instanceof EnvironmentUnavailable) {
        return fail(error.message);
      }
      throw error;
    }
    let payload = file.content.toString('utf8');
    if (exported !== null && job.hasJobWait === true) {
      const values = [];
      for (const need of await this.queue.neededResults(job.id)) {
        if (need.succeeded && need.type === 'json') {
          values.push({
            name: need.name,
            json: (await this.queue.neededResultData(need)).toString('utf8'),
          });
        }
      }
      payload = withNeededValues(payload, values);
    }
    const outcome = await this.engine
      .callFunction({
        applicationName: job.applicationName,
        environmentLibrary: environment?.libraryDir,
        functionName: exported ?? FUNCTION_OF_KIND[kind],
        exported: exported !== null,
        payload,
        timeoutMs: this.config.functionTimeoutSeconds * 1000,
        signal,
        onProgress,
      })
      .finally(async () => {
        await (await log?.catch(() => null))?.close();
      });
    if (outcome.status === 'failed') {
      this.logger.debug(`job ${job.id}: ${outcome.reason}: ${outcome.message}`);
      return fail(outcome.message);
    }
    return resultData(true, kind, CONTENT_TYPE_OF_KIND[kind], Buffer.from(outcome.value, 'utf8'));
  }
}
