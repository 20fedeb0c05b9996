/**
 * `npm start` stops on a signal to the process the user started: SIGTERM (a supervisor, `kill $!`,
 * a container's stop) or SIGINT to npm's own pid ends the service gracefully, frees its port and
 * its DATA_DIR, and leaves no process behind, so the next `npm start` on the same DATA_DIR starts
 * (docs/operations.md#a-bounded-shutdown). Runs the real `npm start` of this checkout, on the
 * embedded database; its prestart build finds dist/ up to date (built before the tests).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../support/service-process';
import { waitFor } from '../support/test-service';

const ROOT = join(__dirname, '..', '..');

interface NpmStart {
  npm: ChildProcess;
  output(): string;
  exited: Promise<number | string>;
}

/** The pids whose parent is `pid`, read from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) {
      continue;
    }
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The fields after the command's parenthesis: state, ppid, …
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) {
        children.push(Number(entry));
      }
    } catch {
      // The process ended while we looked.
    }
  }
  return children;
}

function processTree(pid: number): number[] {
  const children = childrenOf(pid);
  return [...children, ...children.flatMap(processTree)];
}

/** Whether a process runs: it exists and is not a zombie (ended, waiting to be reaped by its new parent). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function npmStart(port: number, dataDir: string): NpmStart {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
  };
  delete env.DATABASE_URL;
  const npm = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  npm.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  npm.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    npm.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  return { npm, output: () => output, exited };
}

describe('npm start ends on a signal to npm', () => {
  let dataDir: string;
  /** Every process seen under npm, killed at the end whatever the outcome. */
  const seen = new Set<number>();

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'svc-npm-start-'));
  });
  afterAll(() => {
    for (const pid of seen) {
      if (alive(pid)) {
        process.kill(pid, 'SIGKILL');
      }
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Starts npm start, waits until it serves, signals npm's pid, checks that all of it ended. */
  async function startAndStop(signal: NodeJS.Signals): Promise<void> {
    const port = await freePort();
    const started = npmStart(port, dataDir);
    let exitCode: number | string | null = null;
    void started.exited.then((code) => (exitCode = code));
    await waitFor(
      async () => {
        if (exitCode !== null) {
          throw new Error(`npm start exited (${exitCode}):\n${started.output()}`);
        }
        return fetch(`http://127.0.0.1:${port}/svc/api/rest/system/health/live`).then(
          (answer) => answer.ok,
          () => false,
        );
      },
      // The first start creates the database: the slowest start there is.
      200000,
      'npm start to serve',
    );
    const tree = processTree(started.npm.pid!);
    tree.forEach((pid) => seen.add(pid));
    expect(tree.length).toBeGreaterThan(0);

    started.npm.kill(signal);
    await started.exited;
    // R's processes end once they see the service go: under load that takes a moment.
    await waitFor(
      () => Promise.resolve(tree.filter(alive).length === 0),
      15000,
      'the tree to end',
    ).catch(() => undefined);
    expect(tree.filter(alive)).toEqual([]);
    expect(await portOpen(port)).toBe(false);
    expect(started.output()).toContain(`${signal} received: shutting down`);
  }

  it('SIGTERM to npm stops the service and everything it started', async () => {
    await startAndStop('SIGTERM');
  }, 300000);

  it('a second start on the same DATA_DIR serves, and SIGINT to npm stops it', async () => {
    await startAndStop('SIGINT');
  }, 300000);
});
