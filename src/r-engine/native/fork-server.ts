import { execFile, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  constants as fsConstants,
  createWriteStream,
  openSync,
  type WriteStream,
} from 'node:fs';
import { chown, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Readable } from 'node:stream';
import { backOffDelay } from '../../common/back-off';
import { LineSplitter } from '../launch/output-lines';
import { REngineUnavailableError } from '../r-engine';
import { hostPid } from './fork-processes';
import { ForkRuns, type ForkRunRequest, type ForkRunStatus } from './fork-runs';

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

/**
 * The Node side of the fork server (`r/fork-server.R`): one warm R process, started with the
 * engine, that forks a child per script job. The child redirects its output to the run's FIFO, runs the
 * script in the job's directory and exits; the server reports its pid when it starts and its
 * status when it ends. A timeout or an abort kills the child and its descendants, never the
 * server. A server that dies is started again; the runs it held fail as "R unavailable".
 * This class speaks the protocol and keeps the server running; ForkRuns (fork-runs.ts) keeps
 * the runs.
 */
export class ForkServer {
  private child: ChildProcess | undefined;
  /** The write end of the FIFO the server reads its commands from. */
  private commands: WriteStream | undefined;
  private launches = 0;
  private ready: Promise<void> | undefined;
  private serverPid = 0;
  private versionString = '';
  private readonly runs: ForkRuns;
  private readonly pings: Array<(value: string) => void> = [];
  private stopped = false;
  /** Restarts since the server was last ready: the back-off's attempt number. */
  private restartsSinceReady = 0;
  private failedStarts = 0;
  /** Why the server last said it cannot go on (BROKEN), for the log. */
  private brokenReason: string | undefined;

  constructor(private readonly options: ForkServerOptions) {
    this.runs = new ForkRuns({
      sandboxed: options.sandboxed,
      serverPid: () => this.serverPid,
      send: (line) => {
        this.commands?.write(line);
      },
      killServer: () => {
        if (this.child?.pid !== undefined) {
          try {
            process.kill(-this.child.pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      },
    });
  }

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
    return this.runs.run(request, (line) => commands.write(line));
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
    this.runs.stopAll();
    const child = this.child;
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
    let opened = false;
    commands.on('error', () => undefined);
    commands.once('open', () => {
      opened = true;
      void rm(fifo, { force: true });
    });
    this.commands = commands;
    child.once('exit', () => {
      if (!opened) {
        releaseWaitingOpen(fifo, commands);
      }
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
        this.runs.serverEnded(why);
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
    switch (event) {
      case 'BROKEN':
        // The server quits after this; its exit starts a new one.
        this.brokenReason = rest.join(' ').slice(0, 200);
        this.options.log.warn(
          `the R fork server cannot go on (${this.brokenReason}); starting a new one`,
        );
        break;
      case 'PONG':
        this.pings.shift()?.(rest.join(' '));
        break;
      case 'RECYCLE':
        this.options.log.log('the R fork server used half its CPU limit; starting a fresh one');
        break;
      default:
        // STARTED, ENDED, NOFORK: a run's.
        this.runs.onEvent(event, rest);
        break;
    }
  }
}

/**
 * Ends the wait of the write open of `fifo` (`commands`') whose reader will never come (the
 * server ended before it opened its end): that open blocks one of libuv's four pool threads for
 * good, and four such waits stop every file operation of the process. A reader's end, opened
 * here and held until the stream is closed, lets that open return whether it is already waiting
 * or not yet begun (closed at once, it would leave one that begins later waiting again). O_NONBLOCK:
 * a FIFO's read end opens at once, so this costs the event loop nothing and does not queue
 * behind the waits on the pool. The control directory is svc's own; O_NOFOLLOW refuses a link.
 */
function releaseWaitingOpen(fifo: string, commands: WriteStream): void {
  let reader: number;
  try {
    reader = openSync(fifo, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOFOLLOW);
  } catch {
    return; // gone already: no open is waiting on it
  }
  commands.once('close', () => {
    closeSync(reader);
    void rm(fifo, { force: true });
  });
}
