import { randomUUID } from 'node:crypto';
import { Injectable, Optional } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { explodeZip, validateJobFiles } from './job-archive';
import { CONFIGURATION_FILE, JobFileInput, JobMeta } from './job-input';
import { mergeMeta, parseConfigurationFile } from './job-meta';
import { FunctionCallKind, payloadFileName } from './function-call-result';
import { JobKind } from './job.entity';
import { JobRepository } from './job.repository';
import { MetricsService } from '../metrics/metrics.service';

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
  ): Promise<SubmittedJob> {
    return this.submitFiles(applicationName, await explodeZip(zip, this.zipLimits), meta, source);
  }

  /**
   * A multi-file job. `configuration.txt` is not a data file: its properties are merged into the
   * meta (the request's own meta wins). Everything is checked before anything is stored.
   */
  async submitFiles(
    applicationName: string,
    files: JobFileInput[],
    meta: JobMeta,
    source: string,
  ): Promise<SubmittedJob> {
    validateJobFiles(files);
    const configuration = files.find((f) => f.name === CONFIGURATION_FILE);
    const dataFiles = files.filter((f) => f !== configuration);
    const mergedMeta = configuration
      ? mergeMeta(parseConfigurationFile(configuration.content), meta)
      : meta;
    const job = {
      id: randomUUID(),
      applicationName,
      kind: JobKind.SCRIPT,
      meta: mergedMeta,
      source,
      // Taken here, not by the database, so the token shows exactly the stored time (ms precision).
      submittedAt: new Date(),
      files: dataFiles,
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
  ): Promise<SubmittedJob> {
    const job = {
      id: randomUUID(),
      applicationName,
      kind: kind === 'xml' ? JobKind.XML : JobKind.JSON,
      meta,
      source,
      submittedAt: new Date(),
      files: [{ name: payloadFileName(kind), content: payload }],
    };
    await this.jobs.insert(job);
    this.notifier.jobQueued(applicationName);
    this.metrics?.jobSubmitted(applicationName, source);
    return { jobId: job.id, applicationName, submissionTime: job.submittedAt };
  }
}
