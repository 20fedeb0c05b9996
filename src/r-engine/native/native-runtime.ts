import type { PackageLibrary } from './package-library';
import type { ScriptRunRequest } from '../r-engine';
import type { RLauncher } from '../launch/r-launcher';
import type { JobLimits } from './run-limits';

export interface EngineLogger {
  log(message: string): void;
  warn(message: string): void;
}

/** What the native engine's runners share: set up by the engine, read when a job runs. */
export interface NativeRuntime {
  readonly rscript: string;
  /** The launcher in force: final once the engine has started. */
  readonly launcher: RLauncher;
  /** Private to the service (0711: the sandbox user may pass, never list) while it runs. */
  readonly root: string | undefined;
  /** The applications' R packages on this node. */
  readonly packages: PackageLibrary | null;
  readonly logger: EngineLogger;
  limits(timeoutMs: number): JobLimits;
}

/**
 * The job's library: its application's environment, else its application's package library
 * ('' when there is none to put first).
 */
export function libraryDir(runtime: NativeRuntime, request: ScriptRunRequest): string {
  if (request.environmentLibrary) {
    return request.environmentLibrary;
  }
  return runtime.packages && request.applicationName
    ? runtime.packages.dirOf(request.applicationName)
    : '';
}
