import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Injectable, Optional } from '@nestjs/common';
import { IntakeLimitsConfig } from '../config/config-slices';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { BLOB_INLINE_MAX_BYTES } from '../storage/blob-chunks';
import { explodeZipToFiles, validateJobFiles } from './job-archive';
import { ApiError } from '../common/api-error';
import { CONFIGURATION_FILE, JobMeta } from '../job-core/job-input';
import { mergeMeta, parseConfigurationFile } from '../job-core/job-meta';
import {
  exportedCallFileName,
  FunctionCallKind,
  payloadFileName,
  functionCallText,
  FUNCTION_OF_KIND,
} from '../job-core/function-call-result';
import { MetricsService } from '../metrics/metrics.service';
import { CallbackUrlPolicy } from '../callbacks/callback-url.policy';
import { QueueRepository } from '../queue/queue.repository';
import type { EntityManager } from 'typeorm';
import { SubmissionLimits } from './submission-limits';
import {
  JobKind,
  type JobSource,
  type JobCallbackTarget,
  type JobFileInput,
  type JobFilePath,
  type JobNeed,
  type NewJobRow,
} from '../queue/queue.types';
import { auditRowJson } from '../audit/audit.repository';
import { AuditActor, AuditService } from '../audit/audit.service';
import { currentRequestActor } from '../common/request-actor';
import type { Principal } from '../security/principal';
import { RequestAccessService } from '../security/request-access.service';

/**
 * The callback a request asks for, not yet checked: the URL as given, and the public base URL
 * of the request (the links in the callback's body are written under it).
 */
export interface CallbackRequest {
  url: string;
  linksBase: string;
}

/** A part of a submission as a front end received it: in memory (`content`) or on disk (`path`). */
export interface IntakePart {
  /** Its file name in the job (a ZIP archive's entries bring their own). */
  name: string;
  /**
   * How messages name it, e.g. `The file "data.zip"`, `The payload "job.zip"`; errors in its
   * ZIP entries are prefixed with it. null: the request's body, named as such.
   */
  label: string | null;
  content?: Buffer;
  path?: string;
  /**
   * A request body still arriving: one that announces at most BLOB_INLINE_MAX_BYTES is read into
   * memory; any other is written to the intake's spill directory as it comes (never held whole in
   * memory), up to MAX_REQUEST_BYTES (413 beyond).
   */
  stream?: Readable;
  /** The size the stream announces (Content-Length): over the limit, refused before reading. */
  declaredBytes?: number;
  /** A ZIP archive whose entries are the job's files. */
  zip: boolean;
}

/**
 * Who submits a job. A request's caller (its principal; null: anonymous, or AUTH_MODE=none) is
 * authorized by the intake for the application and the job's kind, whatever the front end
 * (REST, form, SOAP, a queued exported call). The service itself submits what an admin set up,
 * whose setting-up was authorized: a schedule's runs, a drop directory's files, a mailbox's
 * messages from the senders its settings allow.
 */
export type SubmissionCaller =
  { kind: 'request'; principal: Principal | null } | { kind: 'service' };

/** Who a job records as its submitter: a request's principal; null for the service or anonymous. */
function submitterOf(caller: SubmissionCaller): string | null {
  return caller.kind === 'request' ? (caller.principal?.id ?? null) : null;
}

/** A job as a front end hands it to the intake. */
export interface Submission {
  applicationName: string;
  /** The front end that hands it over. */
  source: JobSource;
  meta: JobMeta;
  callback: CallbackRequest | null;
  parts: IntakePart[];
  /** A function call: one part, its XML or JSON payload. Unset: a script job. */
  functionCall?: FunctionCallKind;
  /**
   * A JSON function call of this exported function (src/functions/): the payload is its named
   * arguments, already checked to be a JSON object. Unset: svcJsonService's payload.
   */
  exportedFunction?: string;
  /**
   * Who acts when no request does (a schedule's run): its audit row names it. Unset: the request's
   * actor, or, outside of a request, nobody by the job's source (a drop directory).
   */
  actor?: AuditActor;
  /** Who submits it: authorized by the intake, and counted by the per-caller rate. */
  caller: SubmissionCaller;
  /** The priority the caller asks for (X-SVC-Priority, the form's field, SOAP's element). */
  priority?: number;
  /**
   * The job's id, given by a caller that must be able to submit again without making a second
   * job (the drop directory): a second insert under the same id fails on the primary key.
   */
  jobId?: string;
  /**
   * An outer transaction to store the job in (the scheduler stores its run's key with it). The
   * caller calls `announce` once it has committed: until then no worker of this node can see it.
   */
  transaction?: EntityManager;
  /**
   * A flow's step: the jobs (stored before it, in the same transaction) it waits for, and the
   * reruns of a failed run it has (src/flows/). Unset: a job on its own.
   */
  needs?: JobNeed[];
  retries?: number;
}

function fileOnDisk(part: IntakePart): JobFilePath {
  if (part.path === undefined) {
    throw new Error(`the part ${part.name} has neither content nor a path`);
  }
  return { name: part.name, path: part.path };
}

/** The largest job of an application: MAX_REQUEST_BYTES, or its own maxJobSizeBytes below it. */
interface JobSizeLimit {
  applicationName: string;
  bytes: number;
  limit: 'maxJobSizeBytes' | null;
}

function tooLarge(size: JobSizeLimit): ApiError {
  return ApiError.payloadTooLarge(
    size.limit === null
      ? `The request body is larger than the configured limit (MAX_REQUEST_BYTES: ${size.bytes} bytes).`
      : `The job is larger than the application "${size.applicationName}" allows (maxJobSizeBytes: ${size.bytes} bytes).`,
  );
}

/**
 * A private temp directory for one submission's spooled bodies and large ZIP entries, made on
 * first use: a small submission, read and inflated in memory, touches no file system at all.
 */
class SpillDirectory {
  private made: Promise<string> | null = null;

  constructor(private readonly parent: string) {}

  path(): Promise<string> {
    this.made ??= mkdtemp(join(this.parent, 'svc-zip-'));
    return this.made;
  }

  async remove(): Promise<void> {
    if (this.made) {
      await rm(await this.made, { recursive: true, force: true });
    }
  }
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}

/** A small body whole, as it arrives; a client that stops sending it is a 400. */
async function readSmall(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) {
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    throw ApiError.badRequest(`The request body could not be read: ${(error as Error).message}.`);
  }
  return Buffer.concat(chunks);
}

/** The payload of a function call, checked: one part, and functionCallText's check of its text. */
async function functionCallPayload(kind: FunctionCallKind, parts: IntakePart[]): Promise<Buffer> {
  if (parts.length !== 1) {
    throw ApiError.badRequest(`A function call has one payload (got ${parts.length}).`);
  }
  const [part] = parts;
  const payload = part.content ?? (await readFile(fileOnDisk(part).path));
  functionCallText(kind, payload, part.label ?? undefined);
  return payload;
}

export interface SubmittedJob {
  jobId: string;
  applicationName: string;
  submissionTime: Date;
  kind: JobKind;
  source: JobSource;
}

/**
 * Accepts jobs from every front end (REST body, form, SOAP, ...): authorize the caller, validate,
 * store durably, wake a worker.
 */
@Injectable()
export class JobsService {
  constructor(
    private readonly config: IntakeLimitsConfig,
    private readonly queue: QueueRepository,
    private readonly notifier: QueueNotifier,
    private readonly callbackUrls: CallbackUrlPolicy,
    private readonly limits: SubmissionLimits,
    private readonly access: RequestAccessService,
    @Optional() private readonly metrics?: MetricsService,
    @Optional() private readonly audit?: AuditService,
  ) {
    this.spillParent = config.formTempDir ?? tmpdir();
  }

  /** Where spill directories are made (read once: os.tmpdir() reads the environment each call). */
  private readonly spillParent: string;

  get zipLimits() {
    return {
      maxEntries: this.config.zipMaxEntries,
      maxUncompressedBytes: this.config.zipMaxUncompressedBytes,
      maxCompressionRatio: this.config.zipMaxCompressionRatio,
    };
  }

  /**
   * The one intake of every front end (REST, the form, SOAP and the drop directory): a script
   * job from its parts (ZIP archives exploded under the ZIP rules, other files as they are) or a
   * function call from its one payload. Meta comes collected (job-meta.ts), the callback
   * unchecked. Everything is checked before anything is stored; 4xx ApiErrors otherwise.
   */
  async submit(submission: Submission): Promise<SubmittedJob> {
    const { applicationName, parts } = submission;
    // The application's limits before anything is read: a refused job costs no unpacking.
    const size: JobSizeLimit = { applicationName, ...this.limits.maxJobBytes(applicationName) };
    let priority: number;
    const { caller } = submission;
    try {
      // The one authorization of a submission: the guard could not see the application of a
      // form or an envelope, so none of the front ends asks it.
      if (caller.kind === 'request') {
        this.access.authorizeSubmission(
          caller.principal,
          applicationName,
          submission.functionCall ? 'functionCall' : 'script',
        );
      }
      priority = this.limits.priorityOf(applicationName, submission.priority);
      await this.checkReceivedSize(parts, size);
      await this.limits.admit(applicationName, submitterOf(caller), submission.transaction);
    } catch (error) {
      // A body still arriving is read and dropped, so that the client gets the answer.
      for (const part of parts) {
        part.stream?.resume();
      }
      throw error;
    }
    if (submission.functionCall) {
      const payload = await functionCallPayload(submission.functionCall, parts);
      const callback = await this.checkedCallback(applicationName, submission.callback);
      return this.store({
        applicationName,
        kind: submission.functionCall === 'xml' ? JobKind.XML : JobKind.JSON,
        meta: submission.meta,
        source: submission.source,
        files: [
          {
            name:
              submission.exportedFunction === undefined
                ? payloadFileName(submission.functionCall)
                : exportedCallFileName(submission.exportedFunction),
            content: payload,
          },
        ],
        callback,
        id: submission.jobId,
        transaction: submission.transaction,
        priority,
        actor: submission.actor,
        submittedBy: submitterOf(submission.caller),
        functionName: submission.exportedFunction ?? FUNCTION_OF_KIND[submission.functionCall],
        needs: submission.needs,
        retries: submission.retries,
      });
    }
    // Checked before the archives are read: a refused callback costs no unpacking.
    const callback = await this.checkedCallback(applicationName, submission.callback);
    const spill = new SpillDirectory(this.spillParent);
    try {
      const files: JobFileInput[] = [];
      for (const part of parts) {
        files.push(...(await this.filesOf(part, spill, size)));
      }
      return await this.storeScriptJob(submission, files, callback, priority);
    } finally {
      await spill.remove();
    }
  }

  /**
   * The parts already received (in memory or on disk) against the application's maxJobSizeBytes
   * (MAX_REQUEST_BYTES held them to the global limit as they arrived): 413 beyond it.
   */
  private async checkReceivedSize(parts: IntakePart[], size: JobSizeLimit): Promise<void> {
    if (size.limit === null) {
      return;
    }
    let total = 0;
    for (const part of parts) {
      if (part.content) {
        total += part.content.length;
      } else if (part.path !== undefined && !part.stream) {
        total += (await stat(part.path)).size;
      }
    }
    if (total > size.bytes) {
      this.limits.rejected(size.applicationName, 'maxJobSizeBytes');
      throw tooLarge(size);
    }
  }

  /** A part's job files: a ZIP's entries (large ones inflated into `directory`), else itself. */
  private async filesOf(
    received: IntakePart,
    spill: SpillDirectory,
    size: JobSizeLimit,
  ): Promise<JobFileInput[]> {
    const part = received.stream
      ? await this.receive(received, received.stream, spill, size)
      : received;
    if (!part.zip) {
      return [part.content ? { name: part.name, content: part.content } : fileOnDisk(part)];
    }
    const bytes = part.content ? part.content.length : (await stat(fileOnDisk(part).path)).size;
    if (bytes === 0) {
      throw ApiError.badRequest(
        part.label === null
          ? 'The request body is empty; send a ZIP archive.'
          : `${part.label} is empty: a ZIP archive was expected.`,
      );
    }
    try {
      return await explodeZipToFiles(part.content ?? fileOnDisk(part), this.zipLimits, {
        // A directory per archive: a submission may carry several.
        directory: async () => mkdtemp(join(await spill.path(), 'zip-')),
        inlineMaxBytes: BLOB_INLINE_MAX_BYTES,
      });
    } catch (error) {
      if (error instanceof ApiError && part.label !== null) {
        throw new ApiError(error.getStatus(), `in ${lowerFirst(part.label)}: ${error.message}`);
      }
      throw error;
    }
  }

  /**
   * A part's stream, counted against the limit: in memory when it announced a small size (HTTP
   * framing holds it to that), else written to a file of the spill directory.
   */
  private async receive(
    part: IntakePart,
    stream: Readable,
    spill: SpillDirectory,
    size: JobSizeLimit,
  ): Promise<IntakePart> {
    const limit = size.bytes;
    const refuse = (): ApiError => {
      if (size.limit !== null) {
        this.limits.rejected(size.applicationName, size.limit);
      }
      return tooLarge(size);
    };
    if ((part.declaredBytes ?? 0) > limit) {
      // Read and dropped, so that the client gets the answer.
      stream.resume();
      throw refuse();
    }
    if (part.declaredBytes !== undefined && part.declaredBytes <= BLOB_INLINE_MAX_BYTES) {
      return {
        name: part.name,
        label: part.label,
        content: await readSmall(stream),
        zip: part.zip,
      };
    }
    const path = join(await mkdtemp(join(await spill.path(), 'body-')), 'body');
    let received = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        received += chunk.length;
        done(received > limit ? refuse() : null, chunk);
      },
    });
    // Not pipeline(stream, …): on an error it would destroy the request, and with it the answer.
    const written = pipeline(counter, createWriteStream(path));
    const abort = (): void => {
      if (!stream.readableEnded) {
        counter.destroy(new Error('the client stopped sending it'));
      }
    };
    stream.once('error', abort).once('close', abort).pipe(counter);
    try {
      await written;
    } catch (error) {
      stream.unpipe(counter);
      stream.resume();
      if (error instanceof ApiError) {
        throw error;
      }
      throw ApiError.badRequest(`The request body could not be read: ${(error as Error).message}.`);
    } finally {
      stream.off('error', abort).off('close', abort);
    }
    return { name: part.name, label: part.label, path, zip: part.zip };
  }

  /** The callback to store with the job, once CallbackUrlPolicy accepts it (else 400). */
  private async checkedCallback(
    applicationName: string,
    callback: CallbackRequest | null,
  ): Promise<JobCallbackTarget | null> {
    if (callback === null) {
      return null;
    }
    const url = await this.callbackUrls.check(applicationName, callback.url);
    return { url, linksBase: callback.linksBase };
  }

  /**
   * A script job's files: `configuration.txt` is not a data file: its properties are merged
   * into the meta (the request's own meta wins).
   */
  private async storeScriptJob(
    submission: Submission,
    files: JobFileInput[],
    callback: JobCallbackTarget | null,
    priority: number,
  ): Promise<SubmittedJob> {
    validateJobFiles(files);
    const configuration = files.find((f) => f.name === CONFIGURATION_FILE);
    const meta = configuration
      ? mergeMeta(
          parseConfigurationFile(
            'content' in configuration ? configuration.content : await readFile(configuration.path),
          ),
          submission.meta,
        )
      : submission.meta;
    return this.store({
      applicationName: submission.applicationName,
      kind: JobKind.SCRIPT,
      meta,
      source: submission.source,
      files: files.filter((f) => f !== configuration),
      callback,
      id: submission.jobId,
      transaction: submission.transaction,
      priority,
      actor: submission.actor,
      submittedBy: submitterOf(submission.caller),
      needs: submission.needs,
      retries: submission.retries,
    });
  }

  private async store(
    job: Omit<NewJobRow, 'id' | 'submittedAt'> & {
      id?: string;
      transaction?: EntityManager;
      actor?: AuditActor;
    },
  ): Promise<SubmittedJob> {
    const { transaction, actor, ...fields } = job;
    const row: NewJobRow = {
      ...fields,
      id: job.id ?? randomUUID(),
      // Taken here, not by the database, so the token shows exactly the stored time (ms precision).
      submittedAt: new Date(),
    };
    // Written by the job's own statement: no job without its row, no row without the job.
    row.audit = this.audit
      ? auditRowJson(
          this.audit.rowOf(
            { action: 'job.submitted', details: { kind: job.kind, source: job.source } },
            // Outside of a request (a drop directory) nobody authenticated: the source says how.
            actor ?? (currentRequestActor() ? null : { principal: null, authMethod: job.source }),
          ),
        )
      : null;
    const outcome = await this.queue.enqueue(row, {
      transaction,
      maxQueued: this.limits.maxQueuedOf(job.applicationName),
      startHere: true,
    });
    if (!outcome.stored) {
      throw this.limits.queueFull(job.applicationName, outcome.queued);
    }
    const submitted: SubmittedJob = {
      jobId: row.id,
      applicationName: job.applicationName,
      submissionTime: row.submittedAt,
      kind: job.kind,
      source: job.source,
    };
    if (transaction === undefined) {
      this.announce(submitted, outcome.startedHere);
    }
    return submitted;
  }

  /**
   * Wakes this node's workers and counts the job, once it is committed: done by `submit` itself,
   * by the caller for a job stored in an outer transaction. A job that started here at once, or
   * that waits for other jobs (a flow's step, released by the queue), wakes nobody (`noClaimNow`):
   * no worker can claim it now.
   */
  announce(job: SubmittedJob, noClaimNow = false): void {
    if (!noClaimNow) {
      this.notifier.jobQueued(job.kind);
    }
    this.metrics?.jobSubmitted(job.applicationName, job.source);
  }
}
