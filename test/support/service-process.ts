import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createTestDatabase, sleep, testEnvironment, type TestDatabase } from './test-service';

const MAIN = join(__dirname, '..', '..', 'dist', 'src', 'main.js');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  output(): string;
  /** Waits for the process to exit; returns its exit code or signal. */
  exited(): Promise<number | string>;
}

/**
 * Runs the built service (`dist/src/main.js`, made by `npm run build`, which `npm test` runs first)
 * as a separate process, as an operator would, and waits until it answers HTTP (or, for a worker,
 * until it logs that it started).
 */
export async function spawnService(
  env: NodeJS.ProcessEnv,
  timeoutMs = 60000,
): Promise<ServiceProcess> {
  if (!existsSync(MAIN)) {
    throw new Error(
      `${MAIN} is missing: run \`npm run build\` (npm test does it) before this test`,
    );
  }
  const port = env.PORT && env.PORT !== '0' ? Number(env.PORT) : await freePort();
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...env,
      PORT: String(port),
      LOG_LEVEL: env.LOG_LEVEL === 'silent' ? 'info' : (env.LOG_LEVEL ?? 'info'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  let exitedEarly = null as number | string | null;
  void exit.then((value) => (exitedEarly = value));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  const isWorker = env.ROLE === 'worker';
  for (;;) {
    if (exitedEarly !== null) {
      throw new Error(`service exited (${exitedEarly}) during start-up:\n${output}`);
    }
    if (
      isWorker
        ? output.includes('worker started')
        : await fetch(`${url}/svc/api/rest/results/probe`).then(
            () => true,
            () => false,
          )
    ) {
      break;
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`service did not start within ${timeoutMs} ms:\n${output}`);
    }
    await sleep(100);
  }
  return { child, url, output: () => output, exited: () => exit };
}

/**
 * Nodes of one service sharing a database: the first applies the migrations, the others start
 * on the migrated schema. All with the same environment, one after the other.
 */
export async function spawnNodes(env: NodeJS.ProcessEnv, count: number): Promise<ServiceProcess[]> {
  const nodes = [await spawnService(env)];
  while (nodes.length < count) {
    nodes.push(await spawnService({ ...env, MIGRATIONS_RUN: 'false' }));
  }
  return nodes;
}

/** Stops services as an operator would (SIGTERM) and waits until every one has exited. */
export async function stopServices(nodes: ServiceProcess[]): Promise<void> {
  for (const node of nodes) {
    node.child.kill('SIGTERM');
  }
  await Promise.all(nodes.map((node) => node.exited()));
}

/** Runs a command-line entry point of the built service and collects its output. */
export async function runCli(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; output: string }> {
  return runNode(join(__dirname, '..', '..', 'dist', 'src', script), args, env);
}

/** Runs the `svc` command line as an operator would (package.json's bin, on the built dist). */
export async function runSvc(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; output: string; stdout: string }> {
  return runNode(join(__dirname, '..', '..', 'bin', 'svc.js'), args, env);
}

async function runNode(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; output: string; stdout: string }> {
  const child = spawn(process.execPath, [file, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number>((resolve) => child.once('close', (c) => resolve(c ?? -1)));
  return { code, output, stdout };
}

/**
 * The built service on a fresh database holding the example catalog, as the README's examples
 * expect it: a fresh embedded database gets it at start-up, a server by `svc catalog load`.
 */
export async function spawnExampleService(): Promise<{
  database: TestDatabase;
  service: ServiceProcess;
  stop(): Promise<void>;
}> {
  const database = await createTestDatabase();
  const env = testEnvironment(database, { LOG_LEVEL: 'warn' });
  const service = await spawnService(env, 120000);
  /** Ends the service (SIGTERM; anything but exit code 0 is an error) and drops the database. */
  const stop = async (): Promise<void> => {
    service.child.kill('SIGTERM');
    const exit = await service.exited();
    await database.drop();
    if (exit !== 0) {
      throw new Error(`the service ended with ${exit} on SIGTERM:\n${service.output()}`);
    }
  };
  if (database.url) {
    const load = await runSvc(['catalog', 'load', join(__dirname, '..', '..', 'catalog')], env);
    if (load.code !== 0 || !load.output.includes('demo/R_FUNCTIONS/functions.R')) {
      await stop();
      throw new Error(`svc catalog load catalog failed:\n${load.output}`);
    }
  }
  return { database, service, stop };
}

/** The environment of an embedded service (or command line) on `dataDir`. */
export function embeddedEnv(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    AUTH_MODE: 'basic',
    ADMIN_USER: 'root',
    ADMIN_PASSWORD: 'root-secret-1',
    POLL_INTERVAL_MS: '200',
    // HTTP only: no R engine to start, which these tests do not need.
    ROLE: 'api',
  };
  delete env.DATABASE_URL;
  return env;
}
