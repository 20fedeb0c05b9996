import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { CatalogService } from '../catalog/catalog.service';
import { ClaimedJob, ResultData } from '../queue/queue.repository';
import { JobExecutor } from '../queue/worker.service';
import { R_ENGINE, R_LOG_FILE, REngine } from '../r-engine/r-engine';
import { zipFiles, zipFilesToFile } from '../results/result-archive';
import { BLOB_INLINE_MAX_BYTES, copyChunksToFile, JOB_FILE_CHUNKS } from '../storage/blob-chunks';
import { CONFIGURATION_FILE } from './job-input';
import { renderConfigurationFile } from './job-meta';
import { errorResult, resultData, resultDataFile } from './job-result';

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

  constructor(
    private readonly config: AppConfig,
    private readonly catalog: CatalogService,
    @Inject(R_ENGINE) private readonly engine: REngine,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  get capacity(): number {
    return this.engine.maxConcurrentRuns;
  }

  async execute(job: ClaimedJob, signal: AbortSignal): Promise<ResultData> {
    // One directory per attempt: a re-run never sees a previous attempt's leftovers.
    const jobDir = join(this.jobsRoot, `${job.id}-${job.attempts}`);
    const workDir = join(jobDir, 'work');
    await rm(jobDir, { recursive: true, force: true });
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    try {
      let scriptName: string;
      let provided: Set<string>;
      try {
        ({ scriptName, provided } = await this.prepare(job, workDir));
      } catch (error) {
        if (error instanceof JobDefinitionError) {
          return errorResult(job, error.message);
        }
        throw error;
      }
      const log = new Logger(`job ${job.id}`);
      const outcome = await this.engine.runScript({
        jobId: job.id,
        workDir,
        scriptName,
        timeoutMs: this.config.jobTimeoutSeconds * 1000,
        signal,
        onOutput: (stream, line) => log.debug(`R ${stream}: ${line}`),
      });
      if (outcome.status === 'failed') {
        return errorResult(job, outcome.message);
      }
      const files = await listResultFiles(workDir, provided);
      return await this.zipResult(files);
    } finally {
      await rm(jobDir, { recursive: true, force: true }).catch((error: Error) =>
        this.logger.warn(`could not remove ${jobDir}: ${error.message}`),
      );
    }
  }

  /**
   * The result ZIP: in memory when the files are small (the common case), else written to a file
   * outside the job's directory (the worker removes it once complete() has streamed it into the
   * database), so a large result is never held whole in memory.
   */
  private async zipResult(files: ResultFile[]): Promise<ResultData> {
    const total = files.reduce((sum, file) => sum + file.size, 0);
    if (total <= BLOB_INLINE_MAX_BYTES) {
      return resultData(true, 'zip', 'application/zip', await zipFiles(files));
    }
    await mkdir(this.resultsRoot, { recursive: true, mode: 0o700 });
    const path = join(this.resultsRoot, `${randomUUID()}.zip`);
    try {
      const { size, sha256 } = await zipFilesToFile(files, path);
      if (size > BLOB_INLINE_MAX_BYTES) {
        return resultDataFile(true, 'zip', 'application/zip', { path, size, sha256 });
      }
      // Compressed below the limit: inline after all.
      const data = await readFile(path);
      await rm(path, { force: true });
      return resultData(true, 'zip', 'application/zip', data);
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
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
        await writeFile(path, file.content);
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
    await writeFile(join(workDir, CONFIGURATION_FILE), renderConfigurationFile(job.meta));
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
    await writeFile(join(workDir, name), content);
    return name;
  }
}

/** Every regular file under workDir that the service did not put there, with its path relative to workDir. */
interface ResultFile {
  name: string;
  path: string;
  size: number;
}

async function listResultFiles(workDir: string, provided: Set<string>): Promise<ResultFile[]> {
  const found: ResultFile[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const name = relative(workDir, path).split('\\').join('/');
      if (entry.isDirectory()) {
        await walk(path);
      } else if (entry.isFile() && !provided.has(name)) {
        const stats = await stat(path);
        if (stats.isFile()) {
          found.push({ name, path, size: stats.size });
        }
      }
    }
  };
  await walk(workDir);
  return found;
}
