/**
 * Script jobs at full speed: the PDF-plot job in a batch (default 500) through /jobs on a ROLE=all
 * node in fork mode and in spawn mode, one job at a time on the idle node, the memory of the node
 * and of its R processes, and beside them the ceiling of a fresh Rscript per job measured by hand.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchDatabase } from './bench-database';
import { printProfileWindow, profileClockUs } from './cpu-profile';
import { cpuBetween, cpuSnapshot, loadAverage, processTimes } from './cpu-usage';
import { RSCRIPT } from './end-to-end.bench';
import { PDF_SCRIPT } from './job-archives';
import { fetchResult, fetchStatus, submitZip } from './rest-client';
import { ServiceNode } from './service-node';
import { Distribution, distribution } from './stats';

export type ScriptMode = 'fork' | 'spawn';
export const JOB_TIMEOUT_MS = 120_000;
const BATCH_TIMEOUT_MS = 900_000;
/**
 * The longest a result request waits for its result (the service's default maximum): the client
 * asks `GET …/results/{app}/{id}?wait=N`, as docs/clients.md recommends, instead of polling.
 * Polling every 2-100 ms cost the node 1.2-3 result requests per job, or kept an idle node busy.
 */
const RESULT_WAIT_S = 60;

/** Resident memory of one process, KiB (VmRSS), or NaN when it is gone. */
function rssKiB(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export interface ProcessMemory {
  pid: number;
  /** "svc", "fork server", "fork server reader", "R session", "R". */
  role: string;
  rssMiB: number;
}

/** The node and every R process below it, with their resident memory. */
export function memoryOf(nodePid: number): ProcessMemory[] {
  const table: Array<{ pid: number; ppid: number; cmdline: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) {
      continue;
    }
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      table.push({ pid: Number(entry), ppid, cmdline });
    } catch {
      // gone meanwhile
    }
  }
  const below = new Set([nodePid]);
  const found: ProcessMemory[] = [{ pid: nodePid, role: 'svc', rssMiB: rssKiB(nodePid) / 1024 }];
  for (let grew = true; grew;) {
    grew = false;
    for (const p of table) {
      if (below.has(p.ppid) && !below.has(p.pid)) {
        below.add(p.pid);
        grew = true;
        if (/\bR\b|Rscript|exec\/R/.test(p.cmdline)) {
          const parentIsServer = found.some((f) => f.pid === p.ppid && f.role === 'fork server');
          const role = p.cmdline.includes('fork-server.R')
            ? parentIsServer
              ? 'fork server reader'
              : 'fork server'
            : /session/.test(p.cmdline)
              ? 'R session'
              : 'R';
          found.push({ pid: p.pid, role, rssMiB: rssKiB(p.pid) / 1024 });
        }
      }
    }
  }
  return found;
}

/**
 * What a fresh Rscript per job can do on this machine: `Rscript plot.R` run by hand, `parallel`
 * at a time (the script slots), `count` runs in all; jobs per second.
 */
export async function freshRscriptCeiling(count: number, parallel: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-ceiling-'));
  try {
    writeFileSync(join(dir, 'plot.R'), PDF_SCRIPT);
    let next = 0;
    const started = performance.now();
    const lane = async (): Promise<void> => {
      while (next < count) {
        next += 1;
        await new Promise<void>((resolve, reject) => {
          const child = spawn(RSCRIPT, ['plot.R'], { cwd: dir, stdio: 'ignore' });
          child.once('error', reject);
          child.once('exit', (code) =>
            code === 0 ? resolve() : reject(new Error(`Rscript exited with ${code}`)),
          );
        });
      }
    };
    await Promise.all(Array.from({ length: parallel }, lane));
    return count / ((performance.now() - started) / 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * R's own CPU for the job's script on a warm session: one R process sources plot.R once untimed,
 * then `count` times, and reports its CPU (user + system, children excluded) per run, in ms.
 */
export async function warmSessionCpuMs(count: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-warm-'));
  try {
    writeFileSync(join(dir, 'plot.R'), PDF_SCRIPT);
    const code = [
      'source("plot.R", local = new.env())',
      'cpu <- function() sum(proc.time()[c(1L, 2L)])',
      'start <- cpu()',
      `for (i in seq_len(${count})) source("plot.R", local = new.env())`,
      `cat((cpu() - start) * 1000 / ${count})`,
    ].join('; ');
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(RSCRIPT, ['-e', code], { cwd: dir, stdio: ['ignore', 'pipe', 'ignore'] });
      let text = '';
      child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
      child.once('error', reject);
      child.once('exit', (code) =>
        code === 0 ? resolve(text) : reject(new Error(`Rscript exited with ${code}`)),
      );
    });
    return Number(output.trim());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Result requests the client sent; each costs the node about 1 ms of CPU. */
let resultRequests = 0;

/** Waits for the result with `?wait=N` requests; resolves when it was answered (performance.now). */
export async function waitReady(resultUri: string, deadline: number): Promise<number> {
  for (;;) {
    const leftS = Math.ceil((deadline - performance.now()) / 1000);
    if (leftS < 1) {
      throw new Error(`${resultUri} was not ready in time`);
    }
    resultRequests += 1;
    if (await fetchResult(`${resultUri}?wait=${Math.min(RESULT_WAIT_S, leftS)}`)) {
      return performance.now();
    }
  }
}

export async function finishedAt(baseUrl: string, jobId: string): Promise<number> {
  const status = await fetchStatus(baseUrl, jobId);
  if (status.state !== 'DONE') {
    throw new Error(`job ${jobId} is ${status.state}, expected DONE`);
  }
  return Date.parse(status.finishTime);
}

export interface BatchModeRun {
  mode: ScriptMode;
  run: number;
  /** One job at a time on the idle node: POST sent → result answered 200 (`?wait=N`). */
  singleObservedMs: Distribution;
  /** The same jobs, POST sent → result stored (server clock, same machine). */
  singleServerMs: Distribution;
  batchJobs: number;
  jobsPerSecond: number;
  /** Per job: POST sent → result stored. */
  batchLatencyMs: Distribution;
  allAcknowledgedMs: number;
  rCpuPerJobMs: number;
  serviceCpuPerJobMs: number;
  /** The node's PostgreSQL backends (its pool and LISTEN connection, the bench's own). */
  postgresCpuPerJobMs: number;
  /**
   * Share of the machine's CPU (all cores) used during the batch by everything else: other
   * users of a shared machine. High means the throughput says more about them than about svc.
   */
  otherCpuShare: number;
  /** 1-minute load average when the batch started. */
  loadAverageAtStart: number;
  /** Result requests the client sent per batch job while waiting (their cost is in svc CPU). */
  resultRequestsPerJob: number;
  memoryAtRest: ProcessMemory[];
  memoryAfterBatch: ProcessMemory[];
}

export interface BatchModeOptions {
  mode: ScriptMode;
  run: number;
  sequentialJobs: number;
  batchJobs: number;
  scriptSlots: number;
  main?: string;
  zip: Buffer;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
  /** More environment for the node (R_SANDBOX for the sandbox comparison). */
  env?: Record<string, string>;
  /** Profile the node's Node process (--cpu-prof) over the batch and print where its CPU went. */
  profile?: boolean;
}

/** One mode, one run: a fresh ROLE=all node, single jobs on the idle node, then the batch. */
export async function batchModeRun(
  database: BenchDatabase,
  options: BatchModeOptions,
): Promise<BatchModeRun> {
  await database.empty();
  const profileDir = options.profile ? mkdtempSync(join(tmpdir(), 'svc-bench-prof-')) : null;
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: database.url,
    scriptSlots: options.scriptSlots,
    main: options.main,
    env: { R_SCRIPT_MODE: options.mode, LOG_LEVEL: 'warn', ...options.env },
    execArgv: profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : undefined,
  });
  const batchWindowUs = { from: 0, to: 0 };
  options.track(node);
  try {
    for (let i = 0; i < 3; i += 1) {
      const warm = await submitZip(node.url, options.zip);
      await waitReady(warm.resultUri, warm.sentMark + JOB_TIMEOUT_MS);
    }
    await sleep(500);
    const memoryAtRest = memoryOf(node.pid);
    const observed: number[] = [];
    const server: number[] = [];
    for (let i = 0; i < options.sequentialJobs; i += 1) {
      const submitted = await submitZip(node.url, options.zip);
      const ready = await waitReady(submitted.resultUri, submitted.sentMark + JOB_TIMEOUT_MS);
      observed.push(ready - submitted.sentMark);
      server.push((await finishedAt(node.url, submitted.jobId)) - submitted.sentAt);
      await sleep(20);
    }
    // A forked job's CPU reaches the node's children time only when the fork server exits: count
    // the CPU of the node's living R processes (self and reaped children) beside it.
    const rProcesses = memoryOf(node.pid).filter((p) => p.role !== 'svc');
    const livingRMs = (): number =>
      rProcesses.reduce((sum, p) => {
        const times = processTimes(p.pid);
        return sum + (times ? times.selfMs + times.childrenMs : 0);
      }, 0);
    const livingBefore = livingRMs();
    const loadAverageAtStart = loadAverage()[0];
    const before = cpuSnapshot(node.pid, await database.backendPids());
    batchWindowUs.from = profileClockUs();
    const firstSentMark = performance.now();
    const firstSentAt = Date.now();
    const submitted = await Promise.all(
      Array.from({ length: options.batchJobs }, () => submitZip(node.url, options.zip)),
    );
    const allAcknowledgedMs = Math.max(...submitted.map((s) => s.ackMark)) - firstSentMark;
    const deadline = firstSentMark + BATCH_TIMEOUT_MS;
    // Each result in submission order, one waiting request at a time: the throughput comes from
    // the server's finish times, not from when the client saw them.
    const requestsBefore = resultRequests;
    for (const job of submitted) {
      await waitReady(job.resultUri, deadline);
    }
    const resultRequestsPerJob = (resultRequests - requestsBefore) / options.batchJobs;
    const after = cpuSnapshot(node.pid, await database.backendPids());
    batchWindowUs.to = profileClockUs();
    const livingAfter = livingRMs();
    const memoryAfterBatch = memoryOf(node.pid);
    const latencies: number[] = [];
    let lastFinishedAt = firstSentAt;
    for (const job of submitted) {
      const finished = await finishedAt(node.url, job.jobId);
      latencies.push(finished - job.sentAt);
      lastFinishedAt = Math.max(lastFinishedAt, finished);
    }
    const cpu = cpuBetween(before, after);
    const result: BatchModeRun = {
      mode: options.mode,
      run: options.run,
      singleObservedMs: distribution(observed),
      singleServerMs: distribution(server),
      batchJobs: options.batchJobs,
      jobsPerSecond: options.batchJobs / ((lastFinishedAt - firstSentAt) / 1000),
      batchLatencyMs: distribution(latencies),
      allAcknowledgedMs,
      rCpuPerJobMs: (cpu.rMs + livingAfter - livingBefore) / options.batchJobs,
      serviceCpuPerJobMs: cpu.serviceMs / options.batchJobs,
      postgresCpuPerJobMs: cpu.postgresBackendsMs / options.batchJobs,
      // cpu.otherMs holds the forked jobs' CPU too: their parent, the fork server, is alive.
      otherCpuShare: Math.max(0, cpu.otherMs - (livingAfter - livingBefore)) / cpu.machineTotalMs,
      loadAverageAtStart,
      resultRequestsPerJob,
      memoryAtRest,
      memoryAfterBatch,
    };
    options.log(
      `  ${options.mode} run ${options.run}: one job p50 ${result.singleObservedMs.p50.toFixed(1)} ms, ` +
        `batch of ${options.batchJobs}: ${result.jobsPerSecond.toFixed(1)} jobs/s, ` +
        `p50 ${result.batchLatencyMs.p50.toFixed(0)} ms, p99 ${result.batchLatencyMs.p99.toFixed(0)} ms; ` +
        `CPU per job: svc ${result.serviceCpuPerJobMs.toFixed(1)} ms, R ${result.rCpuPerJobMs.toFixed(1)} ms, ` +
        `PostgreSQL ${result.postgresCpuPerJobMs.toFixed(1)} ms; others used ${(100 * result.otherCpuShare).toFixed(0)} % ` +
        `of the CPU (load ${loadAverageAtStart.toFixed(1)} at the start); ` +
        `${resultRequestsPerJob.toFixed(1)} result requests per job`,
    );
    return result;
  } finally {
    await node.stop();
    options.track(null);
    if (profileDir) {
      printProfileWindow(
        profileDir,
        batchWindowUs,
        {
          units: options.batchJobs,
          unit: 'job',
          title: `a batch of ${options.batchJobs} script jobs (${options.mode})`,
        },
        options.log,
      );
      rmSync(profileDir, { recursive: true, force: true });
    }
  }
}
