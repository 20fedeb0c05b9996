/**
 * Function calls: `POST /process` with the demo's JSON call `combn(5, 2)` at a fixed concurrency,
 * beside a plumber API (Debian's r-cran-plumber) serving the same R function from the same files.
 * plumber is measured twice: with keep-alive (as clients use it) and with `Connection: close`,
 * because its keep-alive answers can wait about 40 ms on Nagle's algorithm and delayed ACKs.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { BenchDatabase } from './bench-database';
import { PROJECT_ROOT, ServiceNode } from './service-node';
import { Distribution, distribution } from './stats';

export const COMBN_CALL = '{"RFunction":"combn","n":5,"k":2}';
const FUNCTIONS_DIR = join(PROJECT_ROOT, 'catalog', 'demo', 'R_FUNCTIONS');
const PLUMBER_START_TIMEOUT_MS = 60_000;

export type ProcessServer = 'svc /process' | 'plumber keep-alive' | 'plumber Connection: close';

export interface CallMeasurement {
  server: ProcessServer;
  connections: number;
  durationS: number;
  requestsPerSecond: number;
  /** Answers that were not 200, and connection errors or timeouts. */
  failures: number;
  latencyMs: Distribution;
}

export interface ProcessBenchOptions {
  concurrencies: number[];
  durationS: number;
  warmUpS: number;
  /** Warm R sessions of the svc node. */
  sessions: number;
  main?: string;
  log: (line: string) => void;
  track: (node: ServiceNode | null) => void;
}

/** One autocannon run of the JSON call; only 200 answers with the expected body count. */
async function callLoad(
  server: ProcessServer,
  url: string,
  headers: Record<string, string>,
  connections: number,
  durationS: number,
): Promise<CallMeasurement> {
  const latencies: number[] = [];
  let failures = 0;
  const result = await new Promise<autocannon.Result>((resolveRun, reject) => {
    const instance = autocannon(
      {
        url,
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: COMBN_CALL,
        connections,
        duration: durationS,
        timeout: 10,
      },
      (error: unknown, finished: autocannon.Result) =>
        error
          ? reject(
              error instanceof Error
                ? error
                : new Error(`autocannon failed: ${JSON.stringify(error)}`),
            )
          : resolveRun(finished),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode === 200) {
        latencies.push(responseTime);
      } else {
        failures += 1;
      }
    });
  });
  return {
    server,
    connections,
    durationS: result.duration,
    requestsPerSecond: latencies.length / result.duration,
    failures: failures + result.errors + result.timeouts,
    latencyMs: distribution(latencies),
  };
}

/** Checks that a server answers the call with the 10 combinations before it is measured. */
async function checkAnswer(url: string, headers: Record<string, string>): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: COMBN_CALL,
  });
  const text = await response.text();
  const answer = JSON.parse(text) as { combinations?: unknown[] };
  if (response.status !== 200 || answer.combinations?.length !== 10) {
    throw new Error(`${url} answered ${response.status}: ${text.slice(0, 300)}`);
  }
}

async function measureAll(
  server: ProcessServer,
  url: string,
  headers: Record<string, string>,
  options: ProcessBenchOptions,
): Promise<CallMeasurement[]> {
  await checkAnswer(url, headers);
  await callLoad(server, url, headers, Math.max(...options.concurrencies), options.warmUpS);
  const measurements: CallMeasurement[] = [];
  for (const connections of options.concurrencies) {
    const measurement = await callLoad(server, url, headers, connections, options.durationS);
    options.log(
      `${server}, ${connections} connection(s): ${measurement.requestsPerSecond.toFixed(0)} req/s, ` +
        `p50 ${measurement.latencyMs.p50.toFixed(2)} ms, p99 ${measurement.latencyMs.p99.toFixed(2)} ms`,
    );
    measurements.push(measurement);
  }
  return measurements;
}

/** The demo application's function library, put straight into the (empty) catalog table. */
async function loadDemoFunctions(database: BenchDatabase): Promise<void> {
  for (const name of readdirSync(FUNCTIONS_DIR)) {
    await database.query(
      `INSERT INTO catalog_file (application_name, section, name, content, updated_at)
       VALUES ('demo', 'R_FUNCTIONS', $1, $2, now())
       ON CONFLICT (application_name, section, name) DO UPDATE SET content = EXCLUDED.content`,
      [name, readFileSync(join(FUNCTIONS_DIR, name))],
    );
  }
}

async function freeLoopbackPort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

/** A plumber API on a loopback port that sources the demo's R_FUNCTIONS and serves svcJsonService. */
async function startPlumber(): Promise<{ url: string; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-plumber-'));
  const api = join(dir, 'api.R');
  writeFileSync(
    api,
    [
      `for (f in list.files(${JSON.stringify(FUNCTIONS_DIR)}, pattern = "[.][Rr]$", full.names = TRUE)) source(f)`,
      '#* @post /process',
      '#* @serializer contentType list(type = "application/json")',
      'function(req) svcJsonService(req$postBody)',
      '',
    ].join('\n'),
  );
  const port = await freeLoopbackPort();
  const child: ChildProcess = spawn(
    'Rscript',
    [
      '--no-init-file',
      '-e',
      `plumber::pr_run(plumber::pr(${JSON.stringify(api)}), host = "127.0.0.1", port = ${port}, docs = FALSE)`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const url = `http://127.0.0.1:${port}/process`;
  const stop = async (): Promise<void> => {
    child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + PLUMBER_START_TIMEOUT_MS;
  for (;;) {
    const up = await fetch(url, { method: 'POST', body: COMBN_CALL }).then(
      async (response) => {
        await response.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (up) {
      return { url, stop };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`plumber did not start:\n${output}`);
    }
    await sleep(200);
  }
}

/** svc first (its node stopped before plumber starts), then plumber both ways. */
export async function processBench(
  database: BenchDatabase,
  options: ProcessBenchOptions,
): Promise<CallMeasurement[]> {
  await database.empty();
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: database.url,
    scriptSlots: 2,
    main: options.main,
    env: { FUNCTION_SESSIONS: String(options.sessions), LOG_LEVEL: 'warn' },
  });
  options.track(node);
  const measurements: CallMeasurement[] = [];
  try {
    await loadDemoFunctions(database);
    measurements.push(
      ...(await measureAll(
        'svc /process',
        `${node.url}/svc/api/rest/process`,
        { 'X-SVC-Application-Name': 'demo' },
        options,
      )),
    );
  } finally {
    await node.stop();
  }
  const plumber = await startPlumber();
  try {
    measurements.push(...(await measureAll('plumber keep-alive', plumber.url, {}, options)));
    measurements.push(
      ...(await measureAll(
        'plumber Connection: close',
        plumber.url,
        { Connection: 'close' },
        options,
      )),
    );
  } finally {
    await plumber.stop();
  }
  return measurements;
}
