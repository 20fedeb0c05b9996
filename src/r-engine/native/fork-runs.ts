import { percentDecode } from './run-channel';
import { REngineUnavailableError } from '../r-engine';
import { kill, killTree, processTable } from './fork-processes';

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

/** What ForkRuns needs of the fork server its runs go to. */
export interface ForkRunHost {
  /** The server runs alone in a sandbox with its own PID namespace (ForkServerOptions.sandboxed). */
  readonly sandboxed: boolean;
  /** The server's host pid (0 when it is not running). */
  serverPid(): number;
  /** Writes a command line to the running server (nothing when none runs). */
  send(line: string): void;
  /** Kills the running server's whole process group, its sandbox with it. */
  killServer(): void;
}

/**
 * The fork server's runs: a token per job, its time limit and abort, its end as the server
 * reports it, and the kill of what it started (the child and its descendants, never the server).
 */
export class ForkRuns {
  private readonly runs = new Map<string, Run>();
  private nextToken = 1;
  private lastSweep = 0;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly host: ForkRunHost) {}

  /** Sends the run's RUN command with `write` and resolves with how the job ended. */
  run(request: ForkRunRequest, write: (line: string) => void): Promise<ForkRunStatus> {
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
      write(`RUN ${fields.join(' ')}\n`);
    });
  }

  /** The server is being stopped: every run ends as stopped, and no sweep is pending. */
  stopAll(): void {
    clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
    for (const run of this.runs.values()) {
      run.killedFor ??= 'stopped';
    }
  }

  /** The server ended (`why`): each run's processes are killed and the run fails, or ends if killed. */
  serverEnded(why: string): void {
    for (const run of [...this.runs.values()]) {
      if (run.pid !== undefined) {
        void killTree(run.pid);
      }
      if (run.killedFor) {
        run.resolve({ kind: 'died' });
      } else {
        run.reject(new REngineUnavailableError(`the fork server ended (${why}) during the job`));
      }
    }
  }

  /** A run's report from the server: STARTED, ENDED or NOFORK (anything else is not a run's). */
  onEvent(event: string, rest: string[]): void {
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
      case 'NOFORK':
        run?.reject(new REngineUnavailableError(`R could not fork: ${rest.slice(1).join(' ')}`));
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
    if (this.host.sandboxed) {
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
    const server = this.host.serverPid();
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
    this.host.send(`KILL ${run.token}\n`);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), KILL_GRACE_MS);
    });
    const result = await Promise.race([ended, late]);
    clearTimeout(timer);
    if (result === 'late') {
      this.host.killServer();
    }
  }

  /**
   * Kills background processes that finished jobs left behind: they stay in the server's
   * process group after their job's child has exited. Only when no job runs, so nothing found
   * can belong to a running job.
   */
  private async sweep(): Promise<void> {
    const server = this.host.serverPid();
    // A sandboxed server sweeps its namespace itself after every job.
    if (server === 0 || this.sweepTimer || this.host.sandboxed) {
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
    if (this.runs.size === 0 && this.host.serverPid() === server) {
      leftovers.forEach((p) => kill(p.pid));
    }
  }
}
