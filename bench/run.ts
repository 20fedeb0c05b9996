/**
 * `npm run bench`: submission and end-to-end figures for one ROLE=all node (and ROLE=api beside
 * it) against the local PostgreSQL with native R, printed as tables and written as JSON to
 * bench/results/<timestamp>.json. What is measured and why: docs/performance.md.
 *
 * Options (npm run bench -- --runs 1 --duration 3): --runs, --duration, --warm-up,
 * --concurrency 1,16,64, --sequential, --batch, --rscript-runs, --slots, --poll-ms,
 * --probe-duration, --only submission,e2e,diagnostics,process,batch,sandbox,large,soap,fair,tables, --large-mib (also the
 * SOAP payload), --soap-shapes zip,files, --profile (diagnostics: the API node under load;
 * process: the node over the function-call jobs; batch: the node over each batch), --service <main.js of another
 * build> (to compare builds; default this checkout's dist/src/main.js), --fair-a-jobs 2000,
 * --fair-b-jobs 20, --fair-capped-jobs 40, --fair-job-ms 250 (the fair-share section),
 * --tables-finished 1000000, --tables-queued 100000, --tables-jobs 200 (the large-table section,
 * `--only tables`), --cli-rounds 10, --cli-compare <bin/svc.js of another build> (the command
 * line's section, `cli`).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BenchDatabase } from './bench-database';
import { ProbeResult, probeDatabase } from './database-probe';
import { bareRscriptTimes, EndToEndRun, endToEndRun, RSCRIPT } from './end-to-end.bench';
import { pdfJobZip, smallScriptZip } from './job-archives';
import { formatSpread, heading, table } from './report';
import { DEFAULT_MAIN, PROJECT_ROOT, ServiceNode } from './service-node';
import { optionInt, Spread, spread, round } from './stats';
import { BatchModeRun, batchModeRun, freshRscriptCeiling, warmSessionCpuMs } from './batch.bench';
import { SubmissionMeasurement, submissionRun } from './submission.bench';
import { CallMeasurement, processBench, ProcessServer } from './process.bench';
import { pairedSingleJobs, printSandbox, sandboxBench } from './sandbox.bench';
import { LargeJobRun, largeJobRun } from './large-job.bench';
import { SoapRoundTripRun, soapRoundTripRun, SoapShape } from './soap-roundtrip.bench';
import { fairShareRun } from './fair-share.bench';
import { largeTablesBench, printLargeTables } from './large-tables.bench';
import { cliBench, THIS_CLI } from './cli.bench';
import {
  countRoundTrips,
  printDiagnostics,
  Profile,
  profileApi,
  RoundTrips,
} from './diagnostics.bench';

const SECTIONS = [
  'submission',
  'e2e',
  'diagnostics',
  'process',
  'batch',
  'sandbox',
  'large',
  'soap',
  'fair',
  'tables',
  'cli',
] as const;
/**
 * Sections run when --only is not given: `large` and `soap` move 100s of MiB, `tables` fills
 * 1,100,000 jobs, so only on request.
 */
const DEFAULT_SECTIONS = SECTIONS.filter(
  (section) => section !== 'large' && section !== 'soap' && section !== 'tables',
);
type Section = (typeof SECTIONS)[number];

/** Hard upper bounds, so that no option can make the benchmark run for ever. */
const MAX_RUNS = 10;
const MAX_DURATION_S = 60;
const MAX_JOBS = 1000;

function parseOptions() {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '3' },
      duration: { type: 'string', default: '10' },
      'warm-up': { type: 'string', default: '2' },
      concurrency: { type: 'string', default: '1,16,64' },
      sequential: { type: 'string', default: '20' },
      batch: { type: 'string', default: '200' },
      'rscript-runs': { type: 'string', default: '10' },
      slots: { type: 'string', default: '2' },
      'poll-ms': { type: 'string', default: '10' },
      'probe-duration': { type: 'string', default: '5' },
      only: { type: 'string', default: DEFAULT_SECTIONS.join(',') },
      'large-mib': { type: 'string', default: '100' },
      'soap-shapes': { type: 'string', default: 'zip,files' },
      profile: { type: 'boolean', default: false },
      service: { type: 'string', default: DEFAULT_MAIN },
      'batch-jobs': { type: 'string', default: '500' },
      modes: { type: 'string', default: 'fork,spawn' },
      'fair-a-jobs': { type: 'string', default: '2000' },
      'fair-b-jobs': { type: 'string', default: '20' },
      'fair-capped-jobs': { type: 'string', default: '40' },
      'fair-job-ms': { type: 'string', default: '250' },
      'tables-finished': { type: 'string', default: '1000000' },
      'tables-queued': { type: 'string', default: '100000' },
      'tables-jobs': { type: 'string', default: '200' },
      'cli-rounds': { type: 'string', default: '10' },
      'cli-compare': { type: 'string' },
    },
    strict: true,
  });
  const int = optionInt;
  const only = values.only.split(',').map((s) => s.trim());
  for (const section of only) {
    if (!(SECTIONS as readonly string[]).includes(section)) {
      throw new Error(`--only takes ${SECTIONS.join(', ')}; not ${section}`);
    }
  }
  return {
    runs: int('runs', values.runs, 1, MAX_RUNS),
    durationS: int('duration', values.duration, 1, MAX_DURATION_S),
    warmUpS: int('warm-up', values['warm-up'], 1, MAX_DURATION_S),
    concurrencies: values.concurrency.split(',').map((c) => int('concurrency', c, 1, 1024)),
    sequentialJobs: int('sequential', values.sequential, 1, MAX_JOBS),
    batchJobs: int('batch', values.batch, 1, MAX_JOBS),
    rscriptRuns: int('rscript-runs', values['rscript-runs'], 1, 100),
    scriptSlots: int('slots', values.slots, 1, 64),
    pollIntervalMs: int('poll-ms', values['poll-ms'], 1, 1000),
    probeDurationS: int('probe-duration', values['probe-duration'], 1, MAX_DURATION_S),
    sections: new Set(only as Section[]),
    profile: values.profile,
    main: resolve(values.service),
    batchSectionJobs: int('batch-jobs', values['batch-jobs'], 1, MAX_JOBS),
    largeMiB: int('large-mib', values['large-mib'], 1, 1024),
    soapShapes: values['soap-shapes'].split(',').map((shape): SoapShape => {
      if (shape !== 'zip' && shape !== 'files') {
        throw new Error(`--soap-shapes takes zip and/or files, not ${shape}`);
      }
      return shape;
    }),
    fairAJobs: int('fair-a-jobs', values['fair-a-jobs'], 1, 10_000),
    fairBJobs: int('fair-b-jobs', values['fair-b-jobs'], 1, MAX_JOBS),
    fairCappedJobs: int('fair-capped-jobs', values['fair-capped-jobs'], 1, MAX_JOBS),
    fairJobMs: int('fair-job-ms', values['fair-job-ms'], 0, 10_000),
    tablesFinished: int('tables-finished', values['tables-finished'], 0, 10_000_000),
    tablesQueued: int('tables-queued', values['tables-queued'], 1, 1_000_000),
    tablesJobs: int('tables-jobs', values['tables-jobs'], 1, MAX_JOBS),
    cliRounds: int('cli-rounds', values['cli-rounds'], 1, 100),
    cliCompare: values['cli-compare'] === undefined ? null : resolve(values['cli-compare']),
    scriptModes: values.modes.split(',').map((mode) => {
      if (mode !== 'fork' && mode !== 'spawn') {
        throw new Error(`--modes takes fork and/or spawn, not ${mode}`);
      }
      return mode;
    }),
  };
}
type Options = ReturnType<typeof parseOptions>;

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function commandOutput(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', timeout: 30_000 }).trim();
  } catch {
    return 'unknown';
  }
}

async function machine(database: BenchDatabase) {
  const [pg] = await database.query<{ version: string }>('SELECT version()');
  const settings = await database.query<{ name: string; setting: string }>(
    "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'wal_sync_method', 'shared_buffers', 'max_connections')",
  );
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: round(totalmem() / 2 ** 30, 1),
    kernel: release(),
    node: process.version,
    r: commandOutput(RSCRIPT, ['-e', 'cat(R.version.string)']),
    postgres: pg.version,
    postgresSettings: Object.fromEntries(settings.map((s) => [s.name, s.setting])),
  };
}

// ---- submission ----

interface SubmissionSummary {
  role: 'all' | 'api';
  connections: number;
  acksPerSecond: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  non2xx: Spread;
  errors: Spread;
  serviceCpuPerAckMs: Spread;
  postgresCpuPerAckMs: Spread;
  loadGeneratorCpuPerAckMs: Spread;
  machineBusyPercent: Spread;
  otherCpuPercent: Spread;
  jobsRun: Spread;
}

function summariseSubmission(measurements: SubmissionMeasurement[]): SubmissionSummary[] {
  const summaries: SubmissionSummary[] = [];
  for (const role of ['all', 'api'] as const) {
    const connections = [
      ...new Set(measurements.filter((m) => m.role === role).map((m) => m.connections)),
    ];
    for (const c of connections) {
      const cell = measurements.filter((m) => m.role === role && m.connections === c);
      const of = (pick: (m: SubmissionMeasurement) => number): Spread => spread(cell.map(pick));
      summaries.push({
        role,
        connections: c,
        acksPerSecond: of((m) => m.acksPerSecond),
        p50Ms: of((m) => m.latencyMs.p50),
        p99Ms: of((m) => m.latencyMs.p99),
        non2xx: of((m) => m.non2xx),
        errors: of((m) => m.errors + m.timeouts),
        serviceCpuPerAckMs: of((m) => m.cpuPerAckMs.service),
        postgresCpuPerAckMs: of((m) => m.cpuPerAckMs.postgresBackends),
        loadGeneratorCpuPerAckMs: of((m) => m.cpuPerAckMs.loadGenerator),
        machineBusyPercent: of((m) => (100 * m.cpu.machineBusyMs) / m.cpu.machineTotalMs),
        otherCpuPercent: of((m) => (100 * m.cpu.otherMs) / m.cpu.machineTotalMs),
        jobsRun: of((m) => m.jobsFinished),
      });
    }
  }
  return summaries;
}

function printSubmission(summaries: SubmissionSummary[], options: Options): void {
  log(
    heading(
      `Submission: 1 KB ZIP jobs, ${options.durationS} s per cell, median [min-max] of ${options.runs} run(s)`,
    ),
  );
  log(
    table(
      ['node', 'conc', 'acks/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'R jobs run'],
      summaries.map((s) => [
        s.role === 'all' ? 'ROLE=all (target)' : 'ROLE=api (ack only)',
        String(s.connections),
        formatSpread(s.acksPerSecond, 0),
        formatSpread(s.p50Ms, 2),
        formatSpread(s.p99Ms, 2),
        formatSpread(s.non2xx, 0),
        formatSpread(s.errors, 0),
        s.role === 'all' ? formatSpread(s.jobsRun, 0) : '-',
      ]),
    ),
  );
  log('\nCPU per acknowledged job (ms) and machine load during the cell (medians):');
  log(
    table(
      ['node', 'conc', 'svc', 'postgres', 'autocannon', 'busy %', 'other %'],
      summaries.map((s) => [
        `ROLE=${s.role}`,
        String(s.connections),
        String(round(s.serviceCpuPerAckMs.median, 3)),
        String(round(s.postgresCpuPerAckMs.median, 3)),
        String(round(s.loadGeneratorCpuPerAckMs.median, 3)),
        String(round(s.machineBusyPercent.median, 0)),
        String(round(s.otherCpuPercent.median, 0)),
      ]),
    ),
  );
  const ackCpu = (role: 'all' | 'api'): string =>
    summaries
      .filter((s) => s.role === role)
      .map((s) => `${round(s.serviceCpuPerAckMs.median, 2)} ms at c=${s.connections}`)
      .join(', ');
  const apiCells = summaries.filter((s) => s.role === 'api');
  const met = apiCells.filter((s) => s.serviceCpuPerAckMs.median <= 0.5).map((s) => s.connections);
  const verdict =
    met.length === apiCells.length
      ? 'met'
      : met.length === 0
        ? 'not met'
        : `met at c=${met.join(', ')} only`;
  log(
    `\nTarget: svc CPU per acknowledged POST /jobs <= 0.5 ms on ROLE=api: ${ackCpu('api')} -> ${verdict}` +
      ` (ROLE=all beside it: ${ackCpu('all')})`,
  );
}

// ---- end to end ----

interface EndToEndSummary {
  bareRscriptMs: Spread;
  plotScriptMs: Spread;
  singleP50Ms: Spread;
  singleP99Ms: Spread;
  singleQueuedMs: Spread;
  singleRunMs: Spread;
  ratio: Spread;
  batchJobsPerSecond: Spread;
  batchP50Ms: Spread;
  batchP99Ms: Spread;
  batchRCpuPerJobMs: Spread;
  batchServiceCpuPerJobMs: Spread;
}

function medianOf(values: number[]): number {
  return spread(values).median;
}

function summariseEndToEnd(runs: EndToEndRun[]): EndToEndSummary {
  const of = (pick: (run: EndToEndRun) => number): Spread => spread(runs.map(pick));
  return {
    bareRscriptMs: of((r) => r.bareRscriptMedianMs),
    plotScriptMs: of((r) => r.plotScriptMedianMs),
    singleP50Ms: of((r) => r.sequentialObservedMs.p50),
    singleP99Ms: of((r) => r.sequentialObservedMs.p99),
    singleQueuedMs: of((r) => medianOf(r.sequential.map((j) => j.queuedMs))),
    singleRunMs: of((r) => medianOf(r.sequential.map((j) => j.runMs))),
    ratio: of((r) => r.ratio),
    batchJobsPerSecond: of((r) => r.batch.jobsPerSecond),
    batchP50Ms: of((r) => r.batch.latencyMs.p50),
    batchP99Ms: of((r) => r.batch.latencyMs.p99),
    batchRCpuPerJobMs: of((r) => r.batch.rCpuPerJobMs),
    batchServiceCpuPerJobMs: of((r) => r.batch.serviceCpuPerJobMs),
  };
}

function printEndToEnd(summary: EndToEndSummary, options: Options): void {
  log(
    heading(
      `End to end: PDF plot job, ROLE=all, ${options.scriptSlots} script slots, median [min-max] of ${options.runs} run(s)`,
    ),
  );
  log(
    table(
      ['figure', 'value'],
      [
        [
          `bare Rscript -e 'invisible(0)' (median of ${options.rscriptRuns}), ms`,
          formatSpread(summary.bareRscriptMs, 0),
        ],
        [
          `Rscript plot.R by hand, no svc (median of ${options.rscriptRuns}), ms`,
          formatSpread(summary.plotScriptMs, 0),
        ],
        [
          `one job at a time (${options.sequentialJobs} jobs): p50 submit->ready, ms`,
          formatSpread(summary.singleP50Ms, 0),
        ],
        ['  p99, ms', formatSpread(summary.singleP99Ms, 0)],
        ['  of which queued (submission -> claim), ms', formatSpread(summary.singleQueuedMs, 0)],
        ['  of which running (claim -> result stored), ms', formatSpread(summary.singleRunMs, 0)],
        ['ratio one job p50 / bare Rscript', formatSpread(summary.ratio, 2)],
        [
          `batch of ${options.batchJobs}: throughput, jobs/s`,
          formatSpread(summary.batchJobsPerSecond, 2),
        ],
        ['  p50 submit->ready, ms', formatSpread(summary.batchP50Ms, 0)],
        ['  p99 submit->ready, ms', formatSpread(summary.batchP99Ms, 0)],
        ['  R CPU per job, ms', formatSpread(summary.batchRCpuPerJobMs, 0)],
        ['  svc CPU per job, ms', formatSpread(summary.batchServiceCpuPerJobMs, 1)],
      ],
    ),
  );
}

// ---- function calls ----

/** Prints the /process table and the ratios to plumber; returns the ratios and targets. */
function printProcess(calls: CallMeasurement[]) {
  log(
    heading(
      'Function calls: JSON combn(5, 2), svc /process and an exported function vs plumber and RestRserve, one run',
    ),
  );
  log(
    table(
      ['server', 'conc', 'req/s', 'p50 ms', 'p99 ms', 'failures', 'server CPU/call ms'],
      calls.map((c) => [
        c.server,
        String(c.connections),
        String(round(c.requestsPerSecond, 0)),
        String(round(c.latencyMs.p50, 2)),
        String(round(c.latencyMs.p99, 2)),
        String(c.failures),
        String(round(c.serverCpuPerCallMs, 2)),
      ]),
    ),
  );
  const find = (server: string, connections: number) =>
    calls.find((c) => c.server === server && c.connections === connections);
  const svc16 = find('svc /process', 16);
  const svc1 = find('svc /process', 1);
  const plumberBest16 = Math.max(
    find('plumber keep-alive', 16)?.requestsPerSecond ?? 0,
    find('plumber Connection: close', 16)?.requestsPerSecond ?? 0,
  );
  const ratio16 = svc16 && plumberBest16 > 0 ? svc16.requestsPerSecond / plumberBest16 : NaN;
  const comparison = {
    ratioToBestPlumberAt16: ratio16,
    p50AtConcurrency1Ms: svc1?.latencyMs.p50 ?? NaN,
    met: ratio16 >= 3 && (svc1?.latencyMs.p50 ?? Infinity) < 5,
  };
  log(
    `\nTarget: >= 3x plumber's req/s at concurrency 16 (its better mode) and p50 < 5 ms at ` +
      `concurrency 1: ${round(ratio16, 1)}x, p50 ${round(comparison.p50AtConcurrency1Ms, 2)} ms -> ` +
      `${comparison.met ? 'met' : 'NOT met'}`,
  );
  // plumber at concurrency 1 is a warm R session's round trip over HTTP, in the same run.
  const warmRoundTrip = Math.min(
    find('plumber keep-alive', 1)?.latencyMs.p50 ?? Infinity,
    find('plumber Connection: close', 1)?.latencyMs.p50 ?? Infinity,
  );
  const overWarm = comparison.p50AtConcurrency1Ms - warmRoundTrip;
  log(
    `Target: p50 at concurrency 1 within 1 ms of a warm R session's round trip (plumber's p50, ` +
      `${round(warmRoundTrip, 2)} ms): ${overWarm >= 0 ? '+' : ''}${round(overWarm, 2)} ms -> ` +
      `${overWarm <= 1 ? 'met' : 'NOT met'}`,
  );
  // An exported function's call against /process's of the same R work, in the same run.
  // /process's req/s over another server's at each concurrency, in the same run.
  const processOver = (server: ProcessServer, concurrencies: number[]) =>
    concurrencies.map((connections) => {
      const direct = find('svc /process', connections);
      const other = find(server, connections);
      const ratio =
        direct && other && other.requestsPerSecond > 0
          ? direct.requestsPerSecond / other.requestsPerSecond
          : NaN;
      return { connections, ratio };
    });
  const functionCost = processOver('svc /functions', [1, 16]);
  const functionsMet = functionCost.every(({ ratio }) => ratio <= 1.2);
  log(
    `Target: an exported function's call costs <= 1.2x a /process call (req/s of /process over ` +
      `/functions): ${functionCost.map(({ connections, ratio }) => `${round(ratio, 2)}x at ${connections}`).join(', ')} -> ` +
      `${functionsMet ? 'met' : 'NOT met'}`,
  );
  // RestRserve at 1, 4 and 16 connections, the same R function in the same run.
  const restRserve = processOver('RestRserve keep-alive', [1, 4, 16]);
  const restRserveMet = restRserve.every(({ ratio }) => ratio >= 1.5);
  log(
    `Target: /process >= 1.5x RestRserve's req/s at concurrency 1, 4 and 16: ` +
      (restRserve.some(({ ratio }) => Number.isNaN(ratio))
        ? 'not measured (RestRserve not installed, or a concurrency left out)'
        : `${restRserve.map(({ connections, ratio }) => `${round(ratio, 2)}x at ${connections}`).join(', ')} -> ` +
          `${restRserveMet ? 'met' : 'NOT met'}`),
  );
  const jobP50 = find('svc function-call job', 1)?.latencyMs.p50 ?? NaN;
  const functionJobMet = jobP50 <= 5;
  log(
    `Target: a function-call job (POST /jobs -> result), p50 <= 5 ms at concurrency 1: ` +
      `${round(jobP50, 2)} ms -> ${functionJobMet ? 'met' : 'NOT met'}`,
  );
  return {
    ...comparison,
    functionCost,
    functionsMet,
    restRserve,
    restRserveMet,
    functionJobP50Ms: jobP50,
    functionJobMet,
  };
}

// ---- script-job batch ----

/** The script-job batch of every run, with what R alone does in the same run. */
interface BatchSection {
  ceilingJobsPerSecond: number[];
  /** R's CPU for plot.R on a warm session, per run. */
  warmSessionCpuMs: number[];
  /** A bare `Rscript -e 'invisible(0)'`, median wall time per run. */
  bareStartMs: number[];
  runs: BatchModeRun[];
}

function printBatch(batch: BatchSection, options: Options): void {
  const ceiling = spread(batch.ceilingJobsPerSecond);
  log(
    heading(
      `Script jobs: PDF plot, ROLE=all, ${options.scriptSlots} slots, median [min-max] of ${options.runs} run(s)`,
    ),
  );
  const rows: string[][] = [
    [
      `fresh Rscript plot.R by hand, ${options.scriptSlots} at a time (ceiling), jobs/s`,
      formatSpread(ceiling, 2),
    ],
  ];
  for (const mode of options.scriptModes) {
    const runs = batch.runs.filter((r) => r.mode === mode);
    const of = (pick: (r: BatchModeRun) => number): Spread => spread(runs.map(pick));
    const throughput = of((r) => r.jobsPerSecond);
    const rest = (role: string, when: 'memoryAtRest' | 'memoryAfterBatch'): Spread =>
      of((r) => r[when].filter((p) => p.role === role).reduce((sum, p) => sum + p.rssMiB, 0));
    rows.push(
      [
        `${mode}: one job at a time, p50 submit->ready, ms`,
        formatSpread(
          of((r) => r.singleObservedMs.p50),
          1,
        ),
      ],
      [
        `${mode}:   p99, ms`,
        formatSpread(
          of((r) => r.singleObservedMs.p99),
          1,
        ),
      ],
      [
        `${mode}: batch of ${runs[0]?.batchJobs ?? 0}: throughput, jobs/s`,
        formatSpread(throughput, 1),
      ],
      [
        `${mode}:   ratio to the fresh-Rscript ceiling`,
        formatSpread(
          spread(
            runs.map((r, i) => r.jobsPerSecond / (batch.ceilingJobsPerSecond[i] ?? Number.NaN)),
          ),
          1,
        ),
      ],
      [
        `${mode}:   p50 submit->result, ms`,
        formatSpread(
          of((r) => r.batchLatencyMs.p50),
          0,
        ),
      ],
      [
        `${mode}:   p99 submit->result, ms`,
        formatSpread(
          of((r) => r.batchLatencyMs.p99),
          0,
        ),
      ],
      [
        `${mode}:   R CPU per job, ms`,
        formatSpread(
          of((r) => r.rCpuPerJobMs),
          1,
        ),
      ],
      [
        `${mode}:   svc CPU per job, ms`,
        formatSpread(
          of((r) => r.serviceCpuPerJobMs),
          1,
        ),
      ],
      [
        `${mode}: RSS svc at rest / after, MiB`,
        `${formatSpread(rest('svc', 'memoryAtRest'), 0)} / ${formatSpread(rest('svc', 'memoryAfterBatch'), 0)}`,
      ],
    );
    rows.push([
      `${mode}:   R CPU per job / plot.R on a warm session`,
      formatSpread(spread(runs.map((r, i) => r.rCpuPerJobMs / batch.warmSessionCpuMs[i])), 1),
    ]);
    for (const role of ['fork server', 'fork server reader', 'R session']) {
      if (runs.some((r) => r.memoryAtRest.some((p) => p.role === role))) {
        rows.push([
          `${mode}: RSS ${role}(s) at rest / after, MiB`,
          `${formatSpread(rest(role, 'memoryAtRest'), 0)} / ${formatSpread(rest(role, 'memoryAfterBatch'), 0)}`,
        ]);
      }
    }
  }
  rows.splice(
    1,
    0,
    [
      'plot.R on a warm R session (R CPU per run), ms',
      formatSpread(spread(batch.warmSessionCpuMs), 1),
    ],
    [`bare Rscript -e 'invisible(0)', ms`, formatSpread(spread(batch.bareStartMs), 0)],
  );
  log(table(['figure', 'value'], rows));
  printLeanPathTargets(batch);
}

/**
 * The lean job path's targets for the fork server, each a ratio within one run (the same
 * machine state), then the median over the runs.
 */
function printLeanPathTargets(batch: BatchSection): void {
  const runs = batch.runs.filter((r) => r.mode === 'fork');
  if (runs.length === 0) {
    return;
  }
  const median = (values: number[]): number => medianOf(values);
  const svcCpu = median(runs.map((r) => r.serviceCpuPerJobMs));
  const svcCpuRatio = median(runs.map((r, i) => r.serviceCpuPerJobMs / batch.warmSessionCpuMs[i]));
  const rCpuRatio = median(runs.map((r, i) => r.rCpuPerJobMs / batch.warmSessionCpuMs[i]));
  const throughputRatio = median(
    runs.map((r, i) => r.jobsPerSecond / batch.ceilingJobsPerSecond[i]),
  );
  const oneJobShare = median(runs.map((r, i) => r.singleObservedMs.p50 / batch.bareStartMs[i]));
  const verdict = (met: boolean): string => (met ? 'met' : 'not met');
  log(
    table(
      ['target (fork mode, median of the runs)', 'measured', 'verdict'],
      [
        [
          'svc CPU per script job <= 2x the script on a warm session',
          `${round(svcCpu, 1)} ms, ${round(svcCpuRatio, 1)}x`,
          verdict(svcCpuRatio <= 2),
        ],
        [
          'R CPU of a forked job <= 3x the script on a warm session',
          `${round(rCpuRatio, 1)}x`,
          verdict(rCpuRatio <= 3),
        ],
        [
          'throughput >= 10x the fresh-Rscript ceiling',
          `${round(throughputRatio, 1)}x`,
          verdict(throughputRatio >= 10),
        ],
        [
          "one job's p50 <= 15 % of a bare Rscript start",
          `${round(oneJobShare * 100, 0)} %`,
          verdict(oneJobShare <= 0.15),
        ],
      ],
    ),
  );
}

// ---- main ----

async function main(): Promise<void> {
  const options = parseOptions();
  const startedAt = new Date();
  // Every node started, so that an interruption can kill it (kill() is a no-op once it exited).
  const nodes = new Set<ServiceNode>();
  const track = (node: ServiceNode | null): void => {
    if (node) {
      nodes.add(node);
    }
  };
  const database = await BenchDatabase.create();
  let interrupted = false;
  const interrupt = (signal: string): void => {
    if (interrupted) {
      return;
    }
    interrupted = true;
    log(`\n${signal}: stopping the node and dropping ${database.name}`);
    for (const node of nodes) {
      node.kill();
    }
    void database.drop().finally(() => process.exit(130));
  };
  process.once('SIGINT', () => interrupt('SIGINT'));
  process.once('SIGTERM', () => interrupt('SIGTERM'));

  try {
    const { zip: small, script: smallScript } = await smallScriptZip();
    const pdf = await pdfJobZip();
    const machineInfo = await machine(database);
    log(`svc benchmark, ${startedAt.toISOString()}, database ${database.name}`);
    log(
      `${machineInfo.cores} x ${machineInfo.cpu}, ${machineInfo.memoryGiB} GiB, Node ${machineInfo.node}, ` +
        `${machineInfo.r}, ${machineInfo.postgres.split(' on ')[0]}`,
    );
    const result: Record<string, unknown> = {
      startedAt: startedAt.toISOString(),
      commit: commandOutput('git', ['-C', PROJECT_ROOT, 'rev-parse', 'HEAD']),
      uncommittedSourceChanges:
        commandOutput('git', ['-C', PROJECT_ROOT, 'status', '--porcelain', 'src', 'migrations']) !==
        '',
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      options: { ...options, sections: [...options.sections] },
      machine: machineInfo,
    };

    let submissionSummary: SubmissionSummary[] = [];
    if (options.sections.has('submission')) {
      log(heading('Running: submission'));
      const measurements: SubmissionMeasurement[] = [];
      for (let run = 1; run <= options.runs; run += 1) {
        for (const role of ['all', 'api'] as const) {
          measurements.push(
            ...(await submissionRun(database, {
              role,
              run,
              concurrencies: options.concurrencies,
              durationS: options.durationS,
              warmUpS: options.warmUpS,
              scriptSlots: options.scriptSlots,
              main: options.main,
              zip: small,
              log,
              track,
            })),
          );
        }
      }
      submissionSummary = summariseSubmission(measurements);
      result.submission = { zipBytes: small.length, measurements, summary: submissionSummary };
    }

    let endToEndSummary: EndToEndSummary | null = null;
    if (options.sections.has('e2e')) {
      log(heading('Running: end to end'));
      const runs: EndToEndRun[] = [];
      for (let run = 1; run <= options.runs; run += 1) {
        runs.push(
          await endToEndRun(database, {
            run,
            sequentialJobs: options.sequentialJobs,
            batchJobs: options.batchJobs,
            rscriptRuns: options.rscriptRuns,
            scriptSlots: options.scriptSlots,
            main: options.main,
            pollIntervalMs: options.pollIntervalMs,
            zip: pdf,
            log,
            track,
          }),
        );
      }
      endToEndSummary = summariseEndToEnd(runs);
      result.endToEnd = { runs, summary: endToEndSummary };
    }

    let diagnostics: {
      roundTrips: RoundTrips;
      probes: ProbeResult[];
      profile: Profile | null;
    } | null = null;
    if (options.sections.has('diagnostics')) {
      log(heading('Running: diagnostics'));
      const roundTrips = await countRoundTrips(database, small, options.main, track);
      const probes: ProbeResult[] = [];
      for (const shape of ['transaction, 5 round trips', 'one statement'] as const) {
        for (const connections of [1, 10]) {
          probes.push(
            await probeDatabase(database, shape, connections, options.probeDurationS, smallScript),
          );
        }
      }
      const profile = options.profile
        ? await profileApi(
            database,
            small,
            {
              connections: Math.max(...options.concurrencies),
              warmUpS: options.warmUpS,
              durationS: options.durationS,
              main: options.main,
            },
            track,
          )
        : null;
      diagnostics = { roundTrips, probes, profile };
      result.diagnostics = diagnostics;
    }

    let batchRuns: BatchSection | null = null;
    if (options.sections.has('batch')) {
      log(heading('Running: script-job batch (fork server vs fresh process)'));
      batchRuns = { ceilingJobsPerSecond: [], warmSessionCpuMs: [], bareStartMs: [], runs: [] };
      for (let run = 1; run <= options.runs; run += 1) {
        const ceiling = await freshRscriptCeiling(
          Math.max(10, options.rscriptRuns * 2),
          options.scriptSlots,
        );
        batchRuns.ceilingJobsPerSecond.push(ceiling);
        log(
          `  run ${run}: fresh Rscript plot.R, ${options.scriptSlots} at a time: ${round(ceiling, 2)} jobs/s`,
        );
        const warmCpu = await warmSessionCpuMs(50);
        const bareStart = medianOf((await bareRscriptTimes(options.rscriptRuns)).startUpMs);
        batchRuns.warmSessionCpuMs.push(warmCpu);
        batchRuns.bareStartMs.push(bareStart);
        log(
          `  run ${run}: plot.R on a warm R session: ${round(warmCpu, 1)} ms of CPU; bare Rscript start: ${round(bareStart, 0)} ms`,
        );
        for (const mode of options.scriptModes) {
          batchRuns.runs.push(
            await batchModeRun(database, {
              mode,
              run,
              sequentialJobs: options.sequentialJobs,
              batchJobs:
                mode === 'spawn'
                  ? Math.min(options.batchSectionJobs, 100)
                  : options.batchSectionJobs,
              scriptSlots: options.scriptSlots,
              main: options.main,
              zip: pdf,
              profile: options.profile,
              log,
              track,
            }),
          );
        }
      }
      result.batch = batchRuns;
    }

    if (submissionSummary.length > 0) {
      printSubmission(submissionSummary, options);
    }
    if (batchRuns) {
      printBatch(batchRuns, options);
    }
    if (endToEndSummary) {
      printEndToEnd(endToEndSummary, options);
    }
    if (diagnostics) {
      printDiagnostics(
        diagnostics.roundTrips,
        diagnostics.probes,
        diagnostics.profile,
        options.probeDurationS,
        log,
      );
    }

    if (options.sections.has('process')) {
      log(heading('Running: function calls (/process vs plumber and RestRserve)'));
      const calls = await processBench(database, {
        concurrencies: [1, 4, 16],
        durationS: options.durationS,
        warmUpS: options.warmUpS,
        sessions: 2,
        main: options.main,
        profile: options.profile,
        log,
        track,
      });
      result.process = { calls, comparison: printProcess(calls) };
    }

    if (options.sections.has('tables')) {
      log(heading('Running: claim, intake and result fetch on empty and on large tables'));
      const tables = await largeTablesBench({
        finished: options.tablesFinished,
        queued: options.tablesQueued,
        applications: 100,
        jobs: options.tablesJobs,
        rounds: options.runs,
        log,
      });
      log(heading('Large tables: per-job cost of the hot statements, empty vs filled, one run'));
      result.tables = { ...tables, targets: printLargeTables(tables, log) };
    }

    if (options.sections.has('sandbox')) {
      log(heading('Running: the native sandbox on and off (R_SANDBOX=none vs bwrap)'));
      const runs = await sandboxBench(database, {
        runs: options.runs,
        sequentialJobs: options.sequentialJobs,
        batchJobs: options.batchSectionJobs,
        scriptSlots: options.scriptSlots,
        durationS: options.durationS,
        warmUpS: options.warmUpS,
        main: options.main,
        zip: pdf,
        log,
        track,
      });
      const paired = await pairedSingleJobs(database, {
        pairs: options.sequentialJobs * options.runs,
        scriptSlots: options.scriptSlots,
        main: options.main,
        zip: pdf,
        log,
        track,
      });
      result.sandbox = { runs, paired, comparison: printSandbox(runs, paired, log) };
    }

    if (options.sections.has('large')) {
      log(heading(`Running: a ${options.largeMiB} MiB job through one ROLE=all node (RSS)`));
      const runs: LargeJobRun[] = [];
      for (let run = 1; run <= options.runs; run += 1) {
        runs.push(
          await largeJobRun(database, {
            run,
            sizeMiB: options.largeMiB,
            main: options.main,
            log,
            track,
          }),
        );
        await database.empty();
      }
      const growth = spread(runs.map((r) => r.rssGrowthMiB));
      log(
        `\nRSS growth of the node during upload + R copy + download: ${formatSpread(growth, 1)} MiB ` +
          `(median [min-max] of ${runs.length}; target: at most 64 MiB)`,
      );
      result.large = { runs, rssGrowthMiB: growth };
    }

    if (options.sections.has('soap')) {
      log(
        heading(
          `Running: a ${options.largeMiB} MiB SOAP MTOM round trip through one ROLE=all node (RSS)`,
        ),
      );
      const runs: SoapRoundTripRun[] = [];
      for (let run = 1; run <= options.runs; run += 1) {
        for (const shape of options.soapShapes) {
          runs.push(
            await soapRoundTripRun(database, {
              run,
              sizeMiB: options.largeMiB,
              shape,
              main: options.main,
              log,
              track,
            }),
          );
          await database.empty();
        }
      }
      const summary = options.soapShapes.map((shape) => {
        const ofShape = runs.filter((r) => r.shape === shape);
        return {
          shape,
          hwmGrowthMiB: spread(ofShape.map((r) => r.hwmGrowthMiB)),
          sampledGrowthMiB: spread(ofShape.map((r) => r.sampledGrowthMiB)),
          seconds: spread(ofShape.map((r) => r.seconds)),
          intact: ofShape.every((r) => r.intact),
        };
      });
      for (const s of summary) {
        log(
          `\nSOAP ${s.shape}: RSS growth ${formatSpread(s.hwmGrowthMiB, 1)} MiB (VmHWM), ` +
            `${formatSpread(s.sampledGrowthMiB, 1)} MiB (sampled every 100 ms), ` +
            `${formatSpread(s.seconds, 2)} s (median [min-max] of ${s.hwmGrowthMiB.runs.length}; ` +
            `target: at most 64 MiB)${s.intact ? '' : ' ANSWER WRONG'}`,
        );
      }
      result.soap = { runs, summary };
    }

    if (options.sections.has('fair')) {
      log(
        heading(
          `Running: fair share (${options.fairAJobs} jobs of a queued, then ${options.fairBJobs} of b; two nodes with maxRunningJobs 1 for a)`,
        ),
      );
      const fair = await fairShareRun(database, {
        aJobs: options.fairAJobs,
        bJobs: options.fairBJobs,
        cappedJobs: options.fairCappedJobs,
        jobSeconds: options.fairJobMs / 1000,
        main: options.main,
        log,
        track,
      });
      log(
        table(
          ['figure', 'value'],
          [
            ["one job's run time (ms)", String(fair.runMs)],
            ["b's p50 wait on an idle node (ms)", String(fair.idleWaitP50Ms)],
            ["b's p50 wait behind a's backlog (ms)", String(fair.loadedWaitP50Ms)],
            ['bound: 2 x idle p50 + one run (ms)', String(fair.boundMs)],
            ["behind a: b's first start after its submission (ms)", String(fair.firstStartMs)],
            ["behind a: b's run time, p50 (ms)", String(fair.loadedRunMs)],
            ["behind a: time between two of b's starts (ms)", String(fair.loadedStartGapMs)],
            ["a's jobs/s before b", String(fair.aPerSecondBefore)],
            ["a's jobs/s while b runs", String(fair.aPerSecondDuring)],
            [
              "two nodes, maxRunningJobs 1: most of a's jobs running at once",
              `${fair.cappedMaxRunning} (${fair.cappedSamples} samples)`,
            ],
          ],
        ),
      );
      log(
        `b's p50 wait within the bound: ${fair.loadedWaitP50Ms <= fair.boundMs ? 'yes' : 'NO'}; ` +
          `cap held: ${fair.cappedMaxRunning <= 1 ? 'yes' : 'NO'}`,
      );
      result.fair = fair;
    }

    if (options.sections.has('cli')) {
      log(
        heading(`Running: the command line beside a running service (${options.cliRounds} rounds)`),
      );
      const cli = await cliBench({
        rounds: options.cliRounds,
        builds: [
          { build: 'this build', cli: THIS_CLI },
          ...(options.cliCompare ? [{ build: 'compared', cli: options.cliCompare }] : []),
        ],
        main: options.main,
        log,
        track,
      });
      log(
        table(
          ['command (embedded database, service running)', 'build', 'median ms', 'x node -e 0'],
          [
            ['node -e 0', '-', String(round(cli.nodeMedianMs, 0)), '1'],
            ...cli.cases.map((c) => [
              c.label,
              c.build,
              String(round(c.medianMs, 0)),
              String(c.ratio),
            ]),
          ],
        ),
      );
      result.cli = cli;
    }

    const target = submissionSummary.find((s) => s.role === 'all' && s.connections === 64);
    if (target) {
      const met = target.acksPerSecond.median >= 1000 && target.p99Ms.median < 50;
      result.target = {
        statement: '>= 1,000 jobs/s acknowledged at concurrency 64 with p99 < 50 ms (ROLE=all)',
        acksPerSecond: target.acksPerSecond.median,
        p99Ms: target.p99Ms.median,
        met,
      };
      log(
        `\nTarget: >= 1,000 acks/s at concurrency 64 with p99 < 50 ms on ROLE=all: ` +
          `${round(target.acksPerSecond.median, 0)} acks/s, p99 ${round(target.p99Ms.median, 1)} ms -> ` +
          `${met ? 'met' : 'NOT met'} (medians; this is a report, not an assertion)`,
      );
    }

    result.finishedAt = new Date().toISOString();
    const dir = join(PROJECT_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
    log(`\nRaw numbers: ${file}`);
  } finally {
    for (const node of nodes) {
      node.kill();
    }
    if (!interrupted) {
      await database.drop();
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
