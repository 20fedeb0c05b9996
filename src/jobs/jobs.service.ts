import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Injectable, Optional } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { BLOB_INLINE_MAX_BYTES } from '../storage/blob-chunks';
import { explodeZipToFiles, validateJobFiles, ZipSource } from './job-archive';
import { CONFIGURATION_FILE, JobFileInput, JobMeta } from './job-input';
import { mergeMeta, parseConfigurationFile } from './job-meta';
import { FunctionCallKind, payloadFileName } from './function-call-result';
import { JobKind } from './job.entity';
import { JobRepository } from './job.repository';
import { MetricsService } from '../metrics/metrics.service';
import { CallbackUrlPolicy } from '../callbacks/callback-url.policy';
import type { JobCallbackTarget } from '../queue/queue.repository';

/**
 * The callback a request asks for, not yet checked: the URL as given, and the public base URL
 * of the request (the links in the callback's body are written under it).
 */
export interface CallbackRequest {
  url: string;
  linksBase: string;
}

export interface SubmittedJob {
  jobId: string;
  applicationName: string;
  submissionTime: Date;
}

/** Accepts jobs from every front end (REST body, form, SOAP): validate, store durably, wake a worker. */
@Injectable()
export class JobsService {
  constructor(
    private readonly config: AppConfig,
    private readonly jobs: JobRepository,
    private readonly notifier: QueueNotifier,
    private readonly callbackUrls: CallbackUrlPolicy,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  get zipLimits() {
    return {
      maxEntries: this.config.zipMaxEntries,
      maxUncompressedBytes: this.config.zipMaxUncompressedBytes,
      maxCompressionRatio: this.config.zipMaxCompressionRatio,
    };
  }

  /** A ZIP body: its entries are the job's files. */
  async submitZip(
    applicationName: string,
    zip: Buffer,
    meta: JobMeta,
    source: string,
    callback: CallbackRequest | null = null,
  ): Promise<SubmittedJob> {
    return this.submitZipSource(applicationName, zip, meta, source, callback);
  }

  /**
   * A ZIP archive on disk (read from there, never loaded whole): validated under the same rules
   * as submitZip before anything is stored; large entries are inflated to a temp directory and
   * streamed into the database from there.
   */
  async submitZipFile(
    applicationName: string,
    zipPath: string,
    meta: JobMeta,
    source: string,
    callback: CallbackRequest | null = null,
    jobId: string = randomUUID(),
  ): Promise<SubmittedJob> {
    return this.submitZipSource(applicationName, { path: zipPath }, meta, source, callback, jobId);
  }

  private async submitZipSource(
    applicationName: string,
    zip: ZipSource,
    meta: JobMeta,
    source: string,
    callback: CallbackRequest | null,
    jobId: string = randomUUID(),
  ): Promise<SubmittedJob> {
    // Checked before the archive is read: a refused callback costs no unpacking.
    const target = await this.checkedCallback(applicationName, callback);
    return this.withSpillDirectory(async (directory) => {
      const files = await this.explodeZip(zip, directory);
      return this.storeFiles(applicationName, files, meta, source, target, jobId);
    });
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
   * The files of a ZIP archive; entries larger than the inline limit are inflated into
   * `directory` (from withSpillDirectory) rather than into memory.
   */
  async explodeZip(zip: ZipSource, directory: string): Promise<JobFileInput[]> {
    // A directory per archive: a form may carry several.
    return explodeZipToFiles(zip, this.zipLimits, {
      directory: await mkdtemp(join(directory, 'zip-')),
      inlineMaxBytes: BLOB_INLINE_MAX_BYTES,
    });
  }

  /** Runs `use` with a private temp directory for inflated ZIP entries, removed afterwards. */
  async withSpillDirectory<T>(use: (directory: string) => Promise<T>): Promise<T> {
    const directory = await mkdtemp(join(this.config.formTempDir ?? tmpdir(), 'svc-zip-'));
    try {
      return await use(directory);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }

  /**
   * A multi-file job; each file in memory (`content`) or on disk (`path`, streamed into the
   * database; the caller removes it afterwards). `configuration.txt` is not a data file: its properties are merged into the
   * meta (the request's own meta wins). Everything is checked before anything is stored.
   * `jobId` is given by a caller that must be able to submit again without making a second job
   * (the drop directory): a second insert under the same id fails on the primary key.
   */
  async submitFiles(
    applicationName: string,
    files: JobFileInput[],
    meta: JobMeta,
    source: string,
    callback: CallbackRequest | null = null,
    jobId: string = randomUUID(),
  ): Promise<SubmittedJob> {
    const target = await this.checkedCallback(applicationName, callback);
    return this.storeFiles(applicationName, files, meta, source, target, jobId);
  }

  private async storeFiles(
    applicationName: string,
    files: JobFileInput[],
    meta: JobMeta,
    source: string,
    callback: JobCallbackTarget | null,
    jobId: string,
  ): Promise<SubmittedJob> {
    validateJobFiles(files);
    const configuration = files.find((f) => f.name === CONFIGURATION_FILE);
    const dataFiles = files.filter((f) => f !== configuration);
    const mergedMeta = configuration
      ? mergeMeta(
          parseConfigurationFile(
            'content' in configuration ? configuration.content : await readFile(configuration.path),
          ),
          meta,
        )
      : meta;
    const job = {
      id: jobId,
      applicationName,
      kind: JobKind.SCRIPT,
      meta: mergedMeta,
      source,
      // Taken here, not by the database, so the token shows exactly the stored time (ms precision).
      submittedAt: new Date(),
      files: dataFiles,
      callback,
    };
    await this.jobs.insert(job);
    this.notifier.jobQueued(applicationName);
    this.metrics?.jobSubmitted(applicationName, source);
    return { jobId: job.id, applicationName, submissionTime: job.submittedAt };
  }

  /** A function-call job (SPEC §5.2): the body is stored as the job's one file, its payload. */
  async submitFunctionCall(
    applicationName: string,
    kind: FunctionCallKind,
    payload: Buffer,
    meta: JobMeta,
    source: string,
    callback: CallbackRequest | null = null,
  ): Promise<SubmittedJob> {
    const target = await this.checkedCallback(applicationName, callback);
    const job = {
      id: randomUUID(),
      applicationName,
      kind: kind === 'xml' ? JobKind.XML : JobKind.JSON,
      meta,
      source,
      submittedAt: new Date(),
      files: [{ name: payloadFileName(kind), content: payload }],
      callback: target,
    };
    await this.jobs.insert(job);
    this.notifier.jobQueued(applicationName);
    this.metrics?.jobSubmitted(applicationName, source);
    return { jobId: job.id, applicationName, submissionTime: job.submittedAt };
  }
}
