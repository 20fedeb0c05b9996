import { Logger } from '@nestjs/common';
import type { REngineConfig } from '../../config/config-slices';
import { applicationSettingsOf } from '../../config/application-settings';
import type {
  FunctionCallEngine,
  FunctionCallOutcome,
  FunctionCallRequest,
  FunctionCallStats,
} from '../function-call-engine';
import type { FunctionLibrarySource } from '../function-library';
import { REngineUnavailableError } from '../r-engine';
import type { PackageLibrary } from '../native/package-library';
import { RLauncher } from '../launch/r-launcher';
import { RSession } from './r-session';
import { inSpan } from '../../tracing/tracing';

export type RSessionPoolConfig = Pick<
  REngineConfig,
  | 'rHome'
  | 'rMemoryLimitMb'
  | 'functionSessions'
  | 'functionSessionMaxCalls'
  | 'applicationSettings'
  | 'resultRetentionHours'
  | 'maxRequestBytes'
> &
  Partial<Pick<REngineConfig, 'rMaxProcesses' | 'rMaxFileMb'>> & {
    rscript: string;
    /**
     * The node's launcher, final once the script engine has started (it chose the sandbox);
     * without one, sessions start unsandboxed (R_SANDBOX=none).
     */
    launcher?: () => RLauncher;
    /** Resolves when that launcher is final. */
    launcherReady?: Promise<void>;
    /** The node's managed packages (known once the script engine has started). */
    packages?: () => PackageLibrary | null;
  };

const START_TIMEOUT_MS = 30_000;
/** After a session could not start, wait this long before the next attempt. */
const RESTART_DELAY_MS = 1_000;

interface Waiter {
  applicationName: string;
  network: boolean;
  resolve: (session: RSession) => void;
  reject: (error: Error) => void;
}

/**
 * Warm native R sessions for function calls. `functionSessions` R processes start with the pool;
 * each serves one call at a time, and only calls of the application of its first call. A
 * session is replaced after an R error, a timeout (it is killed), `functionSessionMaxCalls`
 * calls, or its death, and when a call of another application needs it; the call that was
 * running when it died fails as `session-died`, or runs again on another session if R never
 * acknowledged the request. Waiting calls are served first come, first served, urgent ones
 * (/process) first, except that a freed session goes to the first waiting call of its own
 * application (see `release`). Sessions start without a network; one for an application whose
 * settings allow the network (`networkAllowed`) is started with it, when a call needs it.
 */
export class RSessionPool implements FunctionCallEngine {
  private readonly logger = new Logger('RSessionPool');
  private readonly sessions = new Set<RSession>();
  private readonly idle: RSession[] = [];
  private readonly waiting: Waiter[] = [];
  private readonly urgentWaiting: Waiter[] = [];
  private stopping = false;
  private lastStartError: Error | null = null;

  private unsandboxed: RLauncher | undefined;

  constructor(
    private readonly config: RSessionPoolConfig,
    private readonly libraries: FunctionLibrarySource,
  ) {}

  async start(): Promise<void> {
    this.stopping = false;
    await this.config.launcherReady;
    const first = Array.from({ length: this.config.functionSessions }, () => this.spawn());
    try {
      await withTimeout(
        Promise.all(first.map((session) => session.ready())),
        START_TIMEOUT_MS,
        'the R sessions did not say hello',
      );
    } catch (error) {
      await this.stop();
      throw new Error(
        `R sessions for function calls cannot start (${(error as Error).message}); check RSCRIPT_PATH / R_HOME, or set R_ENGINE=webr`,
      );
    }
    this.logger.log(`${this.config.functionSessions} warm R session(s) ready`);
  }

  async callFunction(request: FunctionCallRequest): Promise<FunctionCallOutcome> {
    const library = await this.libraries.get(request.applicationName);
    for (let attempt = 1; ; attempt++) {
      const session = await this.acquire(request);
      if (
        (session.packages !== null && session.packages !== library.packages) ||
        (session.environmentLibrary !== null &&
          session.environmentLibrary !== (request.environmentLibrary ?? ''))
      ) {
        // Its application's packages or environment changed since it started: a fresh session
        // loads them (calls that run in the old one finish there).
        this.retire(session);
        attempt--;
        continue;
      }
      let result;
      try {
        result = await inSpan(
          'svc.r.session.call',
          {
            attributes: {
              'svc.r.session.pid': session.pid ?? 0,
              'svc.r.session.calls': session.calls,
            },
          },
          () => session.call(request, library),
        );
      } catch (error) {
        this.retire(session);
        throw error;
      }
      if (result.reusable && session.calls < this.config.functionSessionMaxCalls && session.alive) {
        this.release(session);
      } else {
        this.retire(session);
      }
      // The session was gone before the request reached it: nothing ran, so it runs once more.
      if (result.outcome.status === 'failed' && !result.started && attempt === 1) {
        if (result.outcome.reason === 'session-died') {
          continue;
        }
      }
      return result.outcome;
    }
  }

  stats(): FunctionCallStats {
    let busy = 0;
    for (const session of this.sessions) {
      if (session.busy) {
        busy++;
      }
    }
    return {
      size: this.sessions.size,
      busy,
      idle: this.idle.length,
      waiting: this.waiting.length + this.urgentWaiting.length,
    };
  }

  /** Pids of the live sessions (tests kill one to prove a death is survived). */
  /** Calls that R has acknowledged: killing their session fails them, never re-runs them. */
  runningCalls(): number {
    return [...this.sessions].filter((session) => session.running).length;
  }

  pids(): number[] {
    return [...this.sessions].flatMap((session) => (session.pid ? [session.pid] : []));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const gone = new REngineUnavailableError('the R session pool has been stopped');
    for (const waiter of [...this.urgentWaiting.splice(0), ...this.waiting.splice(0)]) {
      waiter.reject(gone);
    }
    const sessions = [...this.sessions];
    sessions.forEach((session) => session.kill('the pool stopped'));
    await Promise.all(sessions.map((session) => session.exited));
    this.idle.length = 0;
  }

  private acquire(request: FunctionCallRequest): Promise<RSession> {
    if (this.stopping) {
      return Promise.reject(new REngineUnavailableError('the R session pool has been stopped'));
    }
    const network = this.networkAllowed(request.applicationName);
    const session = this.takeIdle(request.applicationName, network);
    if (session) {
      return Promise.resolve(session);
    }
    // Only sessions this call may not use are idle: one is replaced by a fresh one for it.
    if (this.idle.length > 0) {
      this.retire(this.idle[0]);
    }
    if (this.sessions.size === 0 && this.lastStartError) {
      return Promise.reject(
        new REngineUnavailableError(`no R session can start: ${this.lastStartError.message}`),
      );
    }
    return new Promise<RSession>((resolve, reject) => {
      const waiter = { applicationName: request.applicationName, network, resolve, reject };
      (request.urgent ? this.urgentWaiting : this.waiting).push(waiter);
    });
  }

  private networkAllowed(applicationName: string): boolean {
    return applicationSettingsOf(this.config, applicationName).networkAllowed;
  }

  /** Whether a call of that application (with that network setting) may run on the session. */
  private fits(session: RSession, applicationName: string, network: boolean): boolean {
    return session.application === null
      ? session.network === network
      : session.application === applicationName;
  }

  /**
   * An idle session of the application, else one that has not served any application yet. The
   * one idle the shortest time: calls one after the other go to the same session, whose process
   * and memory are still warm, instead of waking each idle session in turn.
   */
  private takeIdle(applicationName: string, network: boolean): RSession | undefined {
    let index = this.idle.findLastIndex((session) => session.application === applicationName);
    if (index < 0) {
      index = this.idle.findLastIndex((session) => this.fits(session, applicationName, network));
    }
    return index < 0 ? undefined : this.idle.splice(index, 1)[0];
  }

  /**
   * A session is free: it goes to the first waiting call it may serve (urgent calls first). A
   * session of one application that only calls of other applications wait for is replaced; its
   * fresh successor serves the first of them. Sessions are replaced after
   * `functionSessionMaxCalls` calls, so a busy application cannot hold them all for ever.
   */
  private release(session: RSession): void {
    for (const queue of [this.urgentWaiting, this.waiting]) {
      const index = queue.findIndex((waiter) =>
        this.fits(session, waiter.applicationName, waiter.network),
      );
      if (index >= 0) {
        queue.splice(index, 1)[0].resolve(session);
        return;
      }
    }
    if (this.urgentWaiting.length + this.waiting.length > 0) {
      this.retire(session);
      return;
    }
    this.idle.push(session);
  }

  private retire(session: RSession): void {
    const index = this.idle.indexOf(session);
    if (index >= 0) {
      this.idle.splice(index, 1);
    }
    if (session.alive) {
      session.kill('recycled');
    }
    // The replacement is spawned when the exit is seen (see spawn).
  }

  private launcher(): RLauncher {
    this.unsandboxed ??= new RLauncher({
      rscript: this.config.rscript,
      rHome: this.config.rHome,
      sandbox: 'none',
    });
    return this.config.launcher?.() ?? this.unsandboxed;
  }

  /** Starts a session; with the network when the first waiting call needs it. */
  private spawn(): RSession {
    const network = (this.urgentWaiting[0] ?? this.waiting[0])?.network ?? false;
    const session = new RSession({
      network,
      packages: this.config.packages?.() ?? null,
      launcher: this.launcher(),
      limits: {
        // A session lives for many calls: each call has a timer, the session no CPU limit.
        cpuSeconds: 0,
        memoryBytes: this.config.rMemoryLimitMb * 1024 * 1024,
        processes: this.config.rMaxProcesses ?? 0,
        fileBytes: (this.config.rMaxFileMb ?? 0) * 1024 * 1024,
      },
      onOutput: (stream, line) => this.logger.debug(`session ${session.id} ${stream}: ${line}`),
      // An answer is stored or sent like a request: the same bound.
      maxAnswerBytes: this.config.maxRequestBytes,
    });
    this.sessions.add(session);
    const helloTimer = setTimeout(() => session.kill('it did not say hello'), START_TIMEOUT_MS);
    let connected = false;
    session.ready().then(
      () => {
        connected = true;
        clearTimeout(helloTimer);
        this.lastStartError = null;
        this.release(session);
      },
      (error: Error) => {
        clearTimeout(helloTimer);
        this.lastStartError = error;
      },
    );
    void session.exited.then(() => {
      this.sessions.delete(session);
      const index = this.idle.indexOf(session);
      if (index >= 0) {
        this.idle.splice(index, 1);
      }
      if (this.stopping) {
        return;
      }
      if (connected) {
        this.spawn();
        return;
      }
      // R does not start: fail the waiting calls rather than hold them, and try again later.
      if (this.sessions.size === 0) {
        const error = new REngineUnavailableError(
          `no R session can start: ${this.lastStartError?.message ?? 'unknown error'}`,
        );
        for (const waiter of [...this.urgentWaiting.splice(0), ...this.waiting.splice(0)]) {
          waiter.reject(error);
        }
      }
      setTimeout(() => {
        if (!this.stopping && this.sessions.size < this.config.functionSessions) {
          this.spawn();
        }
      }, RESTART_DELAY_MS).unref();
    });
    return session;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
