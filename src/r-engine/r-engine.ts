import type { REngineConfig } from '../config/config-slices';
import type { FunctionCallEngine } from './function-call-engine';
import type { JobProgress } from './job-progress';
import type { EnvironmentStore } from './native/environment-store';
import type { PackageLibrary } from './native/package-library';
import type { FunctionLibrarySource } from './function-library';
import type { TraceCarrier } from '../tracing/tracing';
/**
 * One interface for every way the service runs R. A script run happens in a working directory
 * on the host that the caller has prepared (job files, script, configuration.txt); the engine
 * leaves every file the script wrote in that directory; R's console output reaches the caller
 * line by line (`onOutput`), and a file named `out.log` there is never a result file.
 */
export type REngineKind = 'native' | 'webr';
/** What isolates R code from the service: bubblewrap, nothing, or webR's WebAssembly machine. */
export type RIsolation = 'bwrap' | 'none' | 'webassembly';

export interface ScriptRunRequest {
  jobId: string;
  /** Host directory that holds the job's files; R's working directory for the run. */
  workDir: string;
  /** File name (inside workDir) of the R script to source. */
  scriptName: string;
  timeoutMs: number;
  /** Aborted when the worker gives the job up (lease lost, shutdown): stop R at once. */
  signal?: AbortSignal;
  /** The job's application: its managed packages (PUT /admin/packages) come first for R. */
  applicationName?: string;
  /**
   * The library of the application's environment (docs/environments.md): then R sees it and R's
   * own packages only, instead of the node's libraries and the application's uploads.
   */
  environmentLibrary?: string;
  /** The job's application may use the network (APPLICATION_SETTINGS networkAllowed). */
  network?: boolean;
  /** The run's span (tracing on): R gets it as TRACEPARENT and SVC_TRACE_ID (traceEnvironment). */
  trace?: TraceCarrier | null;
  /** Called once per line that R writes to stdout or stderr. */
  onOutput?: (stream: 'stdout' | 'stderr', line: string) => void;
  /** Called each time the script reports its progress with svc_progress. */
  onProgress?: (progress: JobProgress) => void;
}

export type ScriptRunOutcome = (
  | { status: 'succeeded' }
  /**
   * The script failed: an R error (message is R's own), an abnormal exit, the time limit, or
   * another limit of the sandbox (memory, CPU, processes, file size, bytes written), named.
   */
  | { status: 'failed'; reason: 'r-error' | 'exit' | 'timeout' | 'limit'; message: string }
) & {
  /** CPU milliseconds R used (and what it waited for), where the engine measures them. */
  rCpuMs?: number;
};

/** R could not be started or reached: the job was not run and may be retried elsewhere. */
export class REngineUnavailableError extends Error {
  override readonly name = 'REngineUnavailableError';
}

export interface REngine {
  readonly kind: REngineKind;
  /** How many scripts it can run at once; a worker never claims more jobs than this. */
  readonly maxConcurrentRuns: number;
  /** The isolation in force for R code (known after start()). */
  readonly sandbox: RIsolation;
  /** Checks that R can run; throws with one clear line when it cannot. */
  start(): Promise<void>;
  /** `R.version.string`, e.g. "R version 4.2.2 Patched (2022-11-10 r83330)". */
  version(): Promise<string>;
  /** Evaluates `1+1` and says whether R answered 2 (health checks). */
  healthy(): Promise<boolean>;
  runScript(request: ScriptRunRequest): Promise<ScriptRunOutcome>;
  /**
   * The node's managed package libraries (native R, once started); null where the engine cannot
   * install packages (webR: packages are built for WebAssembly elsewhere).
   */
  readonly packages: PackageLibrary | null;
  /**
   * Where applications' environments are built and kept (native R, once started); null where
   * the engine cannot build packages (webR).
   */
  readonly environments: EnvironmentStore | null;
  /**
   * The engine that serves this node's function calls, reading the applications' libraries from
   * `libraries`: native R a pool of warm sessions started through its own launcher (the same
   * sandbox and limits), webR its one instance, in turn with script runs.
   */
  functionCalls(config: REngineConfig, libraries: FunctionLibrarySource): FunctionCallEngine;
  /** Kills whatever runs and releases the engine's resources. */
  stop(): Promise<void>;
}

export const R_ENGINE = Symbol('R_ENGINE');

/** The name of R's console log in a job's working directory; never a result file. */
export const R_LOG_FILE = 'out.log';
