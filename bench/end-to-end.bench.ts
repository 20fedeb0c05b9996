/**
 * End to end: the PDF job from submission to a ready result, one at a time and as a batch, beside
 * the bare start-up time of Rscript measured on the same machine in the same run.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchDatabase } from './bench-database';
import { CpuBreakdown, cpuBetween, cpuSnapshot, loadAverage } from './cpu-usage';
import { PDF_SCRIPT } from './job-archives';
import { fetchResult, fetchStatus, Submitted, submitZip } from './rest-client';
import { ServiceNode } from './service-node';
import { Distribution, distribution, median, round } from './stats';

export const RSCRIPT = '/usr/bin/Rscript';
const RSCRIPT_TIMEOUT_MS = 30_000;
/** Longest wait for one job of the sequential series. */
const JOB_TIMEOUT_MS = 120_000;
/** Longest wait for the whole batch. */
const BATCH_TIMEOUT_MS = 600_000;

/** Wall time of one `Rscript <args>` in `cwd`, ms. */
async function rscriptMs(args: string[], cwd: string): Promise<number> {
  const start = performance.now();
  const code = await new Promise<number | null>((resolveExit, reject) => {
    const child = spawn(RSCRIPT, args, { cwd, stdio: 'ignore', timeout: RSCRIPT_TIMEOUT_MS });
    child.once('error', reject);
    child.once('exit', (exitCode) => resolveExit(exitCode));
  });
  if (code !== 0) {
    throw new Error(`${RSCRIPT} ${args.join(' ')} exited with ${code}`);
  }
  return performance.now() - start;
}

/**
 * Wall times of `Rscript -e 'invisible(0)'` (R's start-up alone) and of `Rscript plot.R` (the
 * job's script run by hand, without svc), `count` each, interleaved so both see the same noise.
 */
export async function bareRscriptTimes(
  count: number,
): Promise<{ startUpMs: number[]; plotScriptMs: number[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-r-'));
  try {
    writeFileSync(join(dir, 'plot.R'), PDF_SCRIPT);
    const startUpMs: number[] = [];
    const plotScriptMs: number[] = [];
    for (let i = 0; i < count; i += 1) {
      startUpMs.push(await rscriptMs(['-e', 'invisible(0)'], dir));
      plotScriptMs.push(await rscriptMs(['plot.R'], dir));
    }
    return { startUpMs, plotScriptMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface ServerTimes {
  /** Server clock: submission → claim, claim → result stored. */
  queuedMs: number;
  runMs: number;
  /** Wall clock (Date.now()) when the result was stored. */
  finishedAt: number;
}

async function serverTimes(baseUrl: string, jobId: string): Promise<ServerTimes> {
  const status = await fetchStatus(baseUrl, jobId);
  if (status.state !== 'DONE') {
    throw new Error(`job ${jobId} is ${status.state}, expected DONE`);
  }
  const submitted = Date.parse(status.submissionTime);
  const started = Date.parse(status.startTime);
  const finished = Date.parse(status.finishTime);
  return { queuedMs: started - submitted, runMs: finished - started, finishedAt: finished };
}

/** Polls the result every `intervalMs` until it is ready; returns performance.now() then. */
async function waitReady(resultUri: string, intervalMs: number, deadline: number): Promise<number> {
  for (;;) {
    if (await fetchResult(resultUri)) {
      return performance.now();
    }
    if (performance.now() > deadline) {
      throw new Error(`${resultUri} was not ready in time`);
    }
    await sleep(intervalMs);
  }
}

export interface SequentialJob {
  /** Submission sent → result answered 200, polled every `pollIntervalMs`, ms. */
  observedMs: number;
  /** Submission sent → 202 received, ms. */
  ackMs: number;
  queuedMs: number;
  runMs: number;
}

export interface BatchResult {
  jobs: number;
  /** First submission sent → last result stored (server finishTime), s. */
  makespanS: number;
  jobsPerSecond: number;
  /** Same, with the end observed by the client's polling. */
  observedMakespanS: number;
  /** All 202s received, ms after the first submission. */
  allAcknowledgedMs: number;
  /** Per job: submission sent → result stored (server finishTime), ms. */
  latencyMs: Distribution;
  cpu: CpuBreakdown;
  rCpuPerJobMs: number;
  serviceCpuPerJobMs: number;
}

export interface EndToEndRun {
  run: number;
  loadAverage: number[];
  bareRscriptMs: number[];
  bareRscriptMedianMs: number;
  /** `Rscript plot.R` by hand: what R itself needs for the job's script. */
  plotScriptMs: number[];
  plotScriptMedianMs: number;
  sequential: SequentialJob[];
  sequentialObservedMs: Distribution;
  /** Median single-job latency / median bare Rscript start-up. */
  ratio: number;
  batch: BatchResult;
}

export interface EndToEndOptions {
  run: number;
  sequentialJobs: number;
  batchJobs: number;
  rscriptRuns: number;
  scriptSlots: number;
  /** The build to run; default this checkout's. */
  main?: string;
  pollIntervalMs: number;
  zip: Buffer;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
}

async function sequentialSeries(
  node: ServiceNode,
  options: EndToEndOptions,
): Promise<SequentialJob[]> {
  const jobs: SequentialJob[] = [];
  for (let i = 0; i < options.sequentialJobs; i += 1) {
    const submitted = await submitZip(node.url, options.zip);
    const ready = await waitReady(
      submitted.resultUri,
      options.pollIntervalMs,
      submitted.sentMark + JOB_TIMEOUT_MS,
    );
    const server = await serverTimes(node.url, submitted.jobId);
    jobs.push({
      observedMs: ready - submitted.sentMark,
      ackMs: submitted.ackMark - submitted.sentMark,
      queuedMs: server.queuedMs,
      runMs: server.runMs,
    });
  }
  return jobs;
}

async function batch(
  node: ServiceNode,
  database: BenchDatabase,
  options: EndToEndOptions,
): Promise<BatchResult> {
  const before = cpuSnapshot(node.pid, await database.backendPids());
  const firstSentMark = performance.now();
  const firstSentAt = Date.now();
  const submitted: Submitted[] = await Promise.all(
    Array.from({ length: options.batchJobs }, () => submitZip(node.url, options.zip)),
  );
  const allAcknowledgedMs = Math.max(...submitted.map((s) => s.ackMark)) - firstSentMark;
  // Workers take jobs oldest first: waiting on each in submission order asks about one job at a
  // time (a light load on the node) and ends when the last one is ready.
  const deadline = firstSentMark + BATCH_TIMEOUT_MS;
  let lastReady = firstSentMark;
  for (const job of [...submitted].sort((a, b) => a.sentMark - b.sentMark)) {
    lastReady = Math.max(
      lastReady,
      await waitReady(job.resultUri, 4 * options.pollIntervalMs, deadline),
    );
  }
  const after = cpuSnapshot(node.pid, await database.backendPids());
  const latencies: number[] = [];
  let lastFinishedAt = firstSentAt;
  for (const job of submitted) {
    const server = await serverTimes(node.url, job.jobId);
    latencies.push(server.finishedAt - job.sentAt);
    lastFinishedAt = Math.max(lastFinishedAt, server.finishedAt);
  }
  const cpu = cpuBetween(before, after);
  const makespanS = (lastFinishedAt - firstSentAt) / 1000;
  return {
    jobs: options.batchJobs,
    makespanS,
    jobsPerSecond: options.batchJobs / makespanS,
    observedMakespanS: (lastReady - firstSentMark) / 1000,
    allAcknowledgedMs,
    latencyMs: distribution(latencies),
    cpu,
    rCpuPerJobMs: cpu.rMs / options.batchJobs,
    serviceCpuPerJobMs: cpu.serviceMs / options.batchJobs,
  };
}

/** One run: a fresh ROLE=all node, bare Rscript timings, the sequential series, the batch. */
export async function endToEndRun(
  database: BenchDatabase,
  options: EndToEndOptions,
): Promise<EndToEndRun> {
  await database.empty();
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: database.url,
    scriptSlots: options.scriptSlots,
    main: options.main,
  });
  options.track(node);
  try {
    const load = loadAverage();
    // Warm-up: the first R start-up reads R from disk; neither figure should pay for that.
    for (let i = 0; i < 2; i += 1) {
      const warm = await submitZip(node.url, options.zip);
      await waitReady(warm.resultUri, options.pollIntervalMs, warm.sentMark + JOB_TIMEOUT_MS);
    }
    const bare = await bareRscriptTimes(options.rscriptRuns);
    const sequential = await sequentialSeries(node, options);
    const sequentialObservedMs = distribution(sequential.map((job) => job.observedMs));
    const bareMedian = median(bare.startUpMs);
    const ratio = median(sequential.map((job) => job.observedMs)) / bareMedian;
    options.log(
      `  run ${options.run}: bare Rscript ${round(bareMedian, 0)} ms, ` +
        `Rscript plot.R ${round(median(bare.plotScriptMs), 0)} ms, one job ${round(
          sequentialObservedMs.p50,
          0,
        )} ms (ratio ${round(ratio, 2)})`,
    );
    const batchResult = await batch(node, database, options);
    options.log(
      `  run ${options.run}: batch of ${batchResult.jobs}: ${round(batchResult.jobsPerSecond, 2)} jobs/s, ` +
        `p50 ${round(batchResult.latencyMs.p50 / 1000, 1)} s, p99 ${round(batchResult.latencyMs.p99 / 1000, 1)} s`,
    );
    return {
      run: options.run,
      loadAverage: load,
      bareRscriptMs: bare.startUpMs,
      bareRscriptMedianMs: bareMedian,
      plotScriptMs: bare.plotScriptMs,
      plotScriptMedianMs: median(bare.plotScriptMs),
      sequential,
      sequentialObservedMs,
      ratio,
      batch: batchResult,
    };
  } finally {
    await node.stop();
    options.track(null);
  }
}
