import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { applicationSettingsOf } from '../config/application-settings';
import { JobLogRepository } from '../jobs/job-log.repository';
import { JobLogWriter } from '../jobs/job-log-writer';
import { CatalogService } from '../catalog/catalog.service';
import type { ClaimedJob, JobExecutor, ResultData } from '../queue/queue.types';
import { R_ENGINE, R_LOG_FILE, REngine } from '../r-engine/r-engine';
import { zipFilesToBufferOrFile } from '../results/result-archive';
import { BLOB_INLINE_MAX_BYTES, copyChunksToFile, JOB_FILE_CHUNKS } from '../storage/blob-chunks';
import { CONFIGURATION_FILE } from '../jobs/job-input';
import { renderConfigurationFile } from '../jobs/job-meta';
import { errorResult, resultData, resultDataFile } from '../jobs/job-result';

/** Thrown for a job that cannot run as submitted: it ends with an error result, no retry. */
class JobDefinitionError extends Error {}

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
    private readonly config: AppConfig,
    private readonly catalog: CatalogService,
    @Inject(R_ENGINE) private readonly engine: REngine,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly jobLog: JobLogRepository,
  ) {
    this.logsROutput = config.logLevel === 'debug' || config.logLevel === 'trace';
  }

  get capacity(): number {
    return this.engine.maxConcurrentRuns;
  }

  async execute(job: ClaimedJob, signal: AbortSignal): Promise<ResultData> {
    // One directory per attempt: a re-run never sees a previous attempt's leftovers.
    const jobDir = join(this.jobsRoot, `${job.id}-${job.attempts}`);
    const workDir = join(jobDir, 'work');
    await this.makeJobDirectory(jobDir, workDir);
    // Names of the files in workDir that the executor knows of, for removeJobDirectory.
    const known: string[] = [];
    try {
      let scriptName: string;
      let provided: Set<string>;
      try {
        ({ scriptName, provided } = await this.prepare(job, workDir));
        known.push(...provided);
      } catch (error) {
        if (error instanceof JobDefinitionError) {
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
      const outcome = await this.engine
        .runScript({
          jobId: job.id,
          workDir,
          scriptName,
          timeoutMs: this.config.jobTimeoutSeconds * 1000,
          signal,
          applicationName: job.applicationName,
          network: applicationSettingsOf(this.config, job.applicationName).networkAllowed,
          onOutput: (stream, line) => {
            jobLog.add(stream, line);
            if (this.logsROutput) {
              log.debug(`R ${stream}: ${line}`);
            }
          },
          onProgress: (progress) => jobLog.progress(progress),
        })
        .finally(() => jobLog.close());
      const usage = outcome.rCpuMs === undefined ? {} : { rCpuMs: outcome.rCpuMs };
      if (outcome.status === 'failed') {
        return { ...errorResult(job, outcome.message), ...usage };
      }
      const files = listResultFiles(workDir, provided);
      known.push(...files.map((file) => file.name));
      return { ...(await this.zipResult(files)), ...usage };
    } finally {
      await removeJobDirectory(jobDir, workDir, known).catch((error: Error) =>
        this.logger.warn(`could not remove ${jobDir}: ${error.message}`),
      );
    }
  }

  /**
   * The result ZIP: in memory when the files total at most BLOB_INLINE_MAX_BYTES (the common
   * case), else written to a file outside the job's directory (the worker removes it once
   * complete() has streamed it into the database), so a large result is never whole in memory.
   */
  private async zipResult(files: Array<{ name: string; path: string }>): Promise<ResultData> {
    const spillPath = join(this.resultsRoot, `${randomUUID()}.zip`);
    const zipped = await zipFilesToBufferOrFile(files, {
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
   * and a job directory that exists already is a crashed attempt's, removed first. Synchronous,
   * as the executor's other calls on the job's directory (docs/architecture.md).
   */
  private async makeJobDirectory(jobDir: string, workDir: string): Promise<void> {
    try {
      mkdirSync(jobDir, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        await mkdir(this.jobsRoot, { recursive: true, mode: 0o700 });
      } else if (code === 'EEXIST') {
        await rm(jobDir, { recursive: true, force: true });
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
 * Removes a job's directory. Unlinking the files the executor knows of, then the two
 * directories, takes half the CPU of a recursive rm (0.6 against 1.2 ms for a plot job's
 * directory); anything else there (a subdirectory, a file written after the listing) makes
 * rmdir fail, and the recursive rm takes over.
 */
async function removeJobDirectory(jobDir: string, workDir: string, known: string[]): Promise<void> {
  try {
    for (const name of known) {
      try {
        unlinkSync(join(workDir, name));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
          throw error;
        }
      }
    }
    rmdirSync(workDir);
    rmdirSync(jobDir);
  } catch {
    await rm(jobDir, { recursive: true, force: true });
  }
}

/** Every regular file under workDir that the service did not put there, with its path relative to workDir. */
function listResultFiles(
  workDir: string,
  provided: Set<string>,
): Array<{ name: string; path: string }> {
  const found: Array<{ name: string; path: string }> = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const name = relative(workDir, path).split('\\').join('/');
      if (entry.isDirectory()) {
        walk(path);
      } else if (entry.isFile() && !provided.has(name)) {
        // A regular file, not a link (readdir's type does not follow links); zipFiles reads it.
        found.push({ name, path });
      }
    }
  };
  walk(workDir);
  return found;
}
