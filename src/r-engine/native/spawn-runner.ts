import { type ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { traceEnvironment } from '../../tracing/tracing';
import { routeOutput } from '../job-progress';
import { removeTree } from '../job-tree/job-tree-removal';
import { libraryDir, type NativeRuntime } from './native-runtime';
import { LineSplitter } from '../launch/output-lines';
import { REngineUnavailableError, type ScriptRunOutcome, type ScriptRunRequest } from '../r-engine';
import { killProcessGroup } from '../launch/r-launcher';
import { isExecutable } from '../launch/r-sandbox';
import { DRAIN_GRACE_MS, isSpawnFailure, waitForExit, type Exit } from '../launch/r-process';
import {
  closeDescriptor,
  collectReport,
  FifoPool,
  openFifoForReading,
  openFifoForWriting,
} from './run-channel';
import { withRunDirectory } from './run-directory';
import {
  exitOutcome,
  namedLimit,
  OutputScan,
  rLimits,
  watchWrites,
  type RunReport,
} from './run-limits';

/**
 * Runs each script job in a fresh Rscript process (R_SCRIPT_MODE=spawn, or a job that needs a
 * sandbox of its own such as one allowed the network). R's output comes on its pipes, its
 * report of how it ended on descriptor 3, a FIFO the service made and reads.
 */
export class SpawnRunner {
  /** Each running job's abort handle and a promise that settles when its R has gone. */
  private readonly running = new Map<AbortController, Promise<void>>();
  /** The report FIFOs of spawned runs (the fork slots have their own). */
  private fifos: FifoPool | null = null;

  constructor(private readonly runtime: NativeRuntime) {}

  /** Runs under way from their first step (a run not yet in `running` has not started R). */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** The pool being made or made: one promise, so that close() can wait for its making. */
  private pool: Promise<FifoPool> | null = null;
  private stopped = false;

  /**
   * Refuses new runs, stops every running job as if the engine stopped, waits until their R has
   * gone and their directories are removed, and makes no more FIFOs: afterwards nothing of this
   * runner adds to the runtime directory, which the engine then removes.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const controller of this.running.keys()) {
      controller.abort('stopped');
    }
    await Promise.all([...this.inFlight].map((run) => run.catch(() => undefined)));
    await this.close();
  }

  /** Takes runs again after stop() (the engine started again). */
  resume(): void {
    this.stopped = false;
  }

  /** Makes no more FIFOs in the current pool (its sandbox user changed, or stopping); a new pool on next use. */
  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    await (await pool?.catch(() => null))?.close();
  }

  async run(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    if (this.stopped) {
      throw new REngineUnavailableError('the R engine is stopping');
    }
    const run = this.runOnce(request);
    this.inFlight.add(run);
    try {
      return await run;
    } finally {
      this.inFlight.delete(run);
    }
  }

  private async runOnce(request: ScriptRunRequest): Promise<ScriptRunOutcome> {
    // prlimit would turn a missing Rscript into an exit status; check first so it stays retryable.
    if (!isExecutable(this.runtime.rscript)) {
      throw new REngineUnavailableError(
        `Rscript not found or not executable: ${this.runtime.rscript}`,
      );
    }
    const root = this.runtime.root ?? tmpdir();
    const parent = await mkdtemp(join(root, 'run-'));
    const limits = this.runtime.limits(request.timeoutMs);
    try {
      return await withRunDirectory(
        this.runtime.launcher,
        request.workDir,
        parent,
        false,
        async (work, tmp) => {
          // R's report of its end comes on descriptor 3, a FIFO the service made and reads.
          const fifos = await this.fifoPool();
          const fifo = await fifos.take();
          const reportFd = await openFifoForReading(fifo);
          const report = collectReport(reportFd);
          const controller = new AbortController();
          let child: ChildProcess;
          try {
            const writeFd = await openFifoForWriting(fifo);
            try {
              child = this.runtime.launcher.spawn({
                args: [
                  this.runtime.launcher.rSource('script-wrapper.R'),
                  request.scriptName,
                  String(limits.cpuSeconds),
                  this.runtime.launcher.rSource('svc-env.R'),
                  this.runtime.launcher.rSource('run-job.R'),
                  libraryDir(this.runtime, request),
                ],
                cwd: work,
                home: work,
                tmp,
                writable: [work, tmp],
                readable: this.runtime.packages?.readableRoots ?? [],
                network: request.network === true,
                limits: rLimits(limits),
                env: traceEnvironment(request.trace ?? null),
                stdio: ['ignore', 'pipe', 'pipe', writeFd],
              });
            } finally {
              // The child has its own copy; the report ends when R and what it started are gone.
              await closeDescriptor(writeFd);
            }
          } catch (error) {
            await report.stop(0);
            await fifos.release(fifo);
            throw isSpawnFailure(error) ? new REngineUnavailableError(error.message) : error;
          }
          let settle = (): void => undefined;
          const settled = new Promise<void>((resolve) => (settle = resolve));
          this.running.set(controller, settled);
          if (this.stopped) {
            controller.abort('stopped'); // the engine began stopping while R was being started
          }
          controller.signal.addEventListener('abort', () => killProcessGroup(child), {
            once: true,
          });
          // The worker gave the job up (lease lost, shutdown): stop R as if the engine stopped.
          const giveUp = (): void => controller.abort('stopped');
          request.signal?.addEventListener('abort', giveUp, { once: true });
          if (request.signal?.aborted) {
            giveUp(); // given up (a cancel) while R was being started
          }
          const timer = setTimeout(() => controller.abort('timeout'), request.timeoutMs);
          const watch = watchWrites([work, tmp], limits.writeMb, () => controller.abort('write'));
          const output = routeOutput(request);
          const scan = new OutputScan();
          for (const stream of ['stdout', 'stderr'] as const) {
            const splitter = new LineSplitter((line) => {
              scan.line(line);
              output?.(stream, line);
            });
            child[stream]?.on('data', (chunk: Buffer) => splitter.push(chunk));
            child[stream]?.on('end', () => splitter.end());
          }
          let exit: Exit;
          let reportBytes: Buffer;
          try {
            exit = await waitForExit(child);
          } catch (error) {
            throw isSpawnFailure(error)
              ? new REngineUnavailableError(
                  `cannot start ${this.runtime.rscript}: ${error.message}`,
                )
              : error;
          } finally {
            clearTimeout(timer);
            watch.stop();
            request.signal?.removeEventListener('abort', giveUp);
            // Background processes the script left behind die with the job (and its sandbox).
            killProcessGroup(child);
            reportBytes = await report.stop(DRAIN_GRACE_MS);
            await fifos.release(fifo);
            this.running.delete(controller);
            settle();
          }
          const runReport = spawnReport(reportBytes);
          const outcome = exitOutcome(controller.signal, exit, runReport, limits);
          return namedLimit(outcome, limits, work, tmp, scan, runReport.writtenBytes);
        },
      );
    } finally {
      await removeTree(parent).catch((error: Error) =>
        this.runtime.logger.warn(`could not remove a run's directory: ${error.message}`),
      );
    }
  }

  /** The spawned runs' FIFOs, in a directory of the service's (made on first use). */
  private fifoPool(): Promise<FifoPool> {
    if (this.stopped) {
      return Promise.reject(new REngineUnavailableError('the R engine is stopping'));
    }
    if (!this.pool) {
      const making = (async () => {
        const dir = this.runtime.root
          ? join(this.runtime.root, 'fifos')
          : await mkdtemp(join(tmpdir(), 'svc-fifos-'));
        await mkdir(dir, { recursive: true, mode: 0o711 });
        await chmod(dir, 0o711);
        return new FifoPool(dir, this.runtime.launcher.sandboxUid);
      })();
      this.pool = making;
      making.catch(() => {
        if (this.pool === making) {
          this.pool = null;
        }
      });
    }
    return this.pool;
  }
}

/**
 * A spawned run's report from descriptor 3: "<kind> <cpu ms> <bytes written> <message>",
 * bounded and distrusted (the job may write there too: then it reports nothing usable).
 */
function spawnReport(bytes: Buffer): RunReport {
  const text = bytes.toString('utf8');
  const [kind = '', cpu = '', written = ''] = text.split(' ', 3);
  const count = (field: string): number | undefined => {
    const value = Number(field);
    return field !== '' && Number.isFinite(value) && value >= 0 ? value : undefined;
  };
  const cpuMs = count(cpu);
  const writtenBytes = count(written);
  const figures = {
    ...(cpuMs === undefined ? {} : { cpuMs }),
    ...(writtenBytes === undefined ? {} : { writtenBytes }),
  };
  if (kind === 'r-error') {
    const message = text.slice(kind.length + cpu.length + written.length + 3).replace(/\n$/, '');
    return { kind, message: message || 'R reported an error', ...figures };
  }
  return { kind: kind === 'ok' ? 'ok' : 'none', message: '', ...figures };
}
