import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import type {
  FunctionCallEngine,
  FunctionCallOutcome,
  FunctionCallRequest,
  FunctionCallStats,
} from './function-call-engine';
import type { FunctionLibrary } from './function-library';
import { REngineUnavailableError } from './r-engine';
import { FrameReader } from './r-session-frame';
import { RSession } from './r-session';

export type RSessionPoolConfig = Pick<
  AppConfig,
  'rHome' | 'rMemoryLimitMb' | 'functionSessions' | 'functionSessionMaxCalls'
> & { rscript: string };

/** Where the pool gets an application's library (FunctionLibraryService). */
export interface FunctionLibrarySource {
  get(applicationName: string): Promise<FunctionLibrary>;
}

const START_TIMEOUT_MS = 30_000;
const HELLO_TIMEOUT_MS = 5_000;
/** After a session could not start, wait this long before the next attempt. */
const RESTART_DELAY_MS = 1_000;

interface Waiter {
  applicationName: string;
  resolve: (session: RSession) => void;
  reject: (error: Error) => void;
}

/**
 * Warm native R sessions for function calls. `functionSessions` R processes start with the pool
 * and connect back to a loopback listener (a random token in their stdin says who they are);
 * each serves one call at a time. A session is replaced after an R error, a timeout (it is
 * killed), `functionSessionMaxCalls` calls, or its death; the call that was running when it died
 * fails as `session-died`, or runs again on another session if the request never reached it.
 * Waiting calls are served first come, first served, urgent ones (/process) first.
 */
export class RSessionPool implements FunctionCallEngine {
  private readonly logger = new Logger('RSessionPool');
  private readonly sessions = new Set<RSession>();
  private readonly idle: RSession[] = [];
  private readonly waiting: Waiter[] = [];
  private readonly urgentWaiting: Waiter[] = [];
  private readonly byToken = new Map<string, RSession>();
  private server: Server | null = null;
  private port = 0;
  private stopping = false;
  private lastStartError: Error | null = null;

  constructor(
    private readonly config: RSessionPoolConfig,
    private readonly libraries: FunctionLibrarySource,
  ) {}

  async start(): Promise<void> {
    this.stopping = false;
    const server = createServer((socket) => this.accept(socket));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    this.server = server;
    this.port = (server.address() as { port: number }).port;
    const first = Array.from({ length: this.config.functionSessions }, () => this.spawn());
    try {
      await withTimeout(
        Promise.all(first.map((session) => session.ready())),
        START_TIMEOUT_MS,
        'the R sessions did not connect',
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
      let result;
      try {
        result = await session.call(request, library);
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
    const server = this.server;
    this.server = null;
    if (server) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  private acquire(request: FunctionCallRequest): Promise<RSession> {
    if (this.stopping) {
      return Promise.reject(new REngineUnavailableError('the R session pool has been stopped'));
    }
    const session = this.takeIdle(request.applicationName);
    if (session) {
      return Promise.resolve(session);
    }
    if (this.sessions.size === 0 && this.lastStartError) {
      return Promise.reject(
        new REngineUnavailableError(`no R session can start: ${this.lastStartError.message}`),
      );
    }
    return new Promise<RSession>((resolve, reject) => {
      const waiter = { applicationName: request.applicationName, resolve, reject };
      (request.urgent ? this.urgentWaiting : this.waiting).push(waiter);
    });
  }

  /** An idle session, preferring one that already holds the application's library. */
  private takeIdle(applicationName: string): RSession | undefined {
    if (this.idle.length === 0) {
      return undefined;
    }
    let index = this.idle.findIndex((session) => session.libraries.has(applicationName));
    if (index < 0) {
      index = this.idle.length - 1;
    }
    return this.idle.splice(index, 1)[0];
  }

  private release(session: RSession): void {
    const waiter = this.urgentWaiting.shift() ?? this.waiting.shift();
    if (waiter) {
      waiter.resolve(session);
    } else {
      this.idle.push(session);
    }
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

  private spawn(): RSession {
    const token = randomBytes(16).toString('hex');
    const session = new RSession({
      rscript: this.config.rscript,
      rHome: this.config.rHome,
      memoryLimitMb: this.config.rMemoryLimitMb,
      port: this.port,
      token,
      onOutput: (stream, line) => this.logger.debug(`session ${session.id} ${stream}: ${line}`),
    });
    this.sessions.add(session);
    this.byToken.set(token, session);
    const helloTimer = setTimeout(() => session.kill('it did not connect'), START_TIMEOUT_MS);
    let connected = false;
    session.ready().then(
      () => {
        connected = true;
        clearTimeout(helloTimer);
        this.byToken.delete(token);
        this.lastStartError = null;
        this.release(session);
      },
      (error: Error) => {
        clearTimeout(helloTimer);
        this.byToken.delete(token);
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

  /** A session connecting back: its first frame must be `hello <token> <pid>`. */
  private accept(socket: Socket): void {
    let session: RSession | undefined;
    const timer = setTimeout(() => socket.destroy(), HELLO_TIMEOUT_MS);
    const reader = new FrameReader((fields) => {
      if (session) {
        session.onMessage(fields);
        return;
      }
      const candidate = fields[0] === 'hello' ? this.byToken.get(fields[1] ?? '') : undefined;
      clearTimeout(timer);
      if (!candidate) {
        socket.destroy();
        return;
      }
      session = candidate;
      this.byToken.delete(fields[1]);
      session.attach(socket);
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk);
      } catch (error) {
        socket.destroy();
        session?.kill(`bad frame from R: ${(error as Error).message}`);
      }
    });
    socket.on('error', () => undefined);
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
