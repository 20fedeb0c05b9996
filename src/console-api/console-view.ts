import { consoleJobUri, REST_PREFIX } from '../common/public-uri';
import type { AdminJobRow } from '../queue/job-admin.repository';
import type { JobKind, JobSource } from '../queue/queue.types';

/** How a job stands or ended, as the console shows it. */
export type JobOutcome = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

/** A job as the console's API answers it (docs/api.md#the-operator-console). */
export interface ConsoleJob {
  jobId: string;
  applicationName: string;
  kind: JobKind;
  source: JobSource;
  state: 'QUEUED' | 'RUNNING' | 'DONE';
  outcome: JobOutcome;
  priority: number;
  submittedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  submittedBy: string | null;
  /** A function call's R function (an exported one, or svcXmlService/svcJsonService); null: a script. */
  functionName: string | null;
  attempts: number;
  lostRuns: number;
  lastError: string | null;
  cancelledBy: string | null;
  meta: Record<string, string>;
  progress: { fraction: number; message: string } | null;
  links: { status: string; log: string; result: string | null; console: string };
}

function outcomeOf(row: AdminJobRow): JobOutcome {
  if (row.state === 'QUEUED') {
    return 'queued';
  }
  if (row.state === 'RUNNING') {
    return 'running';
  }
  if (row.cancelled_at !== null) {
    return 'cancelled';
  }
  return row.success === true ? 'succeeded' : 'failed';
}

function isoOrNull(time: Date | null): string | null {
  return time === null ? null : new Date(time).toISOString();
}

/** A job row as the console's Job, its links under the public base URL `base`. */
export function consoleJob(base: string, row: AdminJobRow): ConsoleJob {
  const path = `${row.application_name}/${row.id}`;
  return {
    jobId: row.id,
    applicationName: row.application_name,
    kind: row.kind,
    source: row.source,
    state: row.state,
    outcome: outcomeOf(row),
    priority: row.priority,
    submittedAt: new Date(row.submitted_at).toISOString(),
    startedAt: isoOrNull(row.started_at),
    finishedAt: isoOrNull(row.finished_at),
    submittedBy: row.submitted_by,
    functionName: row.function_name,
    attempts: row.attempts,
    lostRuns: row.lost_runs,
    lastError: row.last_error,
    cancelledBy: row.cancelled_by,
    meta: row.meta,
    progress:
      row.progress_fraction === null
        ? null
        : { fraction: row.progress_fraction, message: row.progress_message ?? '' },
    links: {
      status: `${base}${REST_PREFIX}/jobs/${path}`,
      log: `${base}${REST_PREFIX}/jobs/${path}/log`,
      result:
        row.result_type === null ? null : `${base}${REST_PREFIX}/result/${path}.${row.result_type}`,
      console: consoleJobUri(base, row.application_name, row.id),
    },
  };
}
