import { constants as osConstants, availableParallelism } from 'node:os';
import { bytesUnder, listOutputFiles } from '../job-tree/job-tree-listing';
import type { ForkRunStatus } from './fork-runs';
import type { RLimits } from '../launch/r-launcher';
import type { NativeRConfig } from '../launch/r-location';
import type { Exit } from '../launch/r-process';
import { REngineUnavailableError, type ScriptRunOutcome } from '../r-engine';

const MIB = 1024 * 1024;

/** A job's outcome as the run reported it, before limits are named. */
export interface RunReport {
  kind: 'ok' | 'r-error' | 'none';
  message: string;
  cpuMs?: number;
  /** Bytes R and what it waited for wrote to files (the kernel's write_bytes), where known. */
  writtenBytes?: number;
}

/** The limits a run is measured against, for the messages that name them. */
export interface JobLimits {
  timeoutMs: number;
  cpuSeconds: number;
  memoryMb: number;
  processes: number;
  fileMb: number;
  writeMb: number;
}

/** The limits of a run of `timeoutMs`: the CPU limit defaults to the time limit on every core. */
export function jobLimits(config: NativeRConfig, timeoutMs: number): JobLimits {
  const cpuSeconds =
    (config.rCpuLimitSeconds ?? 0) > 0
      ? (config.rCpuLimitSeconds as number)
      : Math.ceil(timeoutMs / 1000) * availableParallelism() + 5;
  return {
    timeoutMs,
    cpuSeconds,
    memoryMb: config.rMemoryLimitMb,
    processes: config.rMaxProcesses ?? 0,
    fileMb: config.rMaxFileMb ?? 0,
    writeMb: config.rMaxWriteMb ?? 0,
  };
}

/** The kernel limits the launcher sets on R's processes. */
export function rLimits(limits: JobLimits): RLimits {
  return {
    cpuSeconds: limits.cpuSeconds,
    memoryBytes: limits.memoryMb * MIB,
    processes: limits.processes,
    fileBytes: limits.fileMb * MIB,
  };
}

/** How often a running job's written bytes are measured (only jobs that run this long pay). */
const WRITE_CHECK_INTERVAL_MS = 500;

/**
 * Measures what a running job has written every WRITE_CHECK_INTERVAL_MS and calls `exceeded`
 * once it passes the limit (0: no limit). RLIMIT_FSIZE caps each file; this caps their sum. The
 * measure walks the job's directories through descriptors, never following what it finds.
 */
export function watchWrites(
  dirs: string[],
  limitMb: number,
  exceeded: () => void,
): { stop(): void } {
  if (limitMb <= 0) {
    return { stop: () => undefined };
  }
  let checking = false;
  const timer = setInterval(() => {
    if (checking) {
      return;
    }
    checking = true;
    void bytesUnder(dirs)
      .then((bytes) => {
        if (bytes > limitMb * MIB) {
          clearInterval(timer);
          exceeded();
        }
      })
      .catch(() => undefined)
      .finally(() => (checking = false));
  }, WRITE_CHECK_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

export function writeLimitOutcome(limits: JobLimits): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job exceeded its limit of ${limits.writeMb} MiB of bytes written (R_MAX_WRITE_MB)`,
  };
}

/** What the shell, R and parallel say when the kernel refuses a fork (RLIMIT_NPROC). */
const FORK_REFUSED =
  /\b(cannot|unable to) fork\b|fork: (retry: )?Resource temporarily unavailable/i;

/** What the engine learns from R's output lines as they pass (each bounded in length). */
export class OutputScan {
  forkRefused = false;

  line(text: string): void {
    if (!this.forkRefused && FORK_REFUSED.test(text)) {
      this.forkRefused = true;
    }
  }
}

function processLimitOutcome(limits: JobLimits, detail: string): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job reached its limit of ${limits.processes} processes and threads (R_MAX_PROCESSES)${detail ? `: ${detail}` : ''}`,
  };
}

export function cpuLimitOutcome(limits: JobLimits): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job exceeded its CPU time limit of ${limits.cpuSeconds} s (R_CPU_LIMIT_SECONDS)`,
  };
}

function fileLimitOutcome(limits: JobLimits): ScriptRunOutcome {
  return {
    status: 'failed',
    reason: 'limit',
    message: `the job exceeded its file size limit of ${limits.fileMb} MiB (R_MAX_FILE_MB)`,
  };
}

/**
 * Names the limit behind a failure where R's own words or the way R ended show it: bytes
 * written (the files the job left in its directories: bytes sent to /dev/null or printed are
 * not written), an allocation refused under the memory limit, the CPU limit (R's time limit
 * error), a fork refused under the process limit, a file at the size limit.
 */
export async function namedLimit(
  outcome: ScriptRunOutcome,
  limits: JobLimits,
  workDir: string,
  tmp: string,
  scan: OutputScan,
  writtenBytes: number | undefined,
): Promise<ScriptRunOutcome> {
  const usage = outcome.rCpuMs === undefined ? {} : { rCpuMs: outcome.rCpuMs };
  return { ...(await nameLimit(outcome, limits, workDir, tmp, scan, writtenBytes)), ...usage };
}

async function nameLimit(
  outcome: ScriptRunOutcome,
  limits: JobLimits,
  workDir: string,
  tmp: string,
  scan: OutputScan,
  writtenBytes: number | undefined,
): Promise<ScriptRunOutcome> {
  if (outcome.status === 'failed' && (outcome.reason === 'timeout' || outcome.reason === 'limit')) {
    return outcome;
  }
  // Files written and removed again within the watch's interval count too (write_bytes).
  if (limits.writeMb > 0 && (writtenBytes ?? 0) > limits.writeMb * MIB) {
    return writeLimitOutcome(limits);
  }
  if (
    limits.writeMb > 0 &&
    (await bytesUnder([workDir, tmp]).catch(() => 0)) > limits.writeMb * MIB
  ) {
    return writeLimitOutcome(limits);
  }
  // A fork refused under the process limit ends the job with that limit, even when the script
  // carried on: the shell and R report it in the output.
  if (limits.processes > 0 && scan.forkRefused) {
    return processLimitOutcome(limits, outcome.status === 'failed' ? outcome.message : '');
  }
  if (outcome.status !== 'failed') {
    return outcome;
  }
  const text = outcome.message;
  if (limits.memoryMb > 0 && /cannot allocate (vector|memory)|memory exhausted/i.test(text)) {
    return {
      status: 'failed',
      reason: 'limit',
      message: `the job exceeded its memory limit of ${limits.memoryMb} MiB (R_MEMORY_LIMIT_MB): ${text}`,
    };
  }
  if (/reached CPU time limit/i.test(text)) {
    return cpuLimitOutcome(limits);
  }
  if (limits.processes > 0 && FORK_REFUSED.test(text)) {
    return processLimitOutcome(limits, text);
  }
  if (limits.fileMb > 0 && (await hasFileAtLeast(workDir, limits.fileMb * MIB))) {
    return fileLimitOutcome(limits);
  }
  return outcome;
}

/** Whether the job left a file of at least `bytes` (read through descriptors, never followed). */
async function hasFileAtLeast(dir: string, bytes: number): Promise<boolean> {
  try {
    const tree = await listOutputFiles(dir, {
      exclude: new Set(),
      maxEntries: 100_000,
      maxDepth: 64,
      maxPathBytes: 4096,
    });
    try {
      return tree.files.some((file) => file.size >= bytes);
    } finally {
      await tree.close();
    }
  } catch {
    return false;
  }
}

/** The outcome of a forked run, in the same terms as a fresh process's. */
export function forkOutcome(status: ForkRunStatus, timeoutMs: number): ScriptRunOutcome {
  const usage = status.cpuMs === undefined ? {} : { rCpuMs: status.cpuMs };
  switch (status.kind) {
    case 'ok':
      return { status: 'succeeded', ...usage };
    case 'r-error':
      return { status: 'failed', reason: 'r-error', message: status.message, ...usage };
    case 'exit':
      return status.code === 0
        ? { status: 'succeeded', ...usage }
        : {
            status: 'failed',
            reason: 'exit',
            message: `R exited with status ${status.code}`,
            ...usage,
          };
    case 'died':
      return {
        status: 'failed',
        reason: 'exit',
        message: 'R was terminated by a signal (a resource limit, or R crashed)',
      };
    case 'killed':
      if (status.reason === 'timeout') {
        return {
          status: 'failed',
          reason: 'timeout',
          message: `the job exceeded its time limit of ${timeoutMs / 1000} s`,
        };
      }
      throw new REngineUnavailableError('the R engine was stopped while the job ran');
    case 'setup':
      throw new REngineUnavailableError(`R could not prepare the job: ${status.message}`);
  }
}

/** The outcome of a fresh R process from how it ended and what it reported. */
export function exitOutcome(
  signal: AbortSignal,
  exit: Exit,
  report: RunReport,
  limits: JobLimits,
): ScriptRunOutcome {
  const usage = report.cpuMs === undefined ? {} : { rCpuMs: report.cpuMs };
  if (signal.aborted && signal.reason === 'timeout') {
    return {
      status: 'failed',
      reason: 'timeout',
      message: `the job exceeded its time limit of ${limits.timeoutMs / 1000} s`,
    };
  }
  if (signal.aborted && signal.reason === 'write') {
    return writeLimitOutcome(limits);
  }
  if (signal.aborted) {
    throw new REngineUnavailableError('the R engine was stopped while the job ran');
  }
  if (report.kind === 'r-error') {
    return { status: 'failed', reason: 'r-error', message: report.message, ...usage };
  }
  if (exit.code === 0) {
    return { status: 'succeeded', ...usage };
  }
  // bubblewrap reports R's death by a signal as the status 128 + the signal's number.
  if (exit.signal === 'SIGXCPU' || exit.code === 128 + osConstants.signals.SIGXCPU) {
    return cpuLimitOutcome(limits);
  }
  if (exit.signal === 'SIGXFSZ' || exit.code === 128 + osConstants.signals.SIGXFSZ) {
    return fileLimitOutcome(limits);
  }
  return {
    status: 'failed',
    reason: 'exit',
    message:
      exit.signal !== null
        ? `R was terminated by signal ${exit.signal}`
        : `R exited with status ${String(exit.code)}`,
    ...usage,
  };
}
