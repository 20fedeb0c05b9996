/**
 * The cost of the native sandbox: the same script-job batch (fork mode), one job at a time and
 * the /process call measured on a node with R_SANDBOX=none and on one with R_SANDBOX=bwrap, the
 * two settings alternating within each run so that a busy shared machine hits both alike.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchDatabase } from './bench-database';
import { batchModeRun, finishedAt, JOB_TIMEOUT_MS, waitReady } from './batch.bench';
import { processBench } from './process.bench';
import { formatSpread, heading, table } from './report';
import { submitZip } from './rest-client';
import { ServiceNode } from './service-node';
import { Distribution, distribution, median, percentile, round, spread, Spread } from './stats';

export const SANDBOX_SETTINGS = ['none', 'bwrap'] as const;
export type SandboxSetting = (typeof SANDBOX_SETTINGS)[number];

/** The targets: at most 10 % of throughput and at most 5 ms per job (and per call). */
export const MAX_THROUGHPUT_COST = 0.1;
export const MAX_ADDED_MS = 5;

export interface SandboxRun {
  setting: SandboxSetting;
  run: number;
  batchJobs: number;
  jobsPerSecond: number;
  /** One job at a time on the idle node, POST sent → result stored, p50. */
  singleJobP50Ms: number;
  /** /process, one connection, p50. */
  processP50Ms: number;
  /** CPU per job of the batch: svc, R and PostgreSQL together (robust to a busy machine). */
  cpuPerJobMs: number;
}

export interface SandboxBenchOptions {
  runs: number;
  sequentialJobs: number;
  batchJobs: number;
  scriptSlots: number;
  durationS: number;
  warmUpS: number;
  main?: string;
  zip: Buffer;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
}

export async function sandboxBench(
  database: BenchDatabase,
  options: SandboxBenchOptions,
): Promise<SandboxRun[]> {
  const runs: SandboxRun[] = [];
  for (let run = 1; run <= options.runs; run += 1) {
    for (const setting of SANDBOX_SETTINGS) {
      const env = { R_SANDBOX: setting };
      options.log(`  run ${run}, R_SANDBOX=${setting}`);
      const batch = await batchModeRun(database, {
        mode: 'fork',
        run,
        sequentialJobs: options.sequentialJobs,
        batchJobs: options.batchJobs,
        scriptSlots: options.scriptSlots,
        main: options.main,
        zip: options.zip,
        log: options.log,
        track: options.track,
        env,
      });
      const [call] = await processBench(database, {
        concurrencies: [1],
        durationS: options.durationS,
        warmUpS: options.warmUpS,
        sessions: 2,
        main: options.main,
        log: options.log,
        track: options.track,
        env,
        withPlumber: false,
      });
      runs.push({
        setting,
        run,
        batchJobs: batch.batchJobs,
        jobsPerSecond: batch.jobsPerSecond,
        singleJobP50Ms: batch.singleServerMs.p50,
        processP50Ms: call.latencyMs.p50,
        cpuPerJobMs: batch.serviceCpuPerJobMs + batch.rCpuPerJobMs + batch.postgresCpuPerJobMs,
      });
    }
  }
  return runs;
}

/**
 * One job at a time, paired: a node with R_SANDBOX=none and one with bwrap, each on a database of
 * its own and both idle, take turns (none, bwrap, then bwrap, none, …), so that whatever else the
 * machine does in a moment hits both jobs of a pair alike. The cost is the median of the pairs'
 * differences; medians of separate runs of 30 jobs moved by 10-20 ms from run to run.
 */
export interface PairedSingleJobs {
  pairs: number;
  /** Submit sent -> result stored (the node's finish time), per setting. */
  noneMs: Distribution;
  bwrapMs: Distribution;
  /** Median, 25th and 75th percentile of (bwrap - none) over the pairs. */
  addedMs: number;
  addedP25Ms: number;
  addedP75Ms: number;
}

export interface PairedSingleJobsOptions {
  pairs: number;
  scriptSlots: number;
  main?: string;
  zip: Buffer;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
}

export async function pairedSingleJobs(
  database: BenchDatabase,
  options: PairedSingleJobsOptions,
): Promise<PairedSingleJobs> {
  const second = await BenchDatabase.create('_b');
  const nodes: Partial<Record<SandboxSetting, ServiceNode>> = {};
  try {
    await database.empty();
    for (const setting of SANDBOX_SETTINGS) {
      const node = await ServiceNode.start({
        role: 'all',
        databaseUrl: setting === 'none' ? database.url : second.url,
        scriptSlots: options.scriptSlots,
        main: options.main,
        env: { R_SCRIPT_MODE: 'fork', LOG_LEVEL: 'warn', R_SANDBOX: setting },
      });
      nodes[setting] = node;
      options.track(node);
    }
    const oneJob = async (setting: SandboxSetting): Promise<number> => {
      const node = nodes[setting] as ServiceNode;
      const submitted = await submitZip(node.url, options.zip);
      await waitReady(submitted.resultUri, submitted.sentMark + JOB_TIMEOUT_MS);
      const finished = await finishedAt(node.url, submitted.jobId);
      await sleep(20);
      return finished - submitted.sentAt;
    };
    for (let i = 0; i < 3; i += 1) {
      await oneJob('none');
      await oneJob('bwrap');
    }
    const none: number[] = [];
    const bwrap: number[] = [];
    for (let pair = 0; pair < options.pairs; pair += 1) {
      // Alternating which goes first keeps any first-or-second effect out of the difference.
      if (pair % 2 === 0) {
        none.push(await oneJob('none'));
        bwrap.push(await oneJob('bwrap'));
      } else {
        bwrap.push(await oneJob('bwrap'));
        none.push(await oneJob('none'));
      }
    }
    const added = none.map((ms, i) => bwrap[i] - ms);
    const result: PairedSingleJobs = {
      pairs: options.pairs,
      noneMs: distribution(none),
      bwrapMs: distribution(bwrap),
      addedMs: median(added),
      addedP25Ms: percentile(added, 25),
      addedP75Ms: percentile(added, 75),
    };
    options.log(
      `  paired, ${options.pairs} pairs: one job p50 none ${result.noneMs.p50.toFixed(1)} ms, ` +
        `bwrap ${result.bwrapMs.p50.toFixed(1)} ms; bwrap - none per pair: median ` +
        `${result.addedMs.toFixed(1)} ms (p25 ${result.addedP25Ms.toFixed(1)}, p75 ${result.addedP75Ms.toFixed(1)})`,
    );
    return result;
  } finally {
    await Promise.all(Object.values(nodes).map((node) => node.stop()));
    options.track(null);
    await second.drop();
  }
}

export interface SandboxComparison {
  /** Median over the runs of each run's cost (its bwrap batch against its none batch). */
  throughputCost: number;
  /** Each run's throughput cost, in run order. */
  throughputCostPerRun: number[];
  /** The cost as the ratio of the two settings' medians (drift between runs weighs in). */
  throughputCostOfMedians: number;
  throughputTargetMet: boolean;
  singleJobAddedMs: number;
  singleJobTargetMet: boolean;
  processAddedMs: number;
  processTargetMet: boolean;
}

/** Prints the on/off table with the ratios and the targets; returns the comparison. */
export function printSandbox(
  runs: SandboxRun[],
  paired: PairedSingleJobs,
  log: (line: string) => void,
): SandboxComparison {
  const of = (setting: SandboxSetting, pick: (r: SandboxRun) => number): Spread =>
    spread(runs.filter((r) => r.setting === setting).map(pick));
  const off = {
    jobs: of('none', (r) => r.jobsPerSecond),
    single: of('none', (r) => r.singleJobP50Ms),
    call: of('none', (r) => r.processP50Ms),
    cpu: of('none', (r) => r.cpuPerJobMs),
  };
  const on = {
    jobs: of('bwrap', (r) => r.jobsPerSecond),
    single: of('bwrap', (r) => r.singleJobP50Ms),
    call: of('bwrap', (r) => r.processP50Ms),
    cpu: of('bwrap', (r) => r.cpuPerJobMs),
  };
  // The two settings run back to back within a run: a run's pair sees the same machine, while
  // the level moves between runs (here by up to 30 %), so the cost is taken per run.
  const perRun = (pick: (r: SandboxRun) => number, cost: (none: number, bwrap: number) => number) =>
    [...new Set(runs.map((r) => r.run))].flatMap((run) => {
      const none = runs.find((r) => r.run === run && r.setting === 'none');
      const bwrap = runs.find((r) => r.run === run && r.setting === 'bwrap');
      return none && bwrap ? [cost(pick(none), pick(bwrap))] : [];
    });
  const throughputCostPerRun = perRun(
    (r) => r.jobsPerSecond,
    (none, bwrap) => 1 - bwrap / none,
  );
  const cpuCostPerRun = perRun(
    (r) => r.cpuPerJobMs,
    (none, bwrap) => 1 - none / bwrap,
  );
  const throughputCost = median(throughputCostPerRun);
  const comparison: SandboxComparison = {
    throughputCost,
    throughputCostPerRun,
    throughputCostOfMedians: 1 - on.jobs.median / off.jobs.median,
    throughputTargetMet: throughputCost <= MAX_THROUGHPUT_COST,
    singleJobAddedMs: paired.addedMs,
    singleJobTargetMet: paired.addedMs <= MAX_ADDED_MS,
    processAddedMs: on.call.median - off.call.median,
    processTargetMet: on.call.median - off.call.median <= MAX_ADDED_MS,
  };
  const met = (ok: boolean): string => (ok ? 'met' : 'NOT met');
  log(heading('The native sandbox: R_SANDBOX=none vs bwrap (fork mode, PDF-plot job)'));
  log(
    table(
      ['', 'none', 'bwrap', 'bwrap/none', 'cost', 'target', ''],
      [
        [
          `batch of ${runs[0]?.batchJobs ?? 0}: throughput, jobs/s`,
          formatSpread(off.jobs, 2),
          formatSpread(on.jobs, 2),
          String(round(on.jobs.median / off.jobs.median, 3)),
          `${round(throughputCost * 100, 1)} % (per run ${throughputCostPerRun.map((c) => round(c * 100, 1)).join(', ')}; of the medians ${round(comparison.throughputCostOfMedians * 100, 1)} %)`,
          `<= ${MAX_THROUGHPUT_COST * 100} %`,
          met(comparison.throughputTargetMet),
        ],
        [
          'batch: CPU per job, svc + R + PostgreSQL, ms (cost when CPU-bound)',
          formatSpread(off.cpu, 1),
          formatSpread(on.cpu, 1),
          String(round(on.cpu.median / off.cpu.median, 3)),
          `${round(median(cpuCostPerRun) * 100, 1)} % (per run ${cpuCostPerRun.map((c) => round(c * 100, 1)).join(', ')})`,
          '',
          '',
        ],
        [
          `one job at a time, ${paired.pairs} pairs: p50 submit->stored, ms`,
          String(round(paired.noneMs.p50, 1)),
          String(round(paired.bwrapMs.p50, 1)),
          String(round(paired.bwrapMs.p50 / paired.noneMs.p50, 3)),
          `${round(comparison.singleJobAddedMs, 1)} ms (p25 ${round(paired.addedP25Ms, 1)}, p75 ${round(paired.addedP75Ms, 1)})`,
          `<= ${MAX_ADDED_MS} ms`,
          met(comparison.singleJobTargetMet),
        ],
        [
          'one job at a time, separate runs: p50, ms (spread only)',
          formatSpread(off.single, 1),
          formatSpread(on.single, 1),
          String(round(on.single.median / off.single.median, 3)),
          `${round(on.single.median - off.single.median, 1)} ms`,
          '',
          '',
        ],
        [
          '/process combn(5, 2), 1 connection: p50, ms',
          formatSpread(off.call, 2),
          formatSpread(on.call, 2),
          String(round(on.call.median / off.call.median, 3)),
          `${round(comparison.processAddedMs, 2)} ms`,
          `<= ${MAX_ADDED_MS} ms`,
          met(comparison.processTargetMet),
        ],
      ],
    ),
  );
  return comparison;
}
