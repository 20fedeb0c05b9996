/**
 * Submission: 1 KB ZIP jobs posted with autocannon at a fixed concurrency for a fixed time.
 * Counts acknowledgements (2xx) per second and their latency, and who used the CPU meanwhile.
 */
import autocannon from 'autocannon';
import { BenchDatabase } from './bench-database';
import { CpuBreakdown, cpuBetween, cpuSnapshot, loadAverage } from './cpu-usage';
import { JOBS_PATH, SUBMIT_HEADERS } from './rest-client';
import { ServiceNode } from './service-node';
import { Distribution, distribution, round } from './stats';

export interface LoadResult {
  connections: number;
  durationS: number;
  acknowledged: number;
  acksPerSecond: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** Latency of the 2xx answers, ms, from every response (sub-millisecond precision). */
  latencyMs: Distribution;
  /** autocannon's own figures (whole milliseconds), for comparison. */
  autocannonLatencyMs: { p50: number; p99: number };
}

export interface SubmissionMeasurement extends LoadResult {
  role: 'all' | 'api';
  run: number;
  /** Jobs the node's workers finished during the measurement (ROLE=all). */
  jobsFinished: number;
  loadAverage: number[];
  cpu: CpuBreakdown;
  /** CPU per acknowledged job, ms: what one acknowledgement costs each party. */
  cpuPerAckMs: { service: number; postgresBackends: number; loadGenerator: number; r: number };
}

/** One autocannon run against the node's job endpoint; resolves with its figures. */
export async function postLoad(
  baseUrl: string,
  zip: Buffer,
  connections: number,
  durationS: number,
): Promise<LoadResult> {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolveRun, reject) => {
    const instance = autocannon(
      {
        url: `${baseUrl}${JOBS_PATH}`,
        method: 'POST',
        headers: SUBMIT_HEADERS,
        body: zip,
        connections,
        duration: durationS,
        timeout: 10,
      },
      (error: unknown, finished: autocannon.Result) => {
        if (error) {
          reject(
            error instanceof Error
              ? error
              : new Error(`autocannon failed: ${JSON.stringify(error)}`),
          );
        } else {
          resolveRun(finished);
        }
      },
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) {
        latencies.push(responseTime);
      }
    });
  });
  return {
    connections,
    durationS: result.duration,
    acknowledged: result['2xx'],
    acksPerSecond: result['2xx'] / result.duration,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    latencyMs: distribution(latencies),
    autocannonLatencyMs: { p50: result.latency.p50, p99: result.latency.p99 },
  };
}

async function doneJobs(database: BenchDatabase): Promise<number> {
  const [row] = await database.query<{ n: string }>(
    "SELECT count(*) AS n FROM job WHERE state = 'DONE'",
  );
  return Number(row.n);
}

export interface SubmissionOptions {
  role: 'all' | 'api';
  run: number;
  concurrencies: number[];
  durationS: number;
  warmUpS: number;
  scriptSlots: number;
  /** The build to run; default this checkout's. */
  main?: string;
  zip: Buffer;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
}

/** One run: a fresh node on an empty queue, a warm-up, then each concurrency in turn. */
export async function submissionRun(
  database: BenchDatabase,
  options: SubmissionOptions,
): Promise<SubmissionMeasurement[]> {
  await database.empty();
  const node = await ServiceNode.start({
    role: options.role,
    databaseUrl: database.url,
    scriptSlots: options.scriptSlots,
    main: options.main,
  });
  options.track(node);
  const measurements: SubmissionMeasurement[] = [];
  try {
    // JIT, connection pool and HTTP keep-alive warm before anything is measured.
    await postLoad(node.url, options.zip, 16, options.warmUpS);
    for (const connections of options.concurrencies) {
      const finishedBefore = await doneJobs(database);
      const load = loadAverage();
      const before = cpuSnapshot(node.pid, await database.backendPids());
      const result = await postLoad(node.url, options.zip, connections, options.durationS);
      const after = cpuSnapshot(node.pid, await database.backendPids());
      const cpu = cpuBetween(before, after);
      const jobsFinished = (await doneJobs(database)) - finishedBefore;
      const perAck = (ms: number): number =>
        result.acknowledged === 0 ? Number.NaN : ms / result.acknowledged;
      const measurement: SubmissionMeasurement = {
        role: options.role,
        run: options.run,
        ...result,
        jobsFinished,
        loadAverage: load,
        cpu,
        cpuPerAckMs: {
          service: perAck(cpu.serviceMs),
          postgresBackends: perAck(cpu.postgresBackendsMs),
          loadGenerator: perAck(cpu.loadGeneratorMs),
          r: perAck(cpu.rMs),
        },
      };
      measurements.push(measurement);
      options.log(
        `  ROLE=${options.role} run ${options.run} c=${connections}: ` +
          `${round(result.acksPerSecond, 0)} acks/s, p50 ${round(result.latencyMs.p50, 2)} ms, ` +
          `p99 ${round(result.latencyMs.p99, 2)} ms, non-2xx ${result.non2xx}, errors ${result.errors}` +
          (options.role === 'all' ? `, ${jobsFinished} jobs run meanwhile` : ''),
      );
    }
  } finally {
    await node.stop();
    options.track(null);
  }
  return measurements;
}
