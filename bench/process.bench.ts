/**
 * Function calls: `POST /process` with the demo's JSON call `combn(5, 2)` at a fixed concurrency,
 * beside a plumber API (Debian's r-cran-plumber) serving the same R function from the same files.
 * plumber is measured twice: with keep-alive (as clients use it) and with `Connection: close`,
 * because its keep-alive answers can wait about 40 ms on Nagle's algorithm and delayed ACKs.
 * RestRserve (on Rserve, a forked R process per connection) serves the same function beside them
 * when it is installed in RESTRSERVE_LIBRARY (built by bench/restrserve-library.sh); otherwise
 * it is skipped with a message.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { Agent, request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchDatabase } from './bench-database';
import { printProfileWindow, profileClockUs } from './cpu-profile';
import { processTimes } from './cpu-usage';
import { PROJECT_ROOT, ServiceNode } from './service-node';
import { fetchResult, JOBS_PATH, rootAttributes } from './rest-client';
import { Distribution, distribution } from './stats';

export const COMBN_CALL = '{"RFunction":"combn","n":5,"k":2}';
const FUNCTIONS_DIR = join(PROJECT_ROOT, 'catalog', 'demo', 'R_FUNCTIONS');
const R_SERVER_START_TIMEOUT_MS = 60_000;

export type ProcessServer =
  | 'svc /process'
  | 'svc /functions'
  | 'plumber keep-alive'
  | 'plumber Connection: close'
  | 'RestRserve keep-alive'
  | 'svc function-call job';

/** Where bench/restrserve-library.sh installs RestRserve (a private R library). */
export const RESTRSERVE_LIBRARY =
  process.env.RESTRSERVE_LIBRARY ?? join(homedir(), '.cache', 'svc-bench', 'R-library');

/** The same combn(5, 2) through the demo's exported `combinations` (docs/functions.md). */
export const COMBINATIONS_ARGUMENTS = '{"n":5,"k":2}';

export interface CallMeasurement {
  server: ProcessServer;
  connections: number;
  durationS: number;
  requestsPerSecond: number;
  /** Answers that were not 200, and connection errors or timeouts. */
  failures: number;
  latencyMs: Distribution;
  /** CPU the server used per answered call, ms (svc: Node and its R sessions; plumber: its R). */
  serverCpuPerCallMs: number;
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
  /** More environment for the node (R_SANDBOX for the sandbox comparison). */
  env?: Record<string, string>;
  /** Measure plumber beside svc (default true). */
  withPlumber?: boolean;
  /**
   * Profile the svc node's Node process (--cpu-prof) while it runs the function-call jobs one at
   * a time, and print where its CPU went per job.
   */
  profile?: boolean;
}

/** One POST; resolves with the status and the time to the last byte of the answer, in ms. */
function post(
  url: URL,
  agent: Agent,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; ms: number }> {
  return new Promise((resolvePost, reject) => {
    const started = process.hrtime.bigint();
    const req = httpRequest(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': String(Buffer.byteLength(body)),
          ...headers,
        },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolvePost({
            status: res.statusCode ?? 0,
            ms: Number(process.hrtime.bigint() - started) / 1e6,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A closed loop: `connections` clients each post the call, wait for the whole answer and post
 * again, for `durationS`. Keep-alive clients reuse their connection; with `Connection: close`
 * every call opens a new one. Only 200 answers count.
 */
async function callLoad(
  server: ProcessServer,
  url: string,
  headers: Record<string, string>,
  connections: number,
  durationS: number,
  body = COMBN_CALL,
): Promise<CallMeasurement> {
  const keepAlive = headers.Connection !== 'close';
  const agent = new Agent({ keepAlive, maxSockets: connections });
  const target = new URL(url);
  const latencies: number[] = [];
  let failures = 0;
  const started = Date.now();
  const deadline = started + durationS * 1000;
  const client = async (): Promise<void> => {
    while (Date.now() < deadline) {
      try {
        const answer = await post(target, agent, headers, body);
        if (answer.status === 200) {
          latencies.push(answer.ms);
        } else {
          failures += 1;
        }
      } catch {
        failures += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, client));
  const elapsedS = (Date.now() - started) / 1000;
  agent.destroy();
  return {
    server,
    connections,
    durationS: elapsedS,
    requestsPerSecond: latencies.length / elapsedS,
    failures,
    latencyMs: distribution(latencies),
    serverCpuPerCallMs: NaN,
  };
}

/** Checks that a server answers the call with the 10 combinations before it is measured. */
async function checkAnswer(
  url: string,
  headers: Record<string, string>,
  body = COMBN_CALL,
): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body,
  });
  const text = await response.text();
  const answer = JSON.parse(text) as { combinations?: unknown[] };
  if (response.status !== 200 || answer.combinations?.length !== 10) {
    throw new Error(`${url} answered ${response.status}: ${text.slice(0, 300)}`);
  }
}

interface Target {
  server: ProcessServer;
  url: string;
  headers: Record<string, string>;
  /** The request body: /process's call, or the exported function's arguments. */
  body?: string;
  /** CPU used so far by the server's processes, ms. */
  cpuMs: () => number;
}

/** Own CPU of a process and of its live children (the R sessions of a svc node), ms. */
function treeCpuMs(pid: number): number {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    // not Linux, or gone: count the process alone
  }
  return [pid, ...children].reduce((sum, p) => sum + (processTimes(p)?.selfMs ?? 0), 0);
}

/**
 * Every server at one concurrency before the next: the machine's load drifts (other work runs on
 * it), so neighbours in time are what get compared.
 */
async function measureInTurn(
  targets: Target[],
  options: ProcessBenchOptions,
): Promise<CallMeasurement[]> {
  for (const target of targets) {
    await checkAnswer(target.url, target.headers, target.body);
    await callLoad(target.server, target.url, target.headers, 16, options.warmUpS, target.body);
  }
  const measurements: CallMeasurement[] = [];
  for (const connections of options.concurrencies) {
    for (const target of targets) {
      const cpuBefore = target.cpuMs();
      const measurement = await callLoad(
        target.server,
        target.url,
        target.headers,
        connections,
        options.durationS,
        target.body,
      );
      const calls = measurement.latencyMs.count;
      measurement.serverCpuPerCallMs = calls > 0 ? (target.cpuMs() - cpuBefore) / calls : NaN;
      options.log(
        `${target.server}, ${connections} connection(s): ${measurement.requestsPerSecond.toFixed(0)} req/s, ` +
          `p50 ${measurement.latencyMs.p50.toFixed(2)} ms, p99 ${measurement.latencyMs.p99.toFixed(2)} ms`,
      );
      measurements.push(measurement);
    }
  }
  return measurements;
}

/** Function-call jobs measured one after the other (submit, then the result's wait). */
const FUNCTION_CALL_JOBS = 200;

/**
 * Function-call jobs through the queue, one at a time: `POST /jobs` with the JSON call, then
 * `GET …/results/{app}/{id}?wait=30` until it answers 200; the time from sending the POST to that
 * answer, per job. The server CPU is the node's and its R sessions' per job.
 */
async function functionCallJobs(node: ServiceNode, log: (line: string) => void) {
  const latencies: number[] = [];
  const cpuBefore = treeCpuMs(node.pid);
  const started = Date.now();
  for (let i = 0; i < FUNCTION_CALL_JOBS; i += 1) {
    const sent = performance.now();
    const response = await fetch(`${node.url}${JOBS_PATH}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-SVC-Application-Name': 'demo' },
      body: COMBN_CALL,
    });
    const text = await response.text();
    if (response.status !== 202) {
      throw new Error(`a function-call job was answered ${response.status}: ${text.slice(0, 300)}`);
    }
    const { resultUri } = rootAttributes(text, 'jobToken');
    while (!(await fetchResult(`${resultUri}?wait=30`))) {
      // not stored within the wait: ask again
    }
    latencies.push(performance.now() - sent);
  }
  const elapsedS = (Date.now() - started) / 1000;
  const measurement: CallMeasurement = {
    server: 'svc function-call job',
    connections: 1,
    durationS: elapsedS,
    requestsPerSecond: FUNCTION_CALL_JOBS / elapsedS,
    failures: 0,
    latencyMs: distribution(latencies),
    serverCpuPerCallMs: (treeCpuMs(node.pid) - cpuBefore) / FUNCTION_CALL_JOBS,
  };
  log(
    `svc function-call job, one at a time: p50 ${measurement.latencyMs.p50.toFixed(2)} ms, ` +
      `p99 ${measurement.latencyMs.p99.toFixed(2)} ms (POST /jobs sent -> result answered)`,
  );
  return measurement;
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

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

/** An R HTTP server of the demo's R_FUNCTIONS serving svcJsonService at /process. */
interface RServer {
  url: string;
  pid: number;
  stop: () => Promise<void>;
}

const SOURCE_FUNCTIONS = `for (f in list.files(${JSON.stringify(FUNCTIONS_DIR)}, pattern = "[.][Rr]$", full.names = TRUE)) source(f)`;

/** A plumber API on a loopback port that sources the demo's R_FUNCTIONS and serves svcJsonService. */
function plumberApi(dir: string, port: number): string[] {
  const api = join(dir, 'api.R');
  writeFileSync(
    api,
    [
      SOURCE_FUNCTIONS,
      '#* @post /process',
      '#* @serializer contentType list(type = "application/json")',
      'function(req) svcJsonService(req$postBody)',
      '',
    ].join('\n'),
  );
  return [
    '-e',
    `plumber::pr_run(plumber::pr(${JSON.stringify(api)}), host = "127.0.0.1", port = ${port}, docs = FALSE)`,
  ];
}

/**
 * A RestRserve application with the same function: no middleware, so the body reaches
 * svcJsonService as the client sent it and its JSON answer leaves as it is.
 */
function restRserveApi(dir: string, port: number): string[] {
  const api = join(dir, 'api.R');
  writeFileSync(
    api,
    [
      `.libPaths(c(${JSON.stringify(RESTRSERVE_LIBRARY)}, .libPaths()))`,
      SOURCE_FUNCTIONS,
      'app <- RestRserve::Application$new(middleware = list())',
      'app$add_post("/process", function(.req, .res) {',
      '  .res$set_content_type("application/json")',
      '  .res$set_body(svcJsonService(rawToChar(.req$body)))',
      '})',
      `RestRserve::BackendRserve$new()$start(app, http_port = ${port})`,
      '',
    ].join('\n'),
  );
  return [api];
}

/** Whether RestRserve is installed where the bench looks for it (RESTRSERVE_LIBRARY). */
export function restRserveInstalled(): boolean {
  return existsSync(join(RESTRSERVE_LIBRARY, 'RestRserve', 'DESCRIPTION'));
}

async function startRServer(
  name: string,
  script: (dir: string, port: number) => string[],
): Promise<RServer> {
  const dir = mkdtempSync(join(tmpdir(), `svc-bench-${name}-`));
  const port = await freeLoopbackPort();
  const child: ChildProcess = spawn('Rscript', ['--no-init-file', ...script(dir, port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
  const deadline = Date.now() + R_SERVER_START_TIMEOUT_MS;
  for (;;) {
    const up = await fetch(url, { method: 'POST', body: COMBN_CALL }).then(
      async (response) => {
        await response.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (up) {
      return { url, pid: child.pid ?? -1, stop };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`${name} did not start:\n${output}`);
    }
    await sleep(200);
  }
}

/** svc and plumber side by side (both idle but one while the other is measured). */
export async function processBench(
  database: BenchDatabase,
  options: ProcessBenchOptions,
): Promise<CallMeasurement[]> {
  await database.empty();
  const profileDir = options.profile ? mkdtempSync(join(tmpdir(), 'svc-bench-prof-')) : null;
  const node = await ServiceNode.start({
    role: 'all',
    databaseUrl: database.url,
    scriptSlots: 2,
    main: options.main,
    env: { FUNCTION_SESSIONS: String(options.sessions), LOG_LEVEL: 'warn', ...options.env },
    execArgv: profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : undefined,
  });
  const jobsWindowUs = { from: 0, to: 0 };
  options.track(node);
  try {
    await loadDemoFunctions(database);
    const svc: Target = {
      server: 'svc /process',
      url: `${node.url}/svc/api/rest/process`,
      headers: { 'X-SVC-Application-Name': 'demo' },
      cpuMs: () => treeCpuMs(node.pid),
    };
    // The same R work through an exported function (docs/functions.md): its cost beside /process.
    const functions: Target = {
      server: 'svc /functions',
      url: `${node.url}/svc/api/rest/functions/demo/combinations`,
      headers: {},
      body: COMBINATIONS_ARGUMENTS,
      cpuMs: () => treeCpuMs(node.pid),
    };
    jobsWindowUs.from = profileClockUs();
    const jobs = await functionCallJobs(node, options.log);
    jobsWindowUs.to = profileClockUs();
    if (options.withPlumber === false) {
      return [...(await measureInTurn([svc, functions], options)), jobs];
    }
    const peers: RServer[] = [];
    try {
      const plumber = await startRServer('plumber', plumberApi);
      peers.push(plumber);
      const targets: Target[] = [
        svc,
        functions,
        {
          server: 'plumber keep-alive',
          url: plumber.url,
          headers: {},
          cpuMs: () => treeCpuMs(plumber.pid),
        },
        {
          server: 'plumber Connection: close',
          url: plumber.url,
          headers: { Connection: 'close' },
          cpuMs: () => treeCpuMs(plumber.pid),
        },
      ];
      if (restRserveInstalled()) {
        const restRserve = await startRServer('RestRserve', restRserveApi);
        peers.push(restRserve);
        // Rserve forks a process per connection: the CPU counted is the parent's and the live
        // children's (those of connections that ended are not).
        targets.push({
          server: 'RestRserve keep-alive',
          url: restRserve.url,
          headers: {},
          cpuMs: () => treeCpuMs(restRserve.pid),
        });
      } else {
        options.log(
          `RestRserve skipped: not installed in ${RESTRSERVE_LIBRARY} (bench/restrserve-library.sh builds it)`,
        );
      }
      return [...(await measureInTurn(targets, options)), jobs];
    } finally {
      for (const peer of peers) {
        await peer.stop();
      }
    }
  } finally {
    await node.stop();
    if (profileDir) {
      printProfileWindow(
        profileDir,
        jobsWindowUs,
        {
          units: FUNCTION_CALL_JOBS,
          unit: 'job',
          title: `${FUNCTION_CALL_JOBS} function-call jobs, one at a time`,
        },
        options.log,
      );
      rmSync(profileDir, { recursive: true, force: true });
    }
  }
}
