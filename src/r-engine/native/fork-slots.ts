import { AsyncResource } from 'node:async_hooks';
import { chmodSync, lchownSync, mkdirSync, readdirSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ForkServer } from './fork-server';
import type { ForkRunStatus } from './fork-runs';
import { routeOutput } from '../job-progress';
import { emptyDirectory, removeTree } from '../job-tree/job-tree-removal';
import { libraryDir, type NativeRuntime } from './native-runtime';
import { LineSplitter } from '../launch/output-lines';
import type { ScriptRunOutcome, ScriptRunRequest } from '../r-engine';
import { isExecutable } from '../launch/r-sandbox';
import { DRAIN_GRACE_MS } from '../launch/r-process';
import { closeDescriptor, FifoPool, openFifoForReading, readFifo } from './run-channel';
import { preparePrivate, withRunDirectory } from './run-directory';
import {
  forkOutcome,
  namedLimit,
  OutputScan,
  rLimits,
  watchWrites,
  writeLimitOutcome,
} from './run-limits';

/** The CPU backstop of the fork server when the configuration names no job time limit. */
const DEFAULT_JOB_TIMEOUT_S = 600;
/** The fork server's own temporary directory inside its slot (R's session directory lives there). */
const SERVER_TMP = 'server-tmp';

/** A sandboxed fork server and the directory its jobs run in, one job at a time. */
interface Slot {
  server: ForkServer;
  /**
   * Bound into the server's sandbox, owned by the service and not writable by the sandbox user:
   * work/ (the job's directory while it runs, the job's), private/ (the service's) holding tmp/
   * (the job's), server-tmp/ (the server's R session directory, locked once it is ready).
   */
  dir: string;
  /** The FIFOs of the slot's runs, in its control directory (bound read-only, unlistable). */
  fifos: FifoPool;
  busy: boolean;
  /** The application of the last job the current server ran (none since it started). */
  application: string | null;
  /** The server's R session directory (in server-tmp), emptied after every job. */
  sessionDirs: string[];
}

/**
 * The fork slots (R_SCRIPT_MODE=fork): warm R parents, the fork servers, one per slot and each
 * in a sandbox of its own, that fork a child per script job. A slot serves one job at a time;
 * between jobs it is cleaned, and made anew (a new server) when the next job is another
 * application's or when cleaning fails.
 */
export class ForkSlots {
  private readonly slots: Slot[] = [];
  private readonly slotWaiters: Array<(slot: Slot) => void> = [];
  /** Slots being cleaned after a job, released when done. */
  private readonly recycling = new Set<Promise<void>>();

  constructor(
    private readonly runtime: NativeRuntime,
    private readonly jobTimeoutSeconds: number | undefined,
  ) {}

  /** Whether any slot runs: once start() has succeeded, until stop(). */
  get active(): boolean {
    return this.slots.length > 0;
  }

  /** False when a slot's server keeps failing to start: that slot cannot run jobs. */
  get usable(): boolean {
    return this.slots.every((slot) => slot.server.usable);
  }

  /** The first slot's server (its R version, a ping for the health check, its pid for tests). */
  get firstServer(): ForkServer | undefined {
    return this.slots[0]?.server;
  }

  /** Starts a fork server per slot, `count` of them; throws when one cannot start. */
  async start(count: number): Promise<void> {
    if (!isExecutable(this.runtime.rscript)) {
      throw new Error(`Rscript not found or not executable: ${this.runtime.rscript}`);
    }
    const root = this.runtime.root as string;
    const timeoutMs = (this.jobTimeoutSeconds ?? DEFAULT_JOB_TIMEOUT_S) * 1000;
    const limits = this.runtime.limits(timeoutMs);
    const sandboxed = this.runtime.launcher.sandbox === 'bwrap';
    const started: Slot[] = [];
    for (let index = 0; index < count; index += 1) {
      const dir = join(root, `slot-${index}`);
      const control = join(root, `control-${index}`);
      // chmod: the service's umask (PRIVATE_UMASK) would leave them closed to the sandbox user.
      await mkdir(dir);
      await chmod(dir, 0o711);
      await mkdir(control);
      await chmod(control, 0o711);
      const slot: Slot = {
        server: null as unknown as ForkServer,
        dir,
        fifos: new FifoPool(control, this.runtime.launcher.sandboxUid),
        busy: false,
        application: null,
        sessionDirs: [],
      };
      slot.server = new ForkServer({
        launch: (env) =>
          this.runtime.launcher.spawn({
            args: [
              this.runtime.launcher.rSource('fork-server.R'),
              this.runtime.launcher.rSource('svc-env.R'),
              this.runtime.launcher.rSource('run-job.R'),
            ],
            cwd: dir,
            home: dir,
            tmp: join(dir, SERVER_TMP),
            writable: [dir],
            readable: [control, ...(this.runtime.packages?.readableRoots ?? [])],
            network: false,
            limits: rLimits(limits),
            env,
            stdio: ['ignore', 'pipe', 'pipe'],
            // Its jobs are its children: they must not read or write its memory.
            undumpable: true,
          }),
        controlDir: control,
        sandboxUid: this.runtime.launcher.sandboxUid,
        sandboxed,
        cpuLimitSeconds: limits.cpuSeconds,
        // Each server starts in a slot made as new; once it is ready, its session directory is
        // the only place in server-tmp a job can write (emptied after every job).
        prepareLaunch: () => this.resetSlot(dir),
        onReady: () => Promise.resolve(this.lockServerTmp(slot)),
        log: this.runtime.logger,
      });
      started.push(slot);
      this.slots.push(slot);
    }
    await Promise.all(started.map((slot) => slot.server.start()));
  }

  /** A slot's directories made as new: nothing of an earlier server or job is left. */
  private async resetSlot(dir: string): Promise<void> {
    for (const name of ['work', 'private', SERVER_TMP]) {
      await removeTree(join(dir, name)).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') {
          throw error;
        }
      });
    }
    chmodSync(dir, 0o711);
    const serverTmp = join(dir, SERVER_TMP);
    mkdirSync(serverTmp, { mode: 0o700 });
    this.runtime.launcher.makeWritable(serverTmp);
    preparePrivate(this.runtime.launcher, dir);
  }

  /**
   * Once the server is ready (only it has run in the slot so far), notes its R session
   * directory and hands server-tmp back to the service: jobs may still write in the session
   * directory (R's C code, such as the pdf device, puts its temporary files there), which is
   * emptied after every job, but can neither replace it nor leave anything beside it.
   */
  private lockServerTmp(slot: Slot): void {
    const serverTmp = join(slot.dir, SERVER_TMP);
    slot.sessionDirs = readdirSync(serverTmp).map((name) => join(serverTmp, name));
    if (this.runtime.launcher.sandboxUid !== null) {
      lchownSync(serverTmp, 0, 0);
      chmodSync(serverTmp, 0o711);
    }
  }

  /** Stops every server (and so their jobs) once the slots being cleaned are done. */
  async stop(): Promise<void> {
    await Promise.all([...this.recycling]);
    const slots = this.slots.splice(0);
    await Promise.all(slots.map((slot) => slot.server.stop()));
    await Promise.all(slots.map((slot) => slot.fifos.close()));
  }

  /**
   * A free slot, the one that last served the job's application first, then one whose server
   * has served no job yet: a slot that served another application is recycled before it runs
   * this one (see runForked).
   */
  private acquireSlot(application: string): Promise<Slot> {
    const free = this.slots.filter((slot) => !slot.busy);
    const slot =
      free.find((s) => s.application === application) ??
      free.find((s) => s.application === null) ??
      free[0];
    if (slot) {
      slot.busy = true;
      return Promise.resolve(slot);
    }
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }

  private releaseSlot(slot: Slot): void {
    const next = this.slotWaiters.shift();
    if (next) {
      next(slot);
    } else {
      slot.busy = false;
    }
  }

  /**
   * Runs a script in a child forked by a slot's fork server. The child's output comes through
   * a FIFO the service made and reads, its end through the server's protocol: nothing the job
   * can write is read by the service but through a descriptor the service opened.
   */
  async run(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    const application = request.applicationName ?? '';
    const slot = await this.acquireSlot(application);
    const limits = this.runtime.limits(request.timeoutMs);
    let recycle = false;
    try {
      // Applications never share a sandbox: a server that ran another application's job is
      // replaced first (a new IPC namespace, new memory, a fresh session directory).
      if (slot.application !== null && slot.application !== application) {
        await slot.server.recycle();
      }
      slot.application = application;
      return await withRunDirectory(
        this.runtime.launcher,
        request.workDir,
        slot.dir,
        true,
        async (work, tmp) => {
          const controller = new AbortController();
          const stopped = (): void => controller.abort('stopped');
          request.signal?.addEventListener('abort', stopped, { once: true });
          const watch = watchWrites([work, tmp], limits.writeMb, () => controller.abort('write'));
          const output = routeOutput(request);
          const scan = new OutputScan();
          const lines = new LineSplitter((line) => {
            scan.line(line);
            output?.('stdout', line);
          });
          const fifo = await slot.fifos.take();
          const fd = await openFifoForReading(fifo);
          // The server reaps the job's child before it reports the end, so the bytes the child
          // (and what it waited for) wrote to files are added to the server's count by then.
          const writtenBefore = await slot.server.writtenBytes();
          let reader: ReturnType<typeof readFifo> | undefined;
          let status: ForkRunStatus;
          try {
            status = await slot.server.run({
              workDir: work,
              scriptName: request.scriptName,
              privateDir: dirname(tmp),
              output: fifo,
              // The server holds a writer from before the fork: reading starts now, and ends
              // when the job's last process has gone.
              // Bound to the job's context: the lines are logged with the job's id.
              onStarted: AsyncResource.bind(() => {
                reader ??= readFifo(fd, (chunk) => lines.push(chunk));
              }),
              libraryDir: libraryDir(this.runtime, request),
              traceparent: request.trace?.traceparent,
              timeoutMs: request.timeoutMs,
              signal: request.signal?.aborted ? request.signal : controller.signal,
            });
          } finally {
            watch.stop();
            if (reader) {
              await reader.stop(DRAIN_GRACE_MS);
            } else {
              await closeDescriptor(fd);
            }
            lines.end();
            await slot.fifos.release(fifo);
            request.signal?.removeEventListener('abort', stopped);
          }
          // The child could not prepare its run: the server is not trusted with the next one.
          recycle = status.kind === 'setup';
          if (controller.signal.reason === 'write' && status.kind === 'killed') {
            return writeLimitOutcome(limits);
          }
          const writtenAfter = await slot.server.writtenBytes();
          const written =
            writtenBefore !== undefined && writtenAfter !== undefined
              ? writtenAfter - writtenBefore
              : undefined;
          return namedLimit(
            forkOutcome(status, request.timeoutMs),
            limits,
            work,
            tmp,
            scan,
            written,
          );
        },
      );
    } finally {
      this.recycleSlot(slot, recycle);
    }
  }

  /**
   * Cleans a slot after a job (the job's temporary directory, never following what the job put
   * there), then releases it: after the job's outcome is known, so the client does not wait for
   * it, and before the slot's next job. When that fails, or the run asked for it, the server
   * and its slot are made anew; a slot that cannot be is reported by the health check.
   */
  private recycleSlot(slot: Slot, recycle: boolean): void {
    const tmp = join(slot.dir, 'private', 'tmp');
    const clean = async (): Promise<void> => {
      for (const dir of [tmp, ...slot.sessionDirs]) {
        await emptyDirectory(dir);
      }
    };
    const recycled = (recycle ? Promise.reject(new Error('recycle')) : clean())
      .catch(async (error: Error) => {
        if (!recycle) {
          this.runtime.logger.warn(
            `could not clean a fork server's slot (${error.message}); recycling it`,
          );
        }
        slot.application = null;
        await slot.server.recycle();
      })
      .catch((error: Error) =>
        this.runtime.logger.warn(`could not make a fork server's slot anew: ${error.message}`),
      )
      .finally(() => {
        this.recycling.delete(recycled);
        this.releaseSlot(slot);
      });
    this.recycling.add(recycled);
  }
}
