import { CallbackStatusView, callbackStatusElement } from '../callbacks/callback-view';
import type { RestElement, RestView } from '../common/representation/rest-representation';
import { RestLinks } from '../common/public-uri';

/** The answer to a submission (202). */
export interface JobTokenView {
  jobId: string;
  applicationName: string;
  submissionTime: Date;
  applicationResultsUri: string;
  resultUri: string;
}

export interface JobStatusView {
  jobId: string;
  applicationName: string;
  state: 'QUEUED' | 'RUNNING' | 'DONE';
  submissionTime: Date;
  startTime?: Date | null;
  finishTime?: Date | null;
  attempts: number;
  resultUri: string;
  /** Set when the job was cancelled: who (principal or "anonymous") and when. */
  cancellation?: { by: string; time: Date } | null;
  /** The last progress its R code reported with svc_progress. */
  progress?: { fraction: number; message: string } | null;
  /** Set when the job named a callback URL: how its delivery stands. */
  callback?: CallbackStatusView | null;
}

/** A submitted job's token, with its links under `baseUrl`, and the result's URI (Location). */
export function jobTokenOf(
  baseUrl: string,
  job: { jobId: string; applicationName: string; submissionTime: Date },
): { token: JobTokenRepresentation; resultUri: string } {
  const links = new RestLinks(baseUrl);
  const resultUri = links.result(job.applicationName, job.jobId);
  const token = new JobTokenRepresentation({
    jobId: job.jobId,
    applicationName: job.applicationName,
    submissionTime: job.submissionTime,
    applicationResultsUri: links.applicationResults(job.applicationName),
    resultUri,
  });
  return { token, resultUri };
}

/** `jobToken`: every value an attribute. */
export class JobTokenRepresentation implements RestView {
  constructor(private readonly view: JobTokenView) {}

  toElement(): RestElement {
    const v = this.view;
    return {
      name: 'jobToken',
      attributes: {
        jobId: v.jobId,
        applicationName: v.applicationName,
        submissionTime: v.submissionTime,
        applicationResultsUri: v.applicationResultsUri,
        resultUri: v.resultUri,
      },
    };
  }
}

/**
 * `jobStatus`: the job's state and times as attributes (absent ones left out), then the children
 * it has of progress, cancellation and callback, in that order (the XSD's sequence).
 */
export class JobStatusRepresentation implements RestView {
  constructor(private readonly view: JobStatusView) {}

  toElement(): RestElement {
    const v = this.view;
    const children: RestElement[] = [];
    if (v.progress) {
      children.push({
        name: 'progress',
        attributes: { fraction: v.progress.fraction, message: v.progress.message },
      });
    }
    if (v.cancellation) {
      children.push({
        name: 'cancellation',
        attributes: { by: v.cancellation.by, time: v.cancellation.time },
      });
    }
    if (v.callback) {
      children.push(callbackStatusElement(v.callback));
    }
    return {
      name: 'jobStatus',
      attributes: {
        jobId: v.jobId,
        applicationName: v.applicationName,
        state: v.state,
        submissionTime: v.submissionTime,
        startTime: v.startTime,
        finishTime: v.finishTime,
        attempts: v.attempts,
        resultUri: v.resultUri,
      },
      children,
    };
  }
}
