import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  type FunctionCallFailure,
  type FunctionCallOutcome,
  type FunctionCallRequest,
} from './function-call-engine';
import type { FunctionLibrary } from './function-library';
import { REngineUnavailableError } from './r-engine';
import { encodeFrame } from './r-session-frame';
import { rSourcePath } from './r-sources';

export interface RSessionOptions {
  rscript: string;
  rHome: string | null;
  /** Address-space limit of the session (prlimit --as); 0: none. */
  memoryLimitMb: number;
  /** Port of the pool's loopback listener the session connects back to. */
  port: number;
  token: string;
  /** R's console output, line by line. */
  onOutput: (stream: 'stdout' | 'stderr', line: string) => void;
}

/** What a call did to the session, besides its outcome. */
export interface SessionCallResult {
  outcome: FunctionCallOutcome;
  /** The request reached R (application code may have run). False: safe to run it elsewhere. */
  started: boolean;
  /** False when the session must not serve another call (R error, timeout, death). */
  reusable: boolean;
}

interface InFlight {
  request: FunctionCallRequest;
  started: boolean;
  settle: (result: SessionCallResult) => void;
  fail: (error: Error) => void;
  timer: NodeJS.Timeout;
}

const PRLIMIT = '/usr/bin/prlimit';
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
/** Library locations the operator may point R at; paths, never secrets. */
const PASSED_R_VARIABLES = ['R_LIBS', 'R_LIBS_SITE', 'R_LIBS_USER'] as const;
/** How long a dead session's connection may take to report its end. */
const SOCKET_CLOSE_GRACE_MS = 1_000;
const FAILURES = new Set<string>(['r-error', 'missing-function', 'not-a-string']);

function canExecute(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

let nextSessionId = 1;

/**
 * One long-lived R process (`r/session.R`) that serves function calls one at a time. It holds
 * the libraries it has loaded (one environment per application) and is told to reload one when
 * the service's copy is newer. It runs in its own process group and directory with a minimal
 * environment; killing it (timeout, abort, stop) kills everything it started.
 */
export class RSession {
  readonly id = nextSessionId++;
  /** Application -> id of the library version this session has loaded. */
  readonly libraries = new Map<string, number>();
  calls = 0;
  private readonly child: ChildProcess;
  private readonly dir: string;
  private socket: Socket | null = null;
  private current: InFlight | null = null;
  private dead = false;
  private socketClosed = false;
  private processExited = false;
  private requestUnread = false;
  private exitDescription = '';
  private readonly readyPromise: Promise<void>;
  private markReady: () => void = () => undefined;
  private markFailed: (error: Error) => void = () => undefined;
  readonly exited: Promise<void>;

  constructor(options: RSessionOptions) {
    this.dir = mkdtempSync(join(tmpdir(), 'svc-session-'));
    mkdirSync(join(this.dir, 'tmp'));
    this.readyPromise = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.markFailed = reject;
    });
    this.readyPromise.catch(() => undefined);
    this.child = this.spawnR(options);
    this.exited = new Promise<void>((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exitDescription =
          signal !== null ? `R was killed by ${signal}` : `R exited with status ${String(code)}`;
        this.processExited = true;
        this.onGone(this.exitDescription);
        resolve();
      });
      // A process that could not be spawned (no such file) never emits 'exit'.
      this.child.once('error', (error) => {
        if (this.child.pid === undefined) {
          this.processExited = true;
          resolve();
        }
        this.onGone(`R could not start: ${error.message}`);
      });
    });
    for (const stream of ['stdout', 'stderr'] as const) {
      const input = this.child[stream];
      if (input) {
        createInterface({ input, crlfDelay: Infinity }).on('line', (line) =>
          options.onOutput(stream, line),
        );
      }
    }
    this.child.stdin?.on('error', () => undefined);
    this.child.stdin?.end(`${options.token}\n`);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.dead;
  }

  get busy(): boolean {
    return this.current !== null;
  }

  /** Resolves when the session has said hello; rejects if it died first. */
  ready(): Promise<void> {
    return this.readyPromise;
  }

  /** The session connected back: from now on calls go over this socket. */
  attach(socket: Socket): void {
    if (this.dead) {
      socket.destroy();
      return;
    }
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on('close', () => {
      this.socketClosed = true;
      this.kill('its connection closed');
    });
    // A reset means R died with our request unread in its socket (or was gone when we wrote):
    // a clean close after a read would have been a FIN. So the call never ran.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') {
        this.requestUnread = true;
      }
    });
    this.markReady();
  }

  /** A message from R after its hello. */
  onMessage(fields: string[]): void {
    const call = this.current;
    if (!call) {
      this.kill(`R sent an unexpected "${fields[0]}" message`);
      return;
    }
    const [kind, ...rest] = fields;
    if (kind === 'ok' && rest.length === 1) {
      this.finish({
        outcome: { status: 'succeeded', value: rest[0] },
        started: true,
        reusable: true,
      });
      return;
    }
    if (kind === 'fail' && rest.length === 2 && FAILURES.has(rest[0])) {
      const reason = rest[0] as FunctionCallFailure;
      this.finish({
        outcome: { status: 'failed', reason, message: rest[1] },
        started: call.started,
        // An R error may have left the session in any state: it is not trusted again.
        reusable: reason !== 'r-error',
      });
      return;
    }
    this.kill('R sent a malformed answer');
  }

  /**
   * Runs one call. `library` is sent along when this session does not hold that version yet.
   * Rejects only when the caller aborted (the session is then killed).
   */
  call(request: FunctionCallRequest, library: FunctionLibrary): Promise<SessionCallResult> {
    if (this.dead || !this.socket || this.current) {
      return Promise.resolve(this.diedResult(request, false, 'the R session is not available'));
    }
    const reload = this.libraries.get(request.applicationName) !== library.id;
    const fields = [
      'call',
      request.applicationName,
      request.functionName,
      request.payload,
      reload ? '1' : '0',
    ];
    if (reload) {
      for (const file of library.files) {
        fields.push(file.name, file.content);
      }
      this.libraries.set(request.applicationName, library.id);
    }
    this.calls++;
    return new Promise<SessionCallResult>((resolve, reject) => {
      const onAbort = (): void => {
        this.current = null;
        clearTimeout(timer);
        reject(new REngineUnavailableError('the function call was given up'));
        this.kill('the call was given up');
      };
      const timer = setTimeout(() => {
        this.finish({
          outcome: {
            status: 'failed',
            reason: 'timeout',
            message: `${request.functionName} exceeded its time limit of ${request.timeoutMs / 1000} s`,
          },
          started: true,
          reusable: false,
        });
        this.kill('the call timed out');
      }, request.timeoutMs);
      request.signal?.addEventListener('abort', onAbort, { once: true });
      this.current = {
        request,
        started: false,
        timer,
        settle: (result) => {
          request.signal?.removeEventListener('abort', onAbort);
          resolve(result);
        },
        fail: reject,
      };
      if (request.signal?.aborted) {
        onAbort();
        return;
      }
      this.current.started = true;
      this.socket?.write(encodeFrame(fields));
    });
  }

  /** Kills R and everything it started; an in-flight call fails as session-died. */
  kill(why: string): void {
    if (this.child.pid !== undefined && !this.dead) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    this.onGone(why);
  }

  private finish(result: SessionCallResult): void {
    const call = this.current;
    if (!call) {
      return;
    }
    this.current = null;
    clearTimeout(call.timer);
    call.settle(result);
  }

  private diedResult(
    request: FunctionCallRequest,
    started: boolean,
    why: string,
  ): SessionCallResult {
    return {
      outcome: {
        status: 'failed',
        reason: 'session-died',
        message: `the R session ended while it ran ${request.functionName} (${why})`,
      },
      started,
      reusable: false,
    };
  }

  private onGone(why: string): void {
    if (!this.dead) {
      this.dead = true;
      this.markFailed(new REngineUnavailableError(`R session ${this.id} ended: ${why}`));
      rmSync(this.dir, { recursive: true, force: true });
      // Let the connection report how it ended (reset or not) before the call is settled.
      const socket = this.socket;
      if (socket && !this.socketClosed) {
        setTimeout(() => socket.destroy(), SOCKET_CLOSE_GRACE_MS).unref();
      }
    }
    // Settle once both ends are known: how R ended and how its connection ended.
    const call = this.current;
    if (call && (this.socketClosed || !this.socket) && this.processExited) {
      const started = call.started && !this.requestUnread;
      this.finish(this.diedResult(call.request, started, this.exitDescription || why));
    }
  }

  private spawnR(options: RSessionOptions): ChildProcess {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? DEFAULT_PATH,
      HOME: this.dir,
      TMPDIR: join(this.dir, 'tmp'),
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      R_ENVIRON_USER: join(this.dir, 'no-such-renviron'),
    };
    if (options.rHome) {
      env.R_HOME = options.rHome;
    }
    for (const name of PASSED_R_VARIABLES) {
      if (process.env[name] !== undefined) {
        env[name] = process.env[name];
      }
    }
    let command = options.rscript;
    let args = [
      '--no-init-file',
      rSourcePath('session.R'),
      String(options.port),
      rSourcePath('call-function.R'),
    ];
    if (options.memoryLimitMb > 0 && canExecute(PRLIMIT)) {
      args = [`--as=${options.memoryLimitMb * 1024 * 1024}`, '--', command, ...args];
      command = PRLIMIT;
    }
    return spawn(command, args, {
      cwd: this.dir,
      env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  }
}
