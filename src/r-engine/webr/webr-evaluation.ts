import { constants as fsConstants, readFileSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { WebR } from 'webr';
import type { REngineConfig } from '../../config/config-slices';
import type { FunctionCallOutcome, FunctionCallRequest } from '../function-call-engine';
import { rSourcePath } from '../r-sources';
import { traceEnvironment } from '../../tracing/tracing';
import { routeOutput } from '../job-progress';
import { R_LOG_FILE, type ScriptRunOutcome, type ScriptRunRequest } from '../r-engine';
import {
  copyBack,
  copyIn,
  MIB,
  OutputLog,
  ReadBackLimitError,
  removeVfsTree,
  type RunState,
} from './webr-files';
import {
  EXIT_PATTERN,
  isolated,
  messageOf,
  parseAnswer,
  REFUSED_PATTERN,
  rString,
} from './webr-worker';

/**
 * What the engine takes from the configuration; every key is optional (tests build it bare).
 * WEBR_INSTANCES: one instance for all applications, or one per application. MAX_REQUEST_BYTES
 * bounds a function's answer; R_MAX_FILE_MB, R_MAX_WRITE_MB and ZIP_MAX_ENTRIES bound what a
 * script's run hands back (one file, all files, how many), as they do for native R.
 */
export type WebRConfig = Partial<
  Pick<
    REngineConfig,
    'webrInstances' | 'maxRequestBytes' | 'rMaxFileMb' | 'rMaxWriteMb' | 'zipMaxEntries'
  >
>;

/** A line of R's output longer than this is cut (the rest is dropped), in characters. */
export const WEBR_LINE_MAX_CHARS = 64 * 1024;
/** How often a running script's output is taken from webR's output queue. */
const OUTPUT_POLL_MS = 250;
/** Where runs get their VFS directories; WebREngine makes it in each new instance. */
export const JOBS_DIR = '/jobs';

/**
 * What runs on a webR instance, once WebREngine gave it the instance and its turn: a script
 * job, or a function call, with the service's R programs (run-job.R, call-function.R,
 * svc-env.R) and R's output taken from webR's queue as it comes.
 */
export class WebREvaluator {
  private runCount = 0;
  /** call-function.R, shared with the native sessions; read once. */
  private callFunctionCode: string | undefined;
  /** svc-env.R (the svc environment: svc_progress), shared with native R; read once. */
  private svcEnvSource: string | undefined;
  /** run-job.R, the job wrapper native R uses too; read once. */
  private jobSource: string | undefined;
  /** json.R, the JSON codec of exported functions; read once. */
  private jsonCode: string | undefined;

  constructor(private readonly config: WebRConfig) {}

  /**
   * R that attaches the svc environment, as native R's fork server, spawn entry and sessions do
   * (svc-env.R): a script or function sees the same names on both engines. `isolated` detaches
   * it after the run.
   */
  private attachSvc(): string {
    this.svcEnvSource ??= readFileSync(rSourcePath('svc-env.R'), 'utf8');
    return `eval(parse(text = ${rString(this.svcEnvSource)}, keep.source = FALSE))()`;
  }

  private jobCode(): string {
    this.jobSource ??= readFileSync(rSourcePath('run-job.R'), 'utf8');
    return this.jobSource;
  }

  /**
   * Calls the function on `webR` in a fresh environment holding the application's library;
   * `replace` closes the instance and starts another, for a call that ended R.
   */
  async callFunction(
    webR: WebR,
    request: FunctionCallRequest,
    files: Array<{ name: string; content: string }>,
    replace: () => void,
  ): Promise<FunctionCallOutcome> {
    this.callFunctionCode ??= readFileSync(rSourcePath('call-function.R'), 'utf8');
    // webR has base R only: an exported function's JSON goes through json.R.
    this.jsonCode ??= readFileSync(rSourcePath('json.R'), 'utf8');
    const codec = request.exported
      ? `eval(parse(text = ${rString(this.jsonCode)}, keep.source = FALSE))`
      : 'NULL';
    const vector = (values: string[]): string => `c(${values.map(rString).join(', ')})`;
    const app = rString(request.applicationName);
    const maxBytes = this.config.maxRequestBytes ?? Number.MAX_SAFE_INTEGER;
    // Nothing is left in the global environment; quit() inside the function ends the instance.
    const code = isolated(`
      svc <- ${this.callFunctionCode}
      ${this.attachSvc()}
      lib <- tryCatch(
        svc$load(${app}, ${vector(files.map((f) => f.name))}, ${vector(files.map((f) => f.content))}),
        error = function(e) conditionMessage(e))
      if (is.character(lib)) c("fail", "r-error", lib)
      else svc$call(lib, ${app}, ${rString(request.functionName)}, ${rString(request.payload)},
                    ${maxBytes}, ${codec})`);
    await webR.flush(); // whatever an earlier evaluation left is not this call's
    // The function's output is not captured (it would be held whole): it is taken from webR's
    // output queue as it comes, only its progress reports are kept.
    const output = routeOutput({ onProgress: request.onProgress });
    const takeOutput = async (): Promise<void> => {
      for (const { type, data } of await webR.flush()) {
        if (type === 'stdout' && typeof data === 'string') {
          output?.('stdout', data.slice(0, WEBR_LINE_MAX_CHARS));
        }
      }
    };
    let taking = Promise.resolve();
    const outputTimer = setInterval(() => {
      taking = taking.then(takeOutput).catch(() => undefined);
    }, OUTPUT_POLL_MS);
    const shelter = await new webR.Shelter();
    try {
      let answer: unknown[];
      try {
        const captured = await shelter.captureR(code, {
          captureStreams: false,
          captureConditions: false,
          captureGraphics: false,
        });
        const result = await captured.result.toJs();
        answer = result.type === 'character' && 'values' in result ? result.values : [];
      } catch (error) {
        const refused = REFUSED_PATTERN.test(messageOf(error));
        if (!EXIT_PATTERN.test(messageOf(error)) && !refused) {
          throw error;
        }
        replace();
        return refused
          ? { status: 'failed', reason: 'r-error', message: messageOf(error).slice(0, 4096) }
          : {
              status: 'failed',
              reason: 'session-died',
              message: `R ended while it ran ${request.functionName} (${messageOf(error)})`,
            };
      }
      return parseAnswer(answer, request.functionName, maxBytes);
    } finally {
      clearInterval(outputTimer);
      await taking;
      await takeOutput().catch(() => undefined);
      await shelter.purge().catch(() => undefined);
    }
  }

  /**
   * Runs a script job on `webR`: its working directory copied into a fresh VFS directory, the
   * script sourced there through run-job.R, the directory copied back, bounded. `replace`
   * closes the instance and starts another, for a run that ended R.
   */
  async runScript(
    webR: WebR,
    request: ScriptRunRequest,
    state: RunState,
    replace: () => void,
  ): Promise<ScriptRunOutcome> {
    const { workDir, scriptName } = request;
    if (!(await stat(workDir)).isDirectory()) {
      throw new Error(`job ${request.jobId}: ${workDir} is not a directory`);
    }
    const vfsDir = `${JOBS_DIR}/run-${++this.runCount}`;
    const copiedIn = await copyIn(webR, workDir, vfsDir);

    // The run's trace for the script's own logging (put back after the run, see isolated).
    const traceVariables = Object.entries(traceEnvironment(request.trace ?? null)).map(
      ([name, value]) => `${name} = ${rString(value)}`,
    );
    // The script runs in the global environment with svc attached, as on native R, and leaves
    // little for the next run (see isolated).
    const code = isolated(`
      setwd(${rString(vfsDir)})
      ${traceVariables.length > 0 ? `Sys.setenv(${traceVariables.join(', ')})` : ''}
      ${this.attachSvc()}
      job <- eval(parse(text = ${rString(this.jobCode())}, keep.source = FALSE))
      failure <- job$run(${rString(scriptName)})
      if (is.null(failure)) character(0) else failure`);
    // R's output is not captured: it reaches webR's output queue line by line as R prints it,
    // and is taken from there while the script runs, so the job's log follows it live. It goes
    // to out.log as it comes (never held), each line cut at WEBR_LINE_MAX_CHARS, the file cut at
    // R_MAX_FILE_MB.
    const log = new OutputLog(
      await open(
        join(workDir, R_LOG_FILE),
        fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW,
        0o644,
      ),
      (this.config.rMaxFileMb ?? 0) * MIB,
    );
    const output = routeOutput(request);
    const takeOutput = async (): Promise<void> => {
      const lines: string[] = [];
      for (const { type, data } of await webR.flush()) {
        if (
          (type === 'stdout' || type === 'stderr') &&
          typeof data === 'string' &&
          !state.abandoned
        ) {
          const line =
            data.length > WEBR_LINE_MAX_CHARS
              ? `${data.slice(0, WEBR_LINE_MAX_CHARS)} [line of ${data.length} characters cut]`
              : data;
          lines.push(line);
          output?.(type, line);
        }
      }
      await log.write(lines);
    };
    await webR.flush(); // whatever an earlier evaluation left is not this job's
    let taking = Promise.resolve();
    const outputTimer = setInterval(() => {
      taking = taking.then(takeOutput).catch(() => undefined);
    }, OUTPUT_POLL_MS);
    let outcome: ScriptRunOutcome = { status: 'succeeded' };
    let recycle = false;
    const shelter = await new webR.Shelter();
    try {
      const captured = await shelter.captureR(code, {
        captureStreams: false,
        captureConditions: false,
        captureGraphics: false,
      });
      const result = await captured.result.toJs();
      if (result.type === 'character' && 'values' in result && result.values.length > 0) {
        const message = result.values[0];
        outcome = {
          status: 'failed',
          reason: 'r-error',
          message: typeof message === 'string' ? message.slice(0, 4096) : '',
        };
      }
    } catch (error) {
      // quit() inside the script ends R's main loop; the instance answers afterwards but is
      // not trusted with another job.
      const exit = EXIT_PATTERN.exec(messageOf(error));
      const refused = REFUSED_PATTERN.test(messageOf(error));
      if (!exit && !refused) {
        await log.close();
        throw error;
      }
      // Either way the instance is not trusted with another job (R stopped in mid-call).
      recycle = true;
      outcome = refused
        ? { status: 'failed', reason: 'r-error', message: messageOf(error).slice(0, 4096) }
        : exit?.[1] === '0'
          ? { status: 'succeeded' }
          : { status: 'failed', reason: 'exit', message: `R exited with status ${exit?.[1]}` };
    } finally {
      clearInterval(outputTimer);
      // The last lines were queued before the result: one more look takes them.
      await taking;
      await takeOutput().catch(() => undefined);
      await shelter.purge().catch(() => undefined);
    }
    await log.close();
    if (state.abandoned) {
      return outcome;
    }

    try {
      await copyBack(webR, vfsDir, workDir, copiedIn, state, this.config);
    } catch (error) {
      if (!(error instanceof ReadBackLimitError)) {
        throw error;
      }
      outcome = { status: 'failed', reason: 'limit', message: error.message };
    }
    if (state.abandoned) {
      return outcome;
    }
    // JavaScript's FS, not R's unlink: R's functions are the job's to redefine.
    await removeVfsTree(webR, vfsDir).catch(() => undefined);
    if (recycle) {
      replace();
    }
    return outcome;
  }
}
