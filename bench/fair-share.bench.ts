/**
 * The fair-share section of `npm run bench` (docs/performance.md, "Fair share"):
 * 1. one ROLE=all node with 2 script slots: application `a` queues `aJobs` jobs, then `b` submits
 *    `bJobs`; b's waits (submission to start) against the same jobs on the idle node, and a's
 *    throughput before and while b runs;
 * 2. two ROLE=all nodes with `maxRunningJobs: 1` for `a`: the job table sampled every 20 ms
 *    during the run, the most of a's jobs RUNNING at one instant.
 * Each job sleeps `jobSeconds` in R, so that the run time, not the service, sets the pace.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { makeZip } from '../test/support/zip-fixtures';
import { BenchDatabase } from './bench-database';
import { JOBS_PATH, rootAttributes } from './rest-client';
import { ServiceNode } from './service-node';
import { percentile, round } from './stats';

export interface FairShareOptions {
  aJobs: number;
  bJobs: number;
  /** Jobs of `a` in the capped run (two nodes). */
  cappedJobs: number;
  jobSeconds: number;
  main?: string;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
}

export interface FairShareRun {
  /** One job's run time on the idle node (median of b's idle run), ms. */
  runMs: number;
  idleWaitP50Ms: number;
  loadedWaitP50Ms: number;
  /** The bound: twice the idle p50 plus one run time. */
  boundMs: number;
  /** Behind a: from b's first submission to its first start (the wait for a slot to free), ms. */
  firstStartMs: number;
  /** Behind a: the median of b's run times, and the time between two of b's starts, ms. */
  loadedRunMs: number;
  loadedStartGapMs: number;

  /** a's jobs finished per second before b submitted, and while b's jobs ran. */
  aPerSecondBefore: number;
  aPerSecondDuring: number;
  /** Two nodes, maxRunningJobs 1 for a: the most of a's jobs RUNNING in any sample. */
  cappedMaxRunning: number;
  cappedSamples: number;
}

async function submit(baseUrl: string, application: string, zip: Buffer): Promise<string> {
  const response = await fetch(`${baseUrl}${JOBS_PATH}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/zip', 'X-SVC-Application-Name': application },
    body: zip,
  });
  const text = await response.text();
  if (response.status !== 202) {
    throw new Error(`submission to ${application} answered ${response.status}: ${text}`);
  }
  return rootAttributes(text, 'jobToken').jobId;
}

/** Submits `count` jobs, 16 at a time. */
async function submitMany(
  baseUrl: string,
  application: string,
  zip: Buffer,
  count: number,
): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        next += 1;
        ids.push(await submit(baseUrl, application, zip));
      }
    }),
  );
  return ids;
}

interface Timing {
  submitted: number;
  started: number | null;
  finished: number | null;
}

async function timings(database: BenchDatabase, ids: string[]): Promise<Timing[]> {
  const rows = await database.query<{
    submitted_at: Date;
    started_at: Date | null;
    finished_at: Date | null;
  }>('SELECT submitted_at, started_at, finished_at FROM job WHERE id = ANY($1::uuid[])', [ids]);
  return rows.map((row) => ({
    submitted: row.submitted_at.getTime(),
    started: row.started_at?.getTime() ?? null,
    finished: row.finished_at?.getTime() ?? null,
  }));
}

async function waitUntilDone(
  database: BenchDatabase,
  ids: string[],
  what: string,
): Promise<Timing[]> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const rows = await timings(database, ids);
    if (rows.length === ids.length && rows.every((row) => row.finished !== null)) {
      return rows;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} did not finish within 10 minutes`);
    }
    await sleep(100);
  }
}

async function finishedOf(
  database: BenchDatabase,
  application: string,
  from: number,
  to: number,
): Promise<number> {
  const rows = await database.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM job WHERE application_name = $1
        AND finished_at >= to_timestamp($2 / 1000.0) AND finished_at < to_timestamp($3 / 1000.0)`,
    [application, from, to],
  );
  return rows[0].n;
}

export async function fairShareRun(
  database: BenchDatabase,
  options: FairShareOptions,
): Promise<FairShareRun> {
  const zip = await makeZip([{ name: 'job.R', content: `Sys.sleep(${options.jobSeconds})\n` }]);
  const start = async (env: Record<string, string> = {}): Promise<ServiceNode> => {
    const node = await ServiceNode.start({
      role: 'all',
      databaseUrl: database.url,
      scriptSlots: 2,
      main: options.main,
      env: { POLL_INTERVAL_MS: '200', ...env },
    });
    options.track(node);
    return node;
  };

  // The idle node: b's jobs alone.
  let node = await start();
  const idle = await waitUntilDone(
    database,
    await submitMany(node.url, 'b', zip, options.bJobs),
    "b's jobs on the idle node",
  );
  const idleWaits = idle.map((t) => (t.started ?? 0) - t.submitted);
  const runMs = percentile(
    idle.map((t) => (t.finished ?? 0) - (t.started ?? 0)),
    50,
  );
  await database.empty();

  // a's backlog, then b.
  options.log(`  queueing ${options.aJobs} jobs of a`);
  await submitMany(node.url, 'a', zip, options.aJobs);
  // a's throughput alone is measured once the submissions no longer compete for the CPU.
  const aQueued = Date.now() + 1000;
  await sleep(6000);
  const bSubmitted = Date.now();
  const loaded = await waitUntilDone(
    database,
    await submitMany(node.url, 'b', zip, options.bJobs),
    "b's jobs behind a's backlog",
  );
  const bDone = Math.max(...loaded.map((t) => t.finished ?? 0));
  const loadedWaits = loaded.map((t) => (t.started ?? 0) - t.submitted);
  const loadedStarts = loaded.map((t) => t.started ?? 0).sort((x, y) => x - y);
  const firstSubmitted = Math.min(...loaded.map((t) => t.submitted));
  const firstStartMs = loadedStarts[0] - firstSubmitted;
  const loadedStartGapMs =
    (loadedStarts[loadedStarts.length - 1] - loadedStarts[0]) /
    Math.max(loadedStarts.length - 1, 1);
  const loadedRunMs = percentile(
    loaded.map((t) => (t.finished ?? 0) - (t.started ?? 0)),
    50,
  );
  const aPerSecondBefore =
    (await finishedOf(database, 'a', aQueued, bSubmitted)) / ((bSubmitted - aQueued) / 1000);
  const aPerSecondDuring =
    (await finishedOf(database, 'a', bSubmitted, bDone)) / ((bDone - bSubmitted) / 1000);
  await node.stop();
  await database.empty();

  // Two nodes, a capped at one running job.
  const capped = { APPLICATION_SETTINGS: JSON.stringify({ a: { maxRunningJobs: 1 } }) };
  node = await start(capped);
  const second = await start(capped);
  const ids = [
    ...(await submitMany(node.url, 'a', zip, options.cappedJobs)),
    ...(await submitMany(second.url, 'b', zip, options.bJobs)),
  ];
  let maxRunning = 0;
  let samples = 0;
  const deadline = Date.now() + 600_000;
  for (;;) {
    const [row] = await database.query<{ running: number; open: number }>(
      `SELECT count(*) FILTER (WHERE application_name = 'a' AND state = 'RUNNING')::int AS running,
              count(*) FILTER (WHERE state <> 'DONE')::int AS open
         FROM job WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    samples += 1;
    maxRunning = Math.max(maxRunning, row.running);
    if (row.open === 0 || Date.now() > deadline) {
      break;
    }
    await sleep(20);
  }
  await Promise.all([node.stop(), second.stop()]);
  await database.empty();

  const idleP50 = percentile(idleWaits, 50);
  return {
    runMs: round(runMs, 0),
    idleWaitP50Ms: round(idleP50, 0),
    loadedWaitP50Ms: round(percentile(loadedWaits, 50), 0),
    boundMs: round(2 * idleP50 + runMs, 0),
    firstStartMs: round(firstStartMs, 0),
    loadedRunMs: round(loadedRunMs, 0),
    loadedStartGapMs: round(loadedStartGapMs, 0),
    aPerSecondBefore: round(aPerSecondBefore, 2),
    aPerSecondDuring: round(aPerSecondDuring, 2),
    cappedMaxRunning: maxRunning,
    cappedSamples: samples,
  };
}
