import {
  EnvironmentRuntime,
  EnvironmentUnavailable,
  type JobEnvironment,
} from '../environments/environment-runtime';
import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { ProcessConfig } from '../config/config-slices';
import {
  CONTENT_TYPE_OF_KIND,
  FUNCTION_OF_KIND,
  functionCallErrorDocument,
  FunctionCallKind,
} from '../job-core/function-call-result';
import {
  FUNCTION_CALL_ENGINE,
  FunctionCallEngine,
  FunctionCallOutcome,
  FunctionCallRequest,
} from '../r-engine/function-call-engine';
import { REngineUnavailableError } from '../r-engine/r-engine';
import { inSpan } from '../tracing/tracing';

export interface ProcessAnswer {
  status: 200 | 400;
  contentType: string;
  body: string;
}

/** Seconds a client is asked to wait when /process is saturated. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Synchronous function calls (SPEC §5.3). At most PROCESS_MAX_CONCURRENT run at once on this node
 * and PROCESS_MAX_QUEUED wait; a call beyond that is refused at once (503, Retry-After) rather than
 * left waiting without bound. On the engine they go before queued function-call jobs.
 */
@Injectable()
export class ProcessService {
  private running = 0;
  private readonly queue: Array<() => void> = [];

  constructor(
    private readonly config: ProcessConfig,
    @Inject(FUNCTION_CALL_ENGINE) private readonly engine: FunctionCallEngine,
    private readonly environments: EnvironmentRuntime,
  ) {}

  async call(
    applicationName: string,
    kind: FunctionCallKind,
    payload: string,
  ): Promise<ProcessAnswer> {
    const submissionTime = new Date();
    const outcome = await this.run({
      applicationName,
      functionName: FUNCTION_OF_KIND[kind],
      payload,
      timeoutMs: this.config.functionTimeoutSeconds * 1000,
      urgent: true,
    });
    if (outcome.status === 'succeeded') {
      return { status: 200, contentType: CONTENT_TYPE_OF_KIND[kind], body: outcome.value };
    }
    // There is no stored job: the call gets its own id, so the error document names something.
    const call = { jobId: randomUUID(), applicationName, submissionTime };
    return {
      status: 400,
      contentType: CONTENT_TYPE_OF_KIND[kind],
      body: functionCallErrorDocument(kind, call, outcome.message),
    };
  }

  /**
   * An exported function called at once (src/functions/): JSON arguments in, its value as JSON,
   * under the same limits and the same concurrency as every other synchronous call.
   */
  callExported(
    applicationName: string,
    functionName: string,
    argumentsJson: string,
  ): Promise<FunctionCallOutcome> {
    return this.run({
      applicationName,
      functionName,
      payload: argumentsJson,
      exported: true,
      timeoutMs: this.config.functionTimeoutSeconds * 1000,
      urgent: true,
    });
  }

  /** One call in the call's span, once a slot is free; R unreachable is a 503. */
  private async run(request: FunctionCallRequest): Promise<FunctionCallOutcome> {
    try {
      // The call's span: under the request's, with the wait for a slot and the session's call.
      return await inSpan(
        'svc.function.call',
        {
          attributes: {
            'svc.application': request.applicationName,
            'svc.function': request.functionName,
          },
        },
        async (span) => {
          await this.enter();
          try {
            let environment: JobEnvironment | null;
            try {
              environment = await this.environments.forJob(request.applicationName);
            } catch (error) {
              if (error instanceof EnvironmentUnavailable) {
                return { status: 'failed', reason: 'r-error', message: error.message } as const;
              }
              throw error;
            }
            const called = await this.engine.callFunction({
              ...request,
              environmentLibrary: environment?.libraryDir,
            });
            span.set({
              'svc.function.outcome': called.status === 'failed' ? called.reason : called.status,
            });
            return called;
          } finally {
            this.leave();
          }
        },
      );
    } catch (error) {
      if (error instanceof REngineUnavailableError) {
        throw ApiError.serviceUnavailable(`R is not available: ${error.message}`);
      }
      throw error;
    }
  }

  /** Calls running and waiting on this node (for metrics). */
  stats(): { running: number; queued: number } {
    return { running: this.running, queued: this.queue.length };
  }

  private enter(): Promise<void> {
    if (this.running < this.config.processMaxConcurrent) {
      this.running++;
      return Promise.resolve();
    }
    if (this.queue.length >= this.config.processMaxQueued) {
      return Promise.reject(
        ApiError.serviceUnavailable(
          `Too many function calls at once (${this.running} running, ${this.queue.length} waiting); try again shortly.`,
          RETRY_AFTER_SECONDS,
        ),
      );
    }
    // The slot is handed over by leave(): running stays counted.
    return new Promise<void>((resolve) => this.queue.push(resolve));
  }

  private leave(): void {
    const next = this.queue.shift();
    if (next) {
      next();
    } else {
      this.running--;
    }
  }
}
