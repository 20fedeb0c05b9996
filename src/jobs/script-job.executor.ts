import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { CatalogService } from '../catalog/catalog.service';
import { ClaimedJob, ResultData } from '../queue/queue.repository';
import { JobExecutor } from '../queue/worker.service';
import { R_ENGINE, R_LOG_FILE, REngine } from '../r-engine/r-engine';
import { zipFiles } from '../results/result-archive';
import { CONFIGURATION_FILE } from './job-input';
import { renderConfigurationFile } from './job-meta';
import { errorResult, resultData } from './job-result';

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

  constructor(
    private readonly config: AppConfig,
    private readonly catalog: CatalogService,
    @Inject(R_ENGINE) private readonly engine: REngine,
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
      return resultData(true, 'zip', 'application/zip', await zipFiles(files));
    } finally {
      await rm(jobDir, { recursive: true, force: true }).catch((error: Error) =>
        this.logger.warn(`could not remove ${jobDir}: ${error.message}`),
      );
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
      await writeFile(join(workDir, file.name), file.content);
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
async function listResultFiles(
  workDir: string,
  provided: Set<string>,
): Promise<Array<{ name: string; path: string }>> {
  const found: Array<{ name: string; path: string }> = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const name = relative(workDir, path).split('\\').join('/');
      if (entry.isDirectory()) {
        await walk(path);
      } else if (entry.isFile() && !provided.has(name) && (await stat(path)).isFile()) {
        found.push({ name, path });
      }
    }
  };
  await walk(workDir);
  return found;
}
