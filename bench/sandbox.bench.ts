/**
 * The cost of the native sandbox: the same script-job batch (fork mode), one job at a time and
 * the /process call measured on a node with R_SANDBOX=none and on one with R_SANDBOX=bwrap, the
 * two settings alternating within each run so that a busy shared machine hits both alike.
 */
import { BenchDatabase } from './bench-database';
import { batchModeRun } from './batch.bench';
import { processBench } from './process.bench';
import { formatSpread, heading, table } from './report';
import { ServiceNode } from './service-node';
import { round, spread, Spread } from './stats';

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
      });
    }
  }
  return runs;
}

export interface SandboxComparison {
  throughputCost: number;
  throughputTargetMet: boolean;
  singleJobAddedMs: number;
  singleJobTargetMet: boolean;
  processAddedMs: number;
  processTargetMet: boolean;
}

/** Prints the on/off table with the ratios and the targets; returns the comparison. */
export function printSandbox(runs: SandboxRun[], log: (line: string) => void): SandboxComparison {
  const of = (setting: SandboxSetting, pick: (r: SandboxRun) => number): Spread =>
    spread(runs.filter((r) => r.setting === setting).map(pick));
  const off = {
    jobs: of('none', (r) => r.jobsPerSecond),
    single: of('none', (r) => r.singleJobP50Ms),
    call: of('none', (r) => r.processP50Ms),
  };
  const on = {
    jobs: of('bwrap', (r) => r.jobsPerSecond),
    single: of('bwrap', (r) => r.singleJobP50Ms),
    call: of('bwrap', (r) => r.processP50Ms),
  };
  const comparison: SandboxComparison = {
    throughputCost: 1 - on.jobs.median / off.jobs.median,
    throughputTargetMet: 1 - on.jobs.median / off.jobs.median <= MAX_THROUGHPUT_COST,
    singleJobAddedMs: on.single.median - off.single.median,
    singleJobTargetMet: on.single.median - off.single.median <= MAX_ADDED_MS,
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
          `${round(comparison.throughputCost * 100, 1)} %`,
          `<= ${MAX_THROUGHPUT_COST * 100} %`,
          met(comparison.throughputTargetMet),
        ],
        [
          'one job at a time: p50 submit->stored, ms',
          formatSpread(off.single, 1),
          formatSpread(on.single, 1),
          String(round(on.single.median / off.single.median, 3)),
          `${round(comparison.singleJobAddedMs, 1)} ms`,
          `<= ${MAX_ADDED_MS} ms`,
          met(comparison.singleJobTargetMet),
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
