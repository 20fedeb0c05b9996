import type { RestLinks } from '../common/public-uri';
import type { JobState } from '../queue/queue.types';
import type { JobStepRow } from '../queue/job-records.repository';
import type { FlowEntity, FlowStepEntity } from './flow.entity';

/** How an ended step or flow ended. */
export type FlowOutcome = 'succeeded' | 'failed' | 'cancelled';

export interface FlowStepView {
  name: string;
  needs: string[];
  onFailure: string;
  retries: number;
  /** The job's state; a step whose job was deleted shows DONE. */
  state: JobState;
  /** Queued, still waiting for steps it needs. */
  waiting: boolean;
  outcome?: FlowOutcome;
  jobId: string | null;
  jobUri?: string;
  resultUri?: string;
  startTime?: Date | null;
  finishTime?: Date | null;
  attempts?: number;
}

export interface FlowView {
  flowId: string;
  applicationName: string;
  submissionTime: Date;
  /** QUEUED until a step starts, RUNNING until every step has ended, then DONE. */
  state: JobState;
  outcome?: FlowOutcome;
  /** The step whose end decided the outcome (none for a cancelled flow: its cancellation did). */
  decidedBy?: string;
  cancellation?: { by: string; time: Date };
  steps: FlowStepView[];
}

function outcomeOf(job: JobStepRow): FlowOutcome {
  if (job.cancelled_at !== null) {
    return 'cancelled';
  }
  return job.success === true ? 'succeeded' : 'failed';
}

function stepViewOf(
  step: FlowStepEntity,
  job: JobStepRow | undefined,
  applicationName: string,
  links: RestLinks,
): FlowStepView {
  const common = {
    name: step.name,
    needs: step.needs,
    onFailure: step.onFailure,
    retries: step.retries,
    jobId: step.jobId,
  };
  if (job === undefined) {
    // Its job (and result) was deleted: it ended, how is no longer known.
    return { ...common, state: 'DONE', waiting: false };
  }
  return {
    ...common,
    state: job.state,
    waiting: job.waiting,
    ...(job.state === 'DONE' ? { outcome: outcomeOf(job) } : {}),
    jobUri: links.jobStatus(applicationName, job.id),
    resultUri: links.result(applicationName, job.id),
    startTime: job.started_at,
    finishTime: job.finished_at,
    attempts: job.attempts,
  };
}

/** The step that decided a flow that ended without being cancelled, and how it ended. */
function decision(
  steps: FlowStepView[],
): { outcome: FlowOutcome; decidedBy: string } | { outcome: FlowOutcome } {
  const byFinish = [...steps].sort(
    (a, b) => (a.finishTime?.getTime() ?? 0) - (b.finishTime?.getTime() ?? 0),
  );
  // The first step that did not succeed and whose failure fails the flow; a step it cancelled
  // ended in the same statement, so a failed step is preferred to a cancelled one at one time.
  const failing = byFinish.filter(
    (step) =>
      step.onFailure === 'fail' && step.outcome !== undefined && step.outcome !== 'succeeded',
  );
  const first =
    failing.find(
      (step) =>
        step.outcome === 'failed' &&
        step.finishTime?.getTime() === failing[0].finishTime?.getTime(),
    ) ?? failing[0];
  if (first !== undefined) {
    return { outcome: 'failed', decidedBy: first.name };
  }
  const last = byFinish[byFinish.length - 1];
  return last.outcome === undefined
    ? { outcome: 'succeeded' }
    : { outcome: 'succeeded', decidedBy: last.name };
}

/** The flow as GET shows it: its state from its steps' jobs, and which step decided its end. */
export function flowViewOf(
  flow: FlowEntity,
  steps: FlowStepEntity[],
  jobs: Map<string, JobStepRow>,
  links: RestLinks,
): FlowView {
  const views = steps.map((step) =>
    stepViewOf(
      step,
      step.jobId === null ? undefined : jobs.get(step.jobId),
      flow.applicationName,
      links,
    ),
  );
  const view: FlowView = {
    flowId: flow.id,
    applicationName: flow.applicationName,
    submissionTime: flow.submittedAt,
    state: views.every((step) => step.state === 'DONE')
      ? 'DONE'
      : views.some((step) => step.state !== 'QUEUED')
        ? 'RUNNING'
        : 'QUEUED',
    steps: views,
  };
  if (flow.cancelledAt !== null) {
    view.cancellation = { by: flow.cancelledBy ?? 'anonymous', time: flow.cancelledAt };
  }
  if (view.state === 'DONE') {
    Object.assign(view, flow.cancelledAt !== null ? { outcome: 'cancelled' } : decision(views));
  }
  return view;
}
