import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import { RestLinks } from '../common/public-uri';
import { JobCancellationService } from '../jobs/job-cancellation.service';
import { JobsService, SubmittedJob } from '../jobs/jobs.service';
import { JobRecordsRepository, JobStepRow } from '../queue/job-records.repository';
import { JobSource, type JobNeed } from '../queue/queue.types';
import { FunctionLibraryService } from '../r-engine/function-library';
import type { Principal } from '../security/principal';
import { FlowEntity, FlowStepEntity } from './flow.entity';
import { FlowStep, OnFailure } from './flow-definition';
import { FlowRepository } from './flow.repository';
import { FlowView, flowViewOf } from './flows-view';

/** The answer to a flow's submission (202): its id, and where it is read. */
export interface FlowToken {
  flowId: string;
  applicationName: string;
  submissionTime: Date;
  flowUri: string;
}

/** A step's error as the intake gave it, with the step named (its status kept: 403, 413, 429). */
function ofStep(step: string, error: unknown): unknown {
  return error instanceof ApiError
    ? new ApiError(error.getStatus(), `step "${step}": ${error.message}`)
    : error;
}

/** 400 for a function step of a function the application does not export, naming the step. */
function checkFunctions(applicationName: string, steps: FlowStep[], exported: Set<string>): void {
  for (const step of steps) {
    if (step.kind === 'function' && !exported.has(step.function)) {
      throw ApiError.badRequest(
        `step "${step.name}": application ${applicationName} exports no function ${step.function}.`,
      );
    }
  }
}

/**
 * Flows (docs/flows.md): a flow's steps are jobs, each submitted through the one intake
 * (JobsService.submit: the caller's rights, the application's limits, the audit row), all in one
 * transaction with the flow's rows; the queue releases a step when the steps it needs have ended
 * (src/queue/queue-needs.ts). Cancelling a flow cancels its steps through the one cancel.
 */
@Injectable()
export class FlowsService {
  constructor(
    private readonly flows: FlowRepository,
    private readonly jobs: JobsService,
    private readonly cancellation: JobCancellationService,
    private readonly jobRecords: JobRecordsRepository,
    private readonly libraries: FunctionLibraryService,
  ) {}

  /**
   * Stores the flow and every step's job in one transaction, or nothing: a step the intake
   * refuses (the caller may not use the application, a limit) refuses the flow, naming the step.
   */
  async submit(
    applicationName: string,
    steps: FlowStep[],
    principal: Principal | null,
    links: RestLinks,
  ): Promise<FlowToken> {
    const flowId = randomUUID();
    const submissionTime = new Date();
    const jobIds = new Map(steps.map((step) => [step.name, randomUUID()]));
    const onFailure = new Map(steps.map((step) => [step.name, step.onFailure]));
    // Read before the transaction (the embedded database has one connection, which the
    // transaction holds), judged in it once the intake has authorized the caller.
    const exported = steps.some((step) => step.kind === 'function')
      ? new Set((await this.libraries.exported(applicationName)).map((fn) => fn.name))
      : new Set<string>();
    const submitted = await this.flows.inTransaction(async (transaction) => {
      const jobs: SubmittedJob[] = [];
      for (const step of steps) {
        const needs: JobNeed[] = step.needs.map((need) => ({
          jobId: jobIds.get(need) as string,
          name: need,
          required: onFailure.get(need) === OnFailure.FAIL,
        }));
        try {
          jobs.push(
            await this.jobs.submit({
              applicationName,
              source: JobSource.REST,
              meta: step.kind === 'script' ? step.meta : {},
              callback: null,
              parts:
                step.kind === 'function'
                  ? [
                      {
                        name: 'body',
                        label: null,
                        content: Buffer.from(step.argumentsJson, 'utf8'),
                        zip: false,
                      },
                    ]
                  : step.files.map((file) => ({
                      name: file.name,
                      label: `The file "${file.name}"`,
                      content: file.content,
                      zip: false,
                    })),
              ...(step.kind === 'function'
                ? { functionCall: 'json' as const, exportedFunction: step.function }
                : {}),
              caller: { kind: 'request', principal },
              jobId: jobIds.get(step.name),
              transaction,
              needs,
              retries: step.retries,
            }),
          );
        } catch (error) {
          throw ofStep(step.name, error);
        }
      }
      // After the intake has authorized the caller: the functions' names tell nothing to others.
      checkFunctions(applicationName, steps, exported);
      await this.flows.insert(
        transaction,
        Object.assign(new FlowEntity(), {
          id: flowId,
          applicationName,
          submittedAt: submissionTime,
          submittedBy: principal?.id ?? null,
          cancelledAt: null,
          cancelledBy: null,
        }),
        steps.map((step) =>
          Object.assign(new FlowStepEntity(), {
            flowId,
            name: step.name,
            // The order they were stored in: each after the steps it needs.
            position: steps.indexOf(step),
            needs: step.needs,
            onFailure: step.onFailure,
            retries: step.retries,
            jobId: jobIds.get(step.name) ?? null,
          }),
        ),
      );
      return jobs;
    });
    // Only the steps due at once can be claimed: the others are released by the queue.
    for (const [i, job] of submitted.entries()) {
      this.jobs.announce(job, steps[i].needs.length > 0);
    }
    return {
      flowId,
      applicationName,
      submissionTime,
      flowUri: links.flow(applicationName, flowId),
    };
  }

  /** The flow with each step's state; 404 when the application has no such flow. */
  async get(applicationName: string, flowId: string, links: RestLinks): Promise<FlowView> {
    const found = await this.flows.find(applicationName, flowId);
    if (found === null) {
      throw ApiError.notFound(`Application ${applicationName} has no flow ${flowId}.`);
    }
    const ids = found.steps.map((step) => step.jobId).filter((id): id is string => id !== null);
    const jobs = new Map<string, JobStepRow>(
      (await this.jobRecords.stepsOf(applicationName, ids)).map((row) => [row.id, row]),
    );
    return flowViewOf(found.flow, found.steps, jobs, links);
  }

  /**
   * Cancels the flow: every step not ended is cancelled through the one cancel (a running one's
   * node stops R), dependants before the steps they need, so that no step is released by the
   * cancellation of one it needs. 404 unknown; false: it had ended or was cancelled already.
   */
  async cancel(applicationName: string, flowId: string, by: string | null): Promise<boolean> {
    const found = await this.flows.find(applicationName, flowId);
    if (found === null) {
      throw ApiError.notFound(`Application ${applicationName} has no flow ${flowId}.`);
    }
    const marked = await this.flows.markCancelled(flowId, by ?? 'anonymous', new Date());
    let cancelled = false;
    for (const step of [...found.steps].reverse()) {
      if (step.jobId !== null) {
        const outcome = await this.cancellation.cancel(applicationName, step.jobId, by);
        cancelled ||= outcome === 'stopped' || outcome === 'stopping';
      }
    }
    return marked && cancelled;
  }
}
