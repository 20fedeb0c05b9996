/**
 * One svc node in its own process, started from the build (`dist/src/main.js`) as an operator
 * would, so that the load generator does not share its event loop.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const PROJECT_ROOT = resolve(__dirname, '..', '..');
export const DEFAULT_MAIN = join(PROJECT_ROOT, 'dist', 'src', 'main.js');
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/** Lines of the node's output kept for an error report. */
const KEPT_LINES = 200;

export type Role = 'all' | 'api' | 'worker';

export interface NodeOptions {
  role: Role;
  /** '' : the embedded database in the node's own DATA_DIR. */
  databaseUrl: string;
  scriptSlots: number;
  /** The build to run (default: this checkout's dist/src/main.js), to compare two builds. */
  main?: string;
  /** Extra node flags (e.g. --cpu-prof). */
  execArgv?: string[];
  env?: Record<string, string>;
  /** How long it may take to answer (default 60 s). */
  startTimeoutMs?: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

export class ServiceNode {
  private readonly lines: string[] = [];
  private exitCode: number | string | null = null;
  private readonly exit: Promise<number | string>;

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    private readonly dataDir: string,
  ) {
    const keep = (chunk: Buffer): void => {
      this.lines.push(...chunk.toString().split('\n').filter(Boolean));
      this.lines.splice(0, Math.max(0, this.lines.length - KEPT_LINES));
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exit = new Promise((resolveExit) =>
      child.once('exit', (code, signal) => {
        this.exitCode = code ?? signal ?? -1;
        resolveExit(this.exitCode);
      }),
    );
  }

  /** The node's DATA_DIR (its embedded database when started without a database URL). */
  get dataDirectory(): string {
    return this.dataDir;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  output(): string {
    return this.lines.join('\n');
  }

  static async start(options: NodeOptions): Promise<ServiceNode> {
    const main = options.main ?? DEFAULT_MAIN;
    if (!existsSync(main)) {
      throw new Error(`${main} is missing: run \`npm run build\` first (npm run bench does it)`);
    }
    const port = await freePort();
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-data-'));
    const child = spawn(process.execPath, [...(options.execArgv ?? []), main], {
      cwd: PROJECT_ROOT,
      env: {
        PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
        HOME: process.env.HOME ?? tmpdir(),
        ...(process.env.LANG ? { LANG: process.env.LANG } : {}),
        PORT: String(port),
        ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
        DATA_DIR: dataDir,
        MIGRATIONS_RUN: 'true',
        ROLE: options.role,
        R_ENGINE: 'native',
        RSCRIPT_PATH: '/usr/bin/Rscript',
        SCRIPT_SLOTS: String(options.scriptSlots),
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_SECONDS: '10',
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const node = new ServiceNode(child, `http://127.0.0.1:${port}`, dataDir);
    const startTimeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS;
    const deadline = Date.now() + startTimeoutMs;
    for (;;) {
      if (node.exitCode !== null) {
        node.cleanUp();
        throw new Error(`svc exited (${node.exitCode}) during start-up:\n${node.output()}`);
      }
      const answered = await fetch(`${node.url}/svc/api/rest/results/probe`).then(
        async (response) => {
          await response.arrayBuffer();
          return true;
        },
        () => false,
      );
      if (answered) {
        return node;
      }
      if (Date.now() > deadline) {
        await node.stop();
        throw new Error(`svc did not answer within ${startTimeoutMs} ms:\n${node.output()}`);
      }
      await sleep(100);
    }
  }

  /** SIGTERM (graceful: running R jobs finish), then SIGKILL if it takes too long. */
  async stop(): Promise<number | string> {
    if (this.exitCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await this.exit;
      clearTimeout(timer);
    }
    this.cleanUp();
    return this.exit;
  }

  /** Last resort on interruption: no grace. */
  kill(): void {
    if (this.exitCode === null) {
      this.child.kill('SIGKILL');
    }
    this.cleanUp();
  }

  private cleanUp(): void {
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}
