import { execFile, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { chown, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Readable } from 'node:stream';
import { backOffDelay } from '../common/back-off';
import { LineSplitter } from './output-lines';
import { percentDecode } from './run-channel';
import { REngineUnavailableError } from './r-engine';

/** How a forked job ended, as the fork server saw it. */
export type ForkRunStatus = (
  | { kind: 'ok' }
  /** R's error message, as the job's child reported it (bounded, never trusted as more). */
  | { kind: 'r-error'; message: string }
  | { kind: 'exit'; code: number }
  /** The child vanished without reporting: killed by a signal (a limit, the OOM killer) or crashed. */
  | { kind: 'died' }
  /** svc killed the child: its time limit passed, or the caller gave the job up. */
  | { kind: 'killed'; reason: 'timeout' | 'stopped' }
  /** The child could not prepare the run (working directory, output). */
  | { kind: 'setup'; message: string }
) & {
  /** The child's CPU milliseconds, where it reported them. */
  cpuMs?: number;
};

export interface ForkRunRequest {
  workDir: string;
  scriptName: string;
  /** Holds the run's tmp/, outside workDir. */
  privateDir: string;
  /** The FIFO the child's stdout and stderr go to (svc holds its read end open). */
  output: string;
  /** Called once the child runs: its output FIFO has a writer from then on. */
  onStarted?: () => void;
  /** The application's package library, put first on the child's `.libPaths()`. */
  libraryDir?: string;
  /** The run's W3C trace context: the child sets TRACEPARENT and SVC_TRACE_ID from it. */
  traceparent?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface ForkServerOptions {
  /** Starts the server's R (through the RLauncher) with these extra variables. */
  launch: (env: Record<string, string>) => ChildProcess;
  /** Holds the command FIFO; readable by the server (and its sandbox user), never writable. */
  controlDir: string;
  /** The uid sandboxed R runs as, when it is not the service's: it must open the FIFO. */
  sandboxUid: number | null;
  /**
   * The server runs alone in a sandbox with its own PID namespace (one job at a time): it kills
   * what a job left behind itself, and svc asks it to (KILL) instead of signalling pids.
   */
  sandboxed: boolean;
  /** The R process's CPU limit in seconds (0: none): it recycles itself at half of it. */
  cpuLimitSeconds: number;
  /** Before each start: the slot made as new (the last server's sandbox is gone by then). */
  prepareLaunch?: () => Promise<void>;
  /** Once the server is ready, before its first job. */
  onReady?: () => Promise<void>;
  log: { log(message: string): void; warn(message: string): void };
}

const START_TIMEOUT_MS = 30_000;
/** A line of the server's protocol is short; a longer one means the server is not itself. */
const MAX_PROTOCOL_LINE_BYTES = 64 * 1024;
/** Failed starts in a row after which the slot is reported unhealthy. */
const UNHEALTHY_AFTER_FAILED_STARTS = 3;
const PING_TIMEOUT_MS = 10_000;
/**
 * Pause before restarting a server that died, at most; doubles on each failed start, up to the
 * cap, drawn between half and all of that (backOffDelay).
 */
const RESTART_DELAY_MS = 100;
const RESTART_DELAY_CAP_MS = 10_000;
/** Leftover background processes are looked for at most this often, and only when idle. */
const SWEEP_INTERVAL_MS = 1_000;
/** How long a sandboxed server may take to kill a job it was asked to before its sandbox goes. */
const KILL_GRACE_MS = 2_000;

interface Run {
  token: string;
  pid?: number;
  onStarted?: () => void;
  /** Called when the server reports the job's end (a KILL in a sandbox waits for it). */
  onEnded?: () => void;
  killedFor?: 'timeout' | 'stopped';
  resolve(status: ForkRunStatus): void;
  reject(error: Error): void;
}

interface ProcessEntry {
  pid: number;
  ppid: number;
  pgrp: number;
}

/** Every process on the machine with its parent and group (from /proc/<pid>/stat). */
async function processTable(): Promise<ProcessEntry[]> {
  const entries: ProcessEntry[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields.length > 3) {
      entries.push({ pid: Number(name), ppid: Number(fields[1]), pgrp: Number(fields[2]) });
    }
  }
  return entries;
}

/**
 * The host pid of a process known by its pid in a PID namespace (`NSpid` in /proc/<pid>/status),
 * looked for below `root`; the pid itself when not sandboxed or not found.
 */
async function hostPid(root: number, namespacePid: number, sandboxed: boolean): Promise<number> {
  if (!sandboxed || root === 0) {
    return namespacePid;
  }
  for (const pid of await processTree(root)) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const nsPids = /^NSpid:\s*(.*)$/m.exec(status)?.[1].trim().split(/\s+/) ?? [];
    if (nsPids.length > 1 && Number(nsPids[nsPids.length - 1]) === namespacePid) {
      return pid;
    }
  }
  return namespacePid;
}

/** The pid and every process below it. */
async function processTree(pid: number): Promise<number[]> {
  const table = await processTable();
  const tree = [pid];
  for (let i = 0; i < tree.length; i += 1) {
    tree.push(...table.filter((p) => p.ppid === tree[i]).map((p) => p.pid));
  }
  return tree;
}

function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // ESRCH: already gone.
  }
}

/** Kills a child and what it started; the child first, so that it cannot start more. */
async function killTree(pid: number): Promise<void> {
  const tree = await processTree(pid);
  tree.forEach(kill);
}

/** An ENDED report's fields after the token: `<kind> <status> <cpu ms> <%-encoded message>`. */
export function parseEnded(fields: string[]): ForkRunStatus {
  const [kind = '', code = '', cpu = '', message = ''] = fields;
  const cpuMs = Number(cpu);
  const usage = Number.isFinite(cpuMs) && cpuMs >= 0 ? { cpuMs } : {};
  const text = percentDecode(message);
  switch (kind) {
    case 'ok':
      return { kind, ...usage };
    case 'r-error':
      return { kind, message: text || 'R reported an error', ...usage };
    case 'exit':
      return { kind, code: Number.isInteger(Number(code)) ? Number(code) : 1, ...usage };
    case 'setup':
      return { kind, message: text || 'the child could not prepare the run', ...usage };
    default:
      return { kind: 'died' };
  }
}

/**
 * The Node side of the fork server (`r/fork-server.R`): one warm R process, started with the
 * engine, that forks a child per script job. The child redirects its output to the run's FIFO, runs the
 * script in the job's directory and exits; the server reports its pid when it starts and its
 * status when it ends. A timeout or an abort kills the child and its descendants, never the
 * server. A server that dies is started again; the runs it held fail as "R unavailable".
 */
export class ForkServer {
  private child: ChildProcess | undefined;
  /** The write end of the FIFO the server reads its commands from. */
  private commands: WriteStream | undefined;
  private launches = 0;
  private ready: Promise<void> | undefined;
  private serverPid = 0;
  private versionString = '';
  private readonly runs = new Map<string, Run>();
  private readonly pings: Array<(value: string) => void> = [];
  private nextToken = 1;
  private stopped = false;
  /** Restarts since the server was last ready: the back-off's attempt number. */
  private restartsSinceReady = 0;
  private lastSweep = 0;
  private sweepTimer: NodeJS.Timeout | undefined;
  private failedStarts = 0;
  /** Why the server last said it cannot go on (BROKEN), for the log. */
  private brokenReason: string | undefined;

  constructor(private readonly options: ForkServerOptions) {}

  /**
   * Whether the slot can run jobs: false once its server failed to start several times in a
   * row (a health check reports it), true again when one starts.
   */
  get usable(): boolean {
    return this.failedStarts < UNHEALTHY_AFTER_FAILED_STARTS;
  }

  /**
   * Ends the server and starts a fresh one (a new sandbox: new IPC namespace, new memory), for
   * a job that must not meet what the last one left, or after a run the slot could not undo.
   */
  async recycle(): Promise<void> {
    await this.stop();
    this.ready = undefined;
    await this.start();
  }

  /** R.version.string of the running server. */
  get version(): string {
    return this.versionString;
  }

  /** The server's pid (0 when it is not running). */
  get pid(): number {
    return this.serverPid;
  }

  /**
   * The bytes the server and the children it reaped wrote to files (the kernel's write_bytes,
   * read from the host's /proc: the server itself cannot read it, being not dumpable); undefined
   * where this process may not read it (the service is not root) or there is no server.
   */
  async writtenBytes(): Promise<number | undefined> {
    if (this.serverPid === 0) {
      return undefined;
    }
    const io = await readFile(`/proc/${this.serverPid}/io`, 'utf8').catch(() => '');
    const match = /^write_bytes: (\d+)$/m.exec(io);
    return match ? Number(match[1]) : undefined;
  }

  /** Starts the server and waits until it is ready; throws when R cannot start. */
  async start(): Promise<void> {
    this.stopped = false;
    this.ready ??= this.launch().catch((error: unknown) => {
      this.failedStarts += 1;
      throw error;
    });
    await this.ready;
  }

  async run(request: ForkRunRequest): Promise<ForkRunStatus> {
    await this.start();
    const commands = this.commands;
    if (!commands || this.stopped) {
      throw new REngineUnavailableError('the fork server is not running');
    }
    const token = String(this.nextToken++);
    const fields = [
      token,
      request.workDir,
      request.scriptName,
      request.privateDir,
      request.output,
      // Optional, in this order: an empty library directory stands in before a traceparent.
      ...(request.libraryDir || request.traceparent ? [request.libraryDir ?? ''] : []),
      ...(request.traceparent ? [request.traceparent] : []),
    ].map((f) => encodeURIComponent(f));
    return new Promise<ForkRunStatus>((resolve, reject) => {
      // The job ends as soon as its processes are killed: a background process it started may
      // hold the child's pipe, so the server's report could come late or never.
      const stopRun = (reason: 'timeout' | 'stopped'): void => {
        run.killedFor ??= reason;
        if (run.pid !== undefined) {
          void this.killRun(run).then(() => run.resolve({ kind: 'killed', reason }));
        }
      };
      const giveUp = (): void => stopRun('stopped');
      const cleanUp = (): void => {
        clearTimeout(timer);
        request.signal?.removeEventListener('abort', giveUp);
        this.runs.delete(token);
        if (this.runs.size === 0) {
          void this.sweep();
        }
      };
      const run: Run = {
        token,
        onStarted: request.onStarted,
        resolve: (status) => {
          cleanUp();
          resolve(run.killedFor ? { kind: 'killed', reason: run.killedFor } : status);
        },
        reject: (error) => {
          cleanUp();
          reject(error);
        },
      };
      this.runs.set(token, run);
      const timer = setTimeout(() => stopRun('timeout'), request.timeoutMs);
      request.signal?.addEventListener('abort', giveUp, { once: true });
      if (request.signal?.aborted) {
        giveUp();
      }
      commands.write(`RUN ${fields.join(' ')}\n`);
    });
  }

  /** Evaluates 1+1 in the server; resolves with what it printed. */
  async ping(): Promise<string> {
    await this.start();
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('the fork server did not answer')),
        PING_TIMEOUT_MS,
      );
      this.pings.push((value) => {
        clearTimeout(timer);
        resolve(value);
      });
      this.commands?.write('PING\n');
    });
  }

  /** Kills the server, every child and everything they started (one process group). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
    const child = this.child;
    for (const run of this.runs.values()) {
      run.killedFor ??= 'stopped';
    }
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
      await exited;
    }
  }

  private async launch(): Promise<void> {
    await this.options.prepareLaunch?.();
    this.launches += 1;
    const fifo = join(this.options.controlDir, `commands-${this.launches}`);
    await rm(fifo, { force: true });
    try {
      await promisify(execFile)('mkfifo', ['-m', '600', fifo]);
      if (this.options.sandboxUid !== null) {
        await chown(fifo, this.options.sandboxUid, this.options.sandboxUid);
      }
    } catch (error) {
      throw new REngineUnavailableError(`cannot create ${fifo}: ${(error as Error).message}`);
    }
    // Its own process group (the launcher's): stop() kills the server and every job at once.
    const child = this.options.launch({
      SVC_FORK_COMMANDS: fifo,
      SVC_FORK_CPU_LIMIT: String(this.options.cpuLimitSeconds),
      SVC_FORK_SANDBOXED: this.options.sandboxed ? '1' : '0',
    });
    this.child = child;
    // Opening a FIFO waits for its reader; the server opens it first thing.
    const commands = createWriteStream(fifo);
    commands.on('error', () => undefined);
    commands.once('open', () => void rm(fifo, { force: true }));
    this.commands = commands;
    child.once('exit', () => {
      commands.destroy();
      if (this.commands === commands) {
        this.commands = undefined;
      }
    });
    const stderr: string[] = [];
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`the fork server did not start within ${START_TIMEOUT_MS} ms`));
        child.kill('SIGKILL');
      }, START_TIMEOUT_MS);
      let started = false;
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(new REngineUnavailableError(`cannot start the fork server: ${error.message}`));
      });
      const stderrLines = new LineSplitter((line) => {
        stderr.push(line.slice(0, 1000));
        stderr.splice(0, Math.max(0, stderr.length - 20));
      });
      (child.stderr as Readable).on('data', (chunk: Buffer) => stderrLines.push(chunk));
      const protocol = new LineSplitter((line) => {
        if (Buffer.byteLength(line) >= MAX_PROTOCOL_LINE_BYTES) {
          // Not a line the server writes: it is no longer trusted to run jobs.
          this.options.log.warn('the R fork server wrote an overlong line; starting a new one');
          try {
            process.kill(-(child.pid ?? 0), 'SIGKILL');
          } catch {
            // already gone
          }
          return;
        }
        const [event = '', ...rest] = line.split(' ');
        if (event === 'READY' && !started) {
          started = true;
          clearTimeout(timer);
          this.versionString = rest.slice(1).join(' ');
          this.restartsSinceReady = 0;
          this.failedStarts = 0;
          // In a PID namespace the server knows its pid there only; svc needs the host's.
          void hostPid(child.pid ?? 0, Number(rest[0]), this.options.sandboxed)
            .then(async (pid) => {
              this.serverPid = pid;
              await this.options.onReady?.();
              resolve();
            })
            .catch((error: Error) => {
              reject(new REngineUnavailableError(`the fork server's slot: ${error.message}`));
              child.kill('SIGKILL');
            });
        } else {
          this.onEvent(event, rest);
        }
      }, MAX_PROTOCOL_LINE_BYTES);
      (child.stdout as Readable).on('data', (chunk: Buffer) => protocol.push(chunk));
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        this.serverPid = 0;
        // What the server forked waits for its acknowledgement before it can exit (mcexit), and
        // the reader holds the server's stderr: the whole process group goes with the server.
        if (child.pid !== undefined) {
          try {
            process.kill(-child.pid, 'SIGKILL');
          } catch {
            // ESRCH: nothing left in the group.
          }
        }
        child.stdout?.destroy();
        child.stderr?.destroy();
        if (this.child === child) {
          this.child = undefined;
          this.ready = undefined;
        }
        const recycled = code === 0 && !this.stopped;
        const why =
          this.brokenReason ?? (signal !== null ? `signal ${signal}` : `status ${String(code)}`);
        this.brokenReason = undefined;
        if (!started) {
          reject(
            new REngineUnavailableError(
              `the fork server exited during start-up (${why}): ${stderr.join(' ').trim()}`,
            ),
          );
          return;
        }
        for (const run of [...this.runs.values()]) {
          if (run.pid !== undefined) {
            void killTree(run.pid);
          }
          if (run.killedFor) {
            run.resolve({ kind: 'died' });
          } else {
            run.reject(
              new REngineUnavailableError(`the fork server ended (${why}) during the job`),
            );
          }
        }
        if (!this.stopped) {
          if (!recycled) {
            this.options.log.warn(`the R fork server ended (${why}); starting a new one`);
          }
          this.restartSoon();
        }
      });
    });
  }

  private restartSoon(): void {
    this.restartsSinceReady += 1;
    const delay = backOffDelay(this.restartsSinceReady, RESTART_DELAY_MS, RESTART_DELAY_CAP_MS);
    setTimeout(() => {
      if (this.stopped || this.ready) {
        return;
      }
      this.start().catch((error: Error) => {
        this.options.log.warn(`the R fork server could not start: ${error.message}`);
        this.ready = undefined;
        this.restartSoon();
      });
    }, delay).unref();
  }

  private onEvent(event: string, rest: string[]): void {
    const run = this.runs.get(rest[0] ?? '');
    switch (event) {
      case 'STARTED':
        if (run) {
          run.pid = Number(rest[1]);
          run.onStarted?.();
          if (run.killedFor) {
            const reason = run.killedFor;
            void this.killRun(run).then(() => run.resolve({ kind: 'killed', reason }));
          }
        }
        break;
      case 'ENDED':
        run?.onEnded?.();
        run?.resolve(parseEnded(rest.slice(1)));
        break;
      case 'BROKEN':
        // The server quits after this; its exit starts a new one.
        this.brokenReason = rest.join(' ').slice(0, 200);
        this.options.log.warn(
          `the R fork server cannot go on (${this.brokenReason}); starting a new one`,
        );
        break;
      case 'NOFORK':
        run?.reject(new REngineUnavailableError(`R could not fork: ${rest.slice(1).join(' ')}`));
        break;
      case 'PONG':
        this.pings.shift()?.(rest.join(' '));
        break;
      case 'RECYCLE':
        this.options.log.log('the R fork server used half its CPU limit; starting a fresh one');
        break;
      default:
        break;
    }
  }

  /**
   * Kills a run's child and everything it started, including background processes that have
   * already left it (they stay in the server's process group with another parent), but nothing
   * that belongs to another running job.
   */
  private async killRun(run: Run): Promise<void> {
    if (run.pid === undefined) {
      return;
    }
    if (this.options.sandboxed) {
      await this.killInSandbox(run);
      return;
    }
    const table = await processTable();
    const below = (roots: number[]): Set<number> => {
      const found = new Set(roots);
      for (const pid of found) {
        table.filter((p) => p.ppid === pid).forEach((p) => found.add(p.pid));
      }
      return found;
    };
    const others = below(
      [...this.runs.values()]
        .filter((r) => r !== run && r.pid !== undefined)
        .map((r) => r.pid as number),
    );
    const server = this.serverPid;
    const victims = below([run.pid]);
    table
      .filter((p) => p.pgrp === server && p.pid !== server && p.ppid !== server)
      .filter((p) => !others.has(p.pid))
      .forEach((p) => victims.add(p.pid));
    victims.forEach(kill);
  }

  /**
   * In a sandbox the server kills the job's processes itself (every process of its namespace
   * but its own): pids there are not the host's. If it does not report the job's end within
   * KILL_GRACE_MS (a job may have stopped it), the whole sandbox goes and a new server starts.
   */
  private async killInSandbox(run: Run): Promise<void> {
    const ended = new Promise<void>((resolve) => {
      run.onEnded = resolve;
    });
    this.commands?.write(`KILL ${run.token}\n`);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), KILL_GRACE_MS);
    });
    const result = await Promise.race([ended, late]);
    clearTimeout(timer);
    if (result === 'late' && this.child?.pid !== undefined) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  /**
   * Kills background processes that finished jobs left behind: they stay in the server's
   * process group after their job's child has exited. Only when no job runs, so nothing found
   * can belong to a running job.
   */
  private async sweep(): Promise<void> {
    const server = this.serverPid;
    // A sandboxed server sweeps its namespace itself after every job.
    if (server === 0 || this.sweepTimer || this.options.sandboxed) {
      return;
    }
    const wait = this.lastSweep + SWEEP_INTERVAL_MS - Date.now();
    if (wait > 0) {
      this.sweepTimer = setTimeout(() => {
        this.sweepTimer = undefined;
        if (this.runs.size === 0) {
          void this.sweep();
        }
      }, wait);
      this.sweepTimer.unref();
      return;
    }
    this.lastSweep = Date.now();
    const leftovers = (await processTable()).filter(
      (p) => p.pgrp === server && p.pid !== server && p.ppid !== server,
    );
    if (this.runs.size === 0 && this.serverPid === server) {
      leftovers.forEach((p) => kill(p.pid));
    }
  }
}
