import {
  EnvironmentRuntime,
  EnvironmentUnavailable,
  type JobEnvironment,
} from '../environments/environment-runtime';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, rmdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ApplicationsConfig, NodeConfig, WorkerConfig } from '../config/config-slices';
import { applicationSettingsOf } from '../config/application-settings';
import { JobLogRepository } from '../job-log/job-log.repository';
import { JobLogWriter } from '../job-log/job-log-writer';
import { CatalogService } from '../catalog/catalog.service';
import type { ClaimedJob, JobExecutor, ResultData } from '../queue/queue.types';
import { describeJobPath, JobOutputError } from '../r-engine/job-tree/job-tree';
import { listOutputFiles, type OutputTree } from '../r-engine/job-tree/job-tree-listing';
import { removeTree } from '../r-engine/job-tree/job-tree-removal';
import { R_ENGINE, R_LOG_FILE, REngine } from '../r-engine/r-engine';
import { zipFilesToBufferOrFile } from '../results/result-archive';
import { BLOB_INLINE_MAX_BYTES, copyChunksToFile, JOB_FILE_CHUNKS } from '../storage/blob-chunks';
import { CONFIGURATION_FILE } from '../job-core/job-input';
import { renderConfigurationFile } from '../job-core/job-meta';
import { errorResult, resultData, resultDataFile } from '../job-core/job-result';
import { activeTraceCarrier, inSpan } from '../tracing/tracing';
import { QueueRepository } from '../queue/queue.repository';
import type { NeededResult } from '../queue/queue-needs';
import { NeededResultError, writeNeededResults } from './needed-results';

/** Thrown for a job that cannot run as submitted: it ends with an error result, no retry. */
class JobDefinitionError extends Error {}

/**
 * What a job's output may hold to be packed; past it the job ends with an error result naming
 * the path. PATH_MAX bounds a path; the depth bounds the descriptors the listing holds open.
 */
const OUTPUT_LIMITS = { maxEntries: 10_000, maxDepth: 64, maxPathBytes: 4096 };

/**
 * Runs a multi-file job (SPEC §5.1): builds a private working directory from the stored files,
 * the catalog script or Sweave file and configuration.txt, runs the script on the R engine,
 * and zips every file R wrote (not the service's own files, not out.log).
 */
@Injectable()
export class ScriptJobExecutor implements JobExecutor {
  private readonly logger = new Logger(ScriptJobExecutor.name);
  private readonly jobsRoot = join(tmpdir(), 'svc-jobs');
  private readonly resultsRoot = join(tmpdir(), 'svc-results');
  private readonly logsROutput: boolean;

  constructor(
    private readonly config: WorkerConfig,
    private readonly applications: ApplicationsConfig,
    node: NodeConfig,
    private readonly catalog: CatalogService,
    @Inject(R_ENGINE) private readonly engine: REngine,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly jobLog: JobLogRepository,
    private readonly environments: EnvironmentRuntime,
    private readonly queue: QueueRepository,
  ) {
    this.logsROutput = node.logLevel === 'debug' || node.logLevel === 'trace';
  }

  get capacity(): number {
    return this.engine.maxConcurrentRuns;
  }

  async execute(job: ClaimedJob, signal: AbortSignal): Promise<ResultData> {
    // One directory per attempt: a re-run never sees a previous attempt's leftovers.
    const jobDir = join(this.jobsRoot, `${job.id}-${job.attempts}`);
    const workDir = join(jobDir, 'work');
    await this.makeJobDirectory(jobDir, workDir);
    try {
      const prepared = await inSpan(
        'svc.job.prepare',
        { attributes: { 'svc.job.id': job.id, 'svc.job.files': job.files.length } },
        async () => {
          try {
            return await this.prepare(job, workDir);
          } catch (error) {
            if (error instanceof JobDefinitionError) {
              return error;
            }
            throw error;
          }
        },
      );
      if (prepared instanceof JobDefinitionError) {
        return errorResult(job, prepared.message);
      }
      const { scriptName, provided } = prepared;
      let environment: JobEnvironment | null;
      try {
        environment = await inSpan(
          'svc.job.environment',
          { attributes: { 'svc.job.id': job.id } },
          () => this.environments.forJob(job.applicationName),
        );
      } catch (error) {
        if (error instanceof EnvironmentUnavailable) {
          return errorResult(job, error.message);
        }
        throw error;
      }
      const log = new Logger(`job ${job.id}`);
      // R's output goes to out.log, to the job's log in the database (GET .../log) as it comes,
      // and to the service's own log at debug level.
      const jobLog = await JobLogWriter.open(
        this.jobLog,
        job.id,
        job.attempts,
        this.config.jobLogMaxBytes,
      );
      if (environment) {
        // The job's record of what it ran with (its log, beside R's own SVC_R_ENVIRONMENT).
        jobLog.add(
          'stderr',
          `svc: R environment ${environment.environmentId} (${environment.librarySha256})`,
        );
      }
      const outcome = await inSpan(
        'svc.r.run',
        { attributes: { 'svc.job.id': job.id, 'svc.r.engine': this.engine.kind } },
        async (span) => {
          const ran = await this.engine
            .runScript({
              jobId: job.id,
              workDir,
              scriptName,
              timeoutMs: this.config.jobTimeoutSeconds * 1000,
              signal,
              applicationName: job.applicationName,
              environmentLibrary: environment?.libraryDir,
              network: applicationSettingsOf(this.applications, job.applicationName).networkAllowed,
              trace: activeTraceCarrier(),
              onOutput: (stream, line) => {
                jobLog.add(stream, line);
                if (this.logsROutput) {
                  log.debug(`R ${stream}: ${line}`);
                }
              },
              onProgress: (progress) => jobLog.progress(progress),
            })
            .finally(() => jobLog.close());
          span.set({
            'svc.r.outcome': ran.status === 'failed' ? ran.reason : ran.status,
            ...(ran.rCpuMs === undefined ? {} : { 'svc.r.cpu_ms': ran.rCpuMs }),
          });
          if (ran.status === 'failed') {
            span.fail(ran.reason);
          }
          return ran;
        },
      );
      const usage = outcome.rCpuMs === undefined ? {} : { rCpuMs: outcome.rCpuMs };
      if (outcome.status === 'failed') {
        return { ...errorResult(job, outcome.message), ...usage };
      }
      try {
        return {
          ...(await inSpan('svc.job.pack_result', { attributes: { 'svc.job.id': job.id } }, () =>
            this.packOutput(job, workDir, provided),
          )),
          ...usage,
        };
      } catch (error) {
        if (error instanceof JobOutputError) {
          // The job's own doing: its error result, not an engine failure to retry.
          return {
            ...errorResult(job, `The job's output cannot be returned: ${error.message}`),
            ...usage,
          };
        }
        throw error;
      }
    } finally {
      await removeJobDirectory(jobDir, workDir).catch((error: Error) =>
        this.logger.warn(`could not remove ${jobDir}: ${error.message}`),
      );
    }
  }

  /**
   * Lists every regular file R wrote (not the service's own files, not out.log) and zips them,
   * each read through a descriptor the listing's directory descriptors opened. Links, FIFOs,
   * sockets and device nodes are left out, and logged.
   */
  private async packOutput(
    job: ClaimedJob,
    workDir: string,
    provided: ReadonlySet<string>,
  ): Promise<ResultData> {
    const tree = await listOutputFiles(workDir, { exclude: provided, ...OUTPUT_LIMITS });
    try {
      if (tree.skippedCount > 0) {
        this.logger.warn(
          `job ${job.id}: left ${tree.skippedCount} entries that are not regular files out of the result (${tree.skipped
            .slice(0, 3)
            .map((entry) => `${entry.kind} "${describeJobPath(Buffer.from(entry.path))}"`)
            .join(', ')}${tree.skippedCount > 3 ? ', …' : ''})`,
        );
      }
      return await this.zipResult(tree);
    } finally {
      await tree.close();
    }
  }

  /**
   * The result ZIP: in memory when the files total at most BLOB_INLINE_MAX_BYTES (the common
   * case), else written to a file outside the job's directory (the worker removes it once
   * complete() has streamed it into the database), so a large result is never whole in memory.
   */
  private async zipResult(tree: OutputTree): Promise<ResultData> {
    const spillPath = join(this.resultsRoot, `${randomUUID()}.zip`);
    const sources = tree.files.map((file) => ({
      name: file.path,
      size: file.size,
      mtime: file.mtime,
      mode: file.mode,
      open: () => tree.open(file),
    }));
    const zipped = await zipFilesToBufferOrFile(sources, {
      path: spillPath,
      inlineMaxBytes: BLOB_INLINE_MAX_BYTES,
      makeDirectory: () => mkdir(this.resultsRoot, { recursive: true, mode: 0o700 }),
    });
    return 'data' in zipped
      ? resultData(true, 'zip', 'application/zip', zipped.data)
      : resultDataFile(true, 'zip', 'application/zip', zipped);
  }

  /**
   * Creates jobDir/work, private to the service (0700), with plain mkdir calls (a recursive
   * mkdir or an rm first costs a few system calls per job): the jobs root is made when missing,
   * and a job directory that exists already is a crashed attempt's, removed first (without
   * following what its job left there). Synchronous on the service's own directories
   * (docs/architecture.md).
   */
  private async makeJobDirectory(jobDir: string, workDir: string): Promise<void> {
    try {
      mkdirSync(jobDir, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        await mkdir(this.jobsRoot, { recursive: true, mode: 0o700 });
      } else if (code === 'EEXIST') {
        await removeTree(jobDir);
      } else {
        throw error;
      }
      mkdirSync(jobDir, { mode: 0o700 });
    }
    mkdirSync(workDir, { mode: 0o700 });
  }

  /** Writes the job's inputs; returns the script to source and the names the service put there. */
  private async prepare(
    job: ClaimedJob,
    workDir: string,
  ): Promise<{ scriptName: string; provided: Set<string> }> {
    const provided = new Set<string>([R_LOG_FILE]);
    // The claim brought the files along.
    const files = job.files;
    for (const file of files) {
      const path = join(workDir, file.name);
      if (file.chunked) {
        // A large file: streamed from its pieces, one in memory at a time.
        await copyChunksToFile(
          this.dataSource,
          JOB_FILE_CHUNKS,
          file.chunked.fileId,
          file.chunked.size,
          path,
        );
      } else {
        // At most BLOB_INLINE_MAX_BYTES (larger files come in pieces).
        writeFileSync(path, file.content);
      }
      provided.add(file.name);
    }
    const { rScript, sweaveFile } = job.meta;
    let scriptName = files.find((f) => /\.r$/i.test(f.name))?.name;
    if (rScript) {
      scriptName = await this.copyFromCatalog(
        job.applicationName,
        'R_SCRIPTS',
        rScript,
        workDir,
        'R script',
      );
      provided.add(scriptName);
    }
    if (sweaveFile) {
      provided.add(
        await this.copyFromCatalog(
          job.applicationName,
          'SWEAVE_FILES',
          sweaveFile,
          workDir,
          'Sweave file',
        ),
      );
    }
    writeFileSync(join(workDir, CONFIGURATION_FILE), renderConfigurationFile(job.meta));
    provided.add(CONFIGURATION_FILE);
    if (job.hasJobWait === true) {
      // A flow's step: the results of the steps it needs, a folder each.
      try {
        const needs = await this.queue.neededResults(job.id);
        const copy = (need: NeededResult, path: string) => this.queue.copyNeededResult(need, path);
        for (const folder of await writeNeededResults(workDir, dirname(workDir), needs, copy)) {
          provided.add(folder);
        }
      } catch (error) {
        if (error instanceof NeededResultError) {
          throw new JobDefinitionError(error.message);
        }
        throw error;
      }
    }
    if (!scriptName) {
      throw new JobDefinitionError(
        'The job has no R script: include one .R file or name a catalog script with the rScript meta parameter.',
      );
    }
    return { scriptName, provided };
  }

  private async copyFromCatalog(
    applicationName: string,
    section: 'R_SCRIPTS' | 'SWEAVE_FILES',
    name: string,
    workDir: string,
    what: string,
  ): Promise<string> {
    if (!/^[^/\\\0]+$/.test(name) || name === '.' || name === '..') {
      throw new JobDefinitionError(`The ${what} name "${name}" is not a plain file name.`);
    }
    const content = await this.catalog.getFile(applicationName, section, name);
    if (!content) {
      throw new JobDefinitionError(
        `The catalog of application ${applicationName} has no ${what} named "${name}" (section ${section}).`,
      );
    }
    writeFileSync(join(workDir, name), content);
    return name;
  }
}

/**
 * Removes a job's directory: what the job left in its working directory through descriptors,
 * never following a link (job-tree), then the directory the service made around it by name
 * (the job cannot write there). Whatever else is found there goes through removeTree too.
 */
async function removeJobDirectory(jobDir: string, workDir: string): Promise<void> {
  await removeTree(workDir);
  try {
    await rmdir(jobDir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') {
      await removeTree(jobDir);
    } else if (code !== 'ENOENT') {
      throw error;
    }
  }
}
