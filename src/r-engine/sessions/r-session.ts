import { type ChildProcess } from 'node:child_process';
import { constants as fsConstants, openSync } from 'node:fs';
import { Socket } from 'node:net';
import {
  type FunctionCallFailure,
  type FunctionCallOutcome,
  type FunctionCallRequest,
  R_REPORTED_FAILURES,
} from '../function-call-engine';
import type { FunctionLibrary } from '../function-library';
import type { PackageLibrary } from '../native/package-library';
import { REngineUnavailableError } from '../r-engine';
import { encodeFrame, FrameReader, FrameTooLargeError } from './r-session-frame';
import {
  logConsole,
  makeSessionDirectory,
  removeSessionDirectory,
  spawnSessionR,
  type RSessionOptions,
} from './r-session-process';

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

/** How long a dead session's answer pipe may take to deliver its last frames. */
const ANSWERS_CLOSE_GRACE_MS = 1_000;
/** Room in an answer frame besides the value: the other fields and their lengths. */
const ANSWER_FRAME_OVERHEAD = 64 * 1024;
/** A failure message from R is cut at this many characters. */
const MESSAGE_MAX_CHARS = 4096;

let nextSessionId = 1;

/**
 * One long-lived R process (`r/session.R`) that serves function calls one at a time, for one
 * application: the first call it serves makes it that application's session until it ends. It
 * holds that application's library and is told to reload it when the service's copy is newer.
 * Requests go to its stdin, answers come back on a FIFO in its directory (no network needed).
 * It runs in its own process group and directory with a minimal environment; killing it
 * (timeout, abort, stop) kills everything it started.
 */
export class RSession {
  readonly id = nextSessionId++;
  /** Started with the network (only for an application that is allowed it). */
  readonly network: boolean;
  /** The application this session serves; null until its first call. */
  application: string | null = null;
  /** Id of the library version this session has loaded. */
  private libraryId: number | null = null;
  /**
   * The application's package generation (FunctionLibrary.packages) when this session served
   * its first call: R cannot unload a package it has loaded, so a newer one needs a new session.
   */
  packages: number | null = null;
  /** The environment's library it was given with its first call ('' for none); null before. */
  environmentLibrary: string | null = null;
  private readonly packageLibrary: PackageLibrary | null;
  calls = 0;
  private readonly child: ChildProcess;
  private readonly dir: string;
  private readonly answers: Socket;
  private helloSeen = false;
  private current: InFlight | null = null;
  private dead = false;
  private answersEnded = false;
  private processExited = false;
  private exitDescription = '';
  /** Why the service killed R while it lived (a protocol breach, a timeout...): the call's say. */
  private killedBecause: string | null = null;
  /** The answer pipe broke the protocol once: nothing more is read from it. */
  private answersBroken = false;
  /** Console bytes logged during the current call. */
  private readonly console = { logged: 0 };
  private readonly readyPromise: Promise<void>;
  private markReady: () => void = () => undefined;
  private markFailed: (error: Error) => void = () => undefined;
  readonly exited: Promise<void>;

  constructor(options: RSessionOptions) {
    this.network = options.network;
    this.packageLibrary = options.packages;
    const { dir, fifo } = makeSessionDirectory();
    this.dir = dir;
    // Opened before R: a FIFO read end that no writer has opened yet waits (no end of file);
    // it ends once R and everything that inherited its write end are gone.
    this.answers = new Socket({
      fd: openSync(fifo, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK),
      readable: true,
      writable: false,
    });
    // Whatever arrives here may come from the application's code (it can open the FIFO by
    // name): its size is bounded before it is held, and a breach ends the session.
    const reader = new FrameReader(
      (fields) => this.onMessage(fields),
      options.maxAnswerBytes + ANSWER_FRAME_OVERHEAD,
    );
    this.answers.on('data', (chunk: Buffer) => {
      if (this.answersBroken) {
        return;
      }
      try {
        reader.push(chunk);
      } catch (error) {
        this.answersBroken = true;
        this.breach(
          error instanceof FrameTooLargeError
            ? `its answer (a frame of ${error.bodyBytes} bytes) is larger than MAX_REQUEST_BYTES (${options.maxAnswerBytes} bytes)`
            : `it sent a malformed frame (${(error as Error).message})`,
        );
      }
    });
    this.answers.on('error', () => undefined);
    // R's end of the pipe closes as R exits (or a sandbox's init ends it a moment later): wait
    // for the exit, so that the call is settled with how R ended; a session that closed the
    // pipe and lives on is of no use.
    this.answers.on('close', () => {
      this.answersEnded = true;
      if (this.processExited) {
        this.onGone(this.exitDescription);
      } else {
        setTimeout(() => this.kill('its answer pipe closed'), ANSWERS_CLOSE_GRACE_MS).unref();
      }
    });
    this.readyPromise = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.markFailed = reject;
    });
    this.readyPromise.catch(() => undefined);
    this.child = spawnSessionR(options, this.dir, fifo);
    this.exited = new Promise<void>((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exitDescription =
          signal !== null ? `R was killed by ${signal}` : `R exited with status ${String(code)}`;
        this.processExited = true;
        // What R left running (a background child) goes with it: it may hold the answer pipe.
        this.kill(this.exitDescription);
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
    logConsole(this.child, options.onOutput, this.console);
    this.child.stdin?.on('error', () => undefined);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.dead;
  }

  /** R has acknowledged the call it runs (application code may be running). */
  get running(): boolean {
    return this.current?.started === true;
  }

  get busy(): boolean {
    return this.current !== null;
  }

  /** Resolves when the session has said hello; rejects if it died first. */
  ready(): Promise<void> {
    return this.readyPromise;
  }

  /** A message from R. */
  private onMessage(fields: string[]): void {
    if (!this.helloSeen) {
      if (fields[0] !== 'hello') {
        this.breach('R did not say hello');
        return;
      }
      this.helloSeen = true;
      this.markReady();
      return;
    }
    const call = this.current;
    if (!call) {
      this.breach(`R sent a message while no call ran`);
      return;
    }
    const [kind, ...rest] = fields;
    if (kind === 'started' && rest.length === 0 && !call.started) {
      call.started = true;
      return;
    }
    if (!call.started) {
      this.breach('R answered a call it had not acknowledged');
      return;
    }
    if (kind === 'progress' && rest.length === 2) {
      // svc_progress in the function: a report, not the answer (r/svc-env.R checked it).
      const fraction = Number(rest[0]);
      if (Number.isFinite(fraction) && fraction >= 0 && fraction <= 1) {
        call.request.onProgress?.({ fraction, message: rest[1].slice(0, 500) });
      }
      return;
    }
    if (kind === 'ok' && rest.length === 1) {
      this.finish({
        outcome: { status: 'succeeded', value: rest[0] },
        started: true,
        reusable: true,
      });
      return;
    }
    if (kind === 'fail' && rest.length === 2 && R_REPORTED_FAILURES.has(rest[0])) {
      const reason = rest[0] as FunctionCallFailure;
      this.finish({
        outcome: { status: 'failed', reason, message: rest[1].slice(0, MESSAGE_MAX_CHARS) },
        started: true,
        // An R error may have left the session in any state: it is not trusted again.
        reusable: reason !== 'r-error',
      });
      return;
    }
    this.breach(`R sent a malformed "${String(kind).slice(0, 40)}" message`);
  }

  /**
   * The answer pipe broke the protocol: the session is not trusted again. The call (if any)
   * fails at once, naming why; R is killed and the pool replaces it.
   */
  private breach(why: string): void {
    const call = this.current;
    if (call) {
      this.finish({
        outcome: {
          status: 'failed',
          reason: 'session-died',
          message: `the R session was ended while it ran ${call.request.functionName}: ${why}`,
        },
        started: call.started,
        reusable: false,
      });
    }
    this.kill(why);
  }

  /**
   * Runs one call. `library` is sent along when this session does not hold that version yet.
   * A session serves only the application of its first call. Rejects only when the caller
   * aborted (the session is then killed).
   */
  call(request: FunctionCallRequest, library: FunctionLibrary): Promise<SessionCallResult> {
    if (
      this.dead ||
      !this.helloSeen ||
      this.current ||
      (this.application !== null && this.application !== request.applicationName)
    ) {
      return Promise.resolve(this.diedResult(request, false, 'the R session is not available'));
    }
    this.application = request.applicationName;
    this.packages ??= library.packages;
    this.environmentLibrary ??= request.environmentLibrary ?? '';
    const reload = this.libraryId !== library.id;
    const fields = [
      request.exported ? 'json' : 'call',
      request.applicationName,
      request.functionName,
      request.payload,
      reload ? '1' : '0',
      request.environmentLibrary || (this.packageLibrary?.dirOf(request.applicationName) ?? ''),
    ];
    if (reload) {
      for (const file of library.files) {
        fields.push(file.name, file.content);
      }
      this.libraryId = library.id;
    }
    this.calls++;
    this.console.logged = 0;
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
      this.child.stdin?.write(encodeFrame(fields));
    });
  }

  /** Kills R and everything it started; an in-flight call fails as session-died. */
  kill(why: string): void {
    if (!this.dead && !this.processExited) {
      this.killedBecause ??= why;
    }
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
      // R may write into its directory until the sandbox is gone, and may have put links there:
      // removed once the launcher has exited, by rm(1), which never follows a link, even one
      // swapped in while it runs (it descends by directory descriptors).
      void this.exited.then(() => removeSessionDirectory(this.dir));
      // Let the answer pipe deliver what R wrote (its "started") before the call is settled.
      if (!this.answersEnded) {
        setTimeout(() => this.answers.destroy(), ANSWERS_CLOSE_GRACE_MS).unref();
      }
    }
    // Settle once both ends are known: how R ended and what it had acknowledged.
    const call = this.current;
    if (call && this.answersEnded && this.processExited) {
      this.finish(
        this.diedResult(
          call.request,
          call.started,
          this.killedBecause ?? (this.exitDescription || why),
        ),
      );
    }
  }
}
