import type { JobProgress } from './job-progress';
/**
 * Function calls (SPEC §5.2, §5.3): the payload of an XML or JSON job goes as one string to the
 * application's `svcXmlService` / `svcJsonService`, defined by the `.R` files of its catalog
 * section `R_FUNCTIONS`; the function answers one string. Native R serves calls from a pool of
 * warm sessions (`r-session-pool.ts`), webR from its single instance (`webr.engine.ts`).
 */
export const FUNCTION_NAMES = ['svcXmlService', 'svcJsonService'] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];

export interface FunctionCallRequest {
  applicationName: string;
  /** svcXmlService or svcJsonService; with `exported`, any function the application exports. */
  functionName: string;
  /** The request body, passed to R as one character string. */
  payload: string;
  /**
   * An exported function's call (src/functions/): the payload is a JSON object of its named
   * arguments, converted as jsonlite does, and its value is answered as JSON.
   */
  exported?: boolean;
  /** Time limit of the call once R has it; a session that exceeds it is killed. */
  timeoutMs: number;
  /** Aborted when the caller gives the call up (lease lost, shutdown): R is stopped. */
  signal?: AbortSignal;
  /**
   * The library of the application's environment (docs/environments.md): the session that
   * serves the call sees it and R's own packages only. A session serves one library all its
   * life: one of another library (a switch) is replaced by a fresh one.
   */
  environmentLibrary?: string;
  /** Served before queued calls that are not urgent (synchronous /process calls). */
  urgent?: boolean;
  /** Called each time the function reports its progress with svc_progress. */
  onProgress?: (progress: JobProgress) => void;
}

export type FunctionCallFailure =
  /** R signalled an error (in the function or while sourcing the library). */
  | 'r-error'
  /** The application's library defines no function of that name. */
  | 'missing-function'
  /** The function returned something other than one non-NA character string. */
  | 'not-a-string'
  /** The function's answer is larger than MAX_REQUEST_BYTES. */
  | 'too-large'
  /** Exported functions: the body is not a JSON object, or names an argument it does not take. */
  | 'bad-argument'
  /** Exported functions: the value cannot be written as JSON. */
  | 'not-json'
  | 'timeout'
  /** R ended (crashed, was killed, quit) while it ran the call. */
  | 'session-died';

/** The failures R itself reports (the others are the engine's): what an answer frame may name. */
export const R_REPORTED_FAILURES: ReadonlySet<string> = new Set<FunctionCallFailure>([
  'r-error',
  'missing-function',
  'not-a-string',
  'too-large',
  'bad-argument',
  'not-json',
]);

export type FunctionCallOutcome =
  | { status: 'succeeded'; value: string }
  | { status: 'failed'; reason: FunctionCallFailure; message: string };

export interface FunctionCallStats {
  /** Sessions (or instances) that exist, starting ones included. */
  size: number;
  /** Running a call. */
  busy: number;
  /** Ready for a call. */
  idle: number;
  /** Calls waiting for a session. */
  waiting: number;
}

/**
 * Runs function calls. `callFunction` resolves with the outcome of the call; it throws
 * `REngineUnavailableError` only when R could not be reached at all (the call may be retried).
 */
export interface FunctionCallEngine {
  start(): Promise<void>;
  callFunction(request: FunctionCallRequest): Promise<FunctionCallOutcome>;
  stats(): FunctionCallStats;
  stop(): Promise<void>;
}

export const FUNCTION_CALL_ENGINE = Symbol('FUNCTION_CALL_ENGINE');

/** SPEC §5.2's message when the library lacks the function. */
export function missingFunctionMessage(applicationName: string, functionName: string): string {
  return `application ${applicationName} defines no ${functionName} function`;
}
