/**
 * The queue's contracts: what a job is to the queue (its kinds and states), what goes in
 * (a new job and its files), what a worker gets (a claimed job) and hands back (its result
 * data), and the executor a worker runs claimed jobs with. Front ends and workers depend on
 * these; the queue depends on neither.
 */
import type { TraceCarrier } from '../tracing/tracing';

export const JobState = Object.freeze({
  QUEUED: 'QUEUED',
  RUNNING: 'RUNNING',
  DONE: 'DONE',
} as const);
export type JobState = (typeof JobState)[keyof typeof JobState];

export const JobKind = Object.freeze({
  SCRIPT: 'script',
  XML: 'xml',
  JSON: 'json',
  /**
   * The delivery of a finished job's callback (docs/api.md#job-callbacks): claimed, leased and
   * retried like the others, but never an R job: it takes no R slot and never shows as a job.
   */
  CALLBACK: 'callback',
  /**
   * The sending of an e-mail reply (docs/operations.md#jobs-by-e-mail): like a callback job,
   * claimed, leased and retried by the worker, never an R job and never shown as a job.
   */
  MAIL_REPLY: 'mail_reply',
} as const);
export type JobKind = (typeof JobKind)[keyof typeof JobKind];

/**
 * Where a job came from: the front end that submitted it, or the queue itself for a delivery job
 * (a callback, an e-mail reply).
 * Stored in the job's `source` column; named by the audit's `job.submitted` row and by the
 * `source` label of the job metrics.
 */
export const JobSource = Object.freeze({
  REST: 'rest',
  FORM: 'form',
  SOAP: 'soap',
  /** A drop directory's inbox. */
  DIRECTORY: 'directory',
  EMAIL: 'email',
  SCHEDULE: 'schedule',
  CALLBACK: 'callback',
  MAIL_REPLY: 'mail_reply',
} as const);
export type JobSource = (typeof JobSource)[keyof typeof JobSource];

const JOB_SOURCES: ReadonlySet<string> = new Set(Object.values(JobSource));

export function isJobSource(value: string): value is JobSource {
  return JOB_SOURCES.has(value);
}

/**
 * A job's `source` as read from the database, checked: an Error for a value that is none (a row
 * this version of the service did not write).
 */
export function jobSourceOf(value: string): JobSource {
  if (!isJobSource(value)) {
    throw new Error(`A job's source "${value}" is none of ${[...JOB_SOURCES].join(', ')}.`);
  }
  return value;
}

/** The kinds R runs: the jobs users submit and see. */
export const R_JOB_KINDS: readonly JobKind[] = Object.freeze([
  JobKind.SCRIPT,
  JobKind.XML,
  JobKind.JSON,
]);

/** The kinds that deliver what a job produced (a callback, an e-mail reply) rather than run R. */
export const DELIVERY_JOB_KINDS: readonly JobKind[] = Object.freeze([
  JobKind.CALLBACK,
  JobKind.MAIL_REPLY,
]);

/** A file of a multi-file job held in memory: a plain name (no directories) and its bytes. */
export interface JobFileContent {
  name: string;
  content: Buffer;
}

/** A file of a multi-file job on disk: streamed into the database when the job is stored. */
export interface JobFilePath {
  name: string;
  path: string;
}

/** A file of a multi-file job as a front end hands it over: in memory or on disk. */
export type JobFileInput = JobFileContent | JobFilePath;

export interface JobCallbackTarget {
  url: string;
  linksBase: string;
}

export interface NewJobRow {
  id: string;
  applicationName: string;
  kind: JobKind;
  meta: Record<string, string>;
  source: JobSource;
  submittedAt: Date;
  /** Within its application, higher runs first (default 0). */
  priority?: number;
  /** In memory, or on disk (large files are streamed into job_file_chunk). */
  files: JobFileInput[];
  /** Where the result is POSTed when the job ends, with the base of its links; null: nowhere. */
  callback?: JobCallbackTarget | null;
  /** The audit row of the submission (auditRowJson), written by the same statement; null: none. */
  audit?: string | null;
  /** The submitting caller's principal id (user:alice); null: the service, or anonymous. */
  submittedBy?: string | null;
  /** A function call's R function (an exported one, or svcXmlService/svcJsonService); null: a script job. */
  functionName?: string | null;
  /**
   * The jobs it waits for (a flow's step): stored queued but not due until every one of them has
   * ended (queue-needs.ts). Unset or empty: due at once.
   */
  needs?: JobNeed[];
  /** How many times a failed run is run again before the failure is its result (default 0). */
  retries?: number;
}

/** A job another waits for, and what the waiting one calls its result. */
export interface JobNeed {
  jobId: string;
  name: string;
  /** Its failure or cancellation cancels the waiting job (else that job runs without it). */
  required: boolean;
}

export interface ClaimedJob {
  id: string;
  applicationName: string;
  kind: JobKind;
  meta: Record<string, string>;
  submittedAt: Date;
  attempts: number;
  source: JobSource;
  /** Whether the job has a callback URL: storing its result queues the callback. */
  hasCallback: boolean;
  /**
   * Whether it has a job_wait row (queue-needs.ts): it waited for other jobs, whose results it
   * reads, or a failed run of it runs again.
   */
  hasJobWait?: boolean;
  /** The job's input files, in the order they were stored. */
  files: JobInputFile[];
  /** The trace it was submitted in (its run joins it); null when tracing was off then. */
  trace: TraceCarrier | null;
  /** A callback job's delivery: what its POST is made of. */
  callback?: CallbackDelivery;
  /** A mail-reply job's reply: whom it goes to and what it is about. */
  mailReply?: MailReplyDelivery;
}

/** A claimed mail-reply job: the reply a mail_reply row owes (its key: source, sourceKey). */
export interface MailReplyDelivery {
  source: string;
  sourceKey: string;
  applicationName: string;
  /** The job the reply is about (a refused message's was never stored). */
  jobId: string;
  /** Why the message is not a job; null: the reply carries the job's result. */
  rejection: string | null;
  replyTo: string;
  cc: string | null;
  subject: string;
  from: string;
  inReplyTo: string | null;
  attachMaxBytes: number;
  /** Attempts recorded before this one. */
  attempts: number;
  /** The retry period counts from here. */
  firstAttemptAt: Date;
}

/** A claimed callback job: the callback of the job `jobId`, and what its body is made of. */
export interface CallbackDelivery {
  /** The job whose callback it is. */
  jobId: string;
  url: string;
  /** Attempts recorded before this one. */
  attempts: number;
  /** When the job ended: the retry period counts from here. */
  createdAt: Date;
  /** The public base URL the job was submitted under, for the links in the body. */
  linksBase: string;
  result: {
    jobId: string;
    applicationName: string;
    resultTime: Date;
    success: boolean;
    type: string;
  };
}

export interface JobInputFile {
  name: string;
  /** The bytes; empty when the file is stored in pieces (`chunked`). */
  content: Buffer;
  /** Set for a file larger than the inline limit: its bytes are in job_file_chunk. */
  chunked: { fileId: string; size: number } | null;
}

export interface ResultData {
  success: boolean;
  /** Extension of the data: zip, txt, xml, json. */
  type: string;
  contentType: string;
  /** The bytes; empty when they are in `dataFile`. */
  data: Buffer;
  sha256: string;
  /**
   * A result too large to hold in memory: its bytes in a file (removed by the worker after
   * complete()), streamed into result_chunk.
   */
  dataFile?: { path: string; size: number };
  /** CPU milliseconds R used for the job, where the engine reports it (usage statistics). */
  rCpuMs?: number;
}

export interface ExpiredJob {
  id: string;
  applicationName: string;
  submittedAt: Date;
  attempts: number;
  lastError: string | null;
}

/** What a worker does with a claimed job. Throws REngineUnavailableError when R could not run it. */
export interface JobExecutor {
  execute(job: ClaimedJob, signal: AbortSignal): Promise<ResultData>;
  /** Jobs it can run at once (the R engine's limit); unset: no limit beyond the slots. */
  readonly capacity?: number;
}
export const JOB_EXECUTOR = Symbol('JOB_EXECUTOR');

/**
 * What a worker runs the jobs of one delivery kind with (DELIVERY_JOB_KINDS), in slots of their
 * own: claimed by a statement of the kind's own, one attempt per claim, the outcome recorded by
 * the executor under the worker's lease.
 */
export interface DeliveryJobExecutor {
  readonly kind: JobKind;
  /** Jobs of the kind one node runs at once; 0: none here (nothing to send them with). */
  readonly capacity: number;
  claim(owner: string, limit: number, leaseSeconds: number): Promise<ClaimedJob[]>;
  /**
   * One attempt of the claimed job leased by `owner`; `signal` aborts it (the node stops, or lost
   * the lease). Returns when it is to be tried again, or null when it ended (or was not recorded).
   */
  deliver(job: ClaimedJob, owner: string, signal: AbortSignal): Promise<Date | null>;
}
