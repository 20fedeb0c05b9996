import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PackageLibrary } from '../native/package-library';
import type { RLauncher, RLimits } from '../launch/r-launcher';
import { readBoundedLines } from '../launch/output-lines';

/** The R process of a function-call session (RSession): its directory, its start and its console. */

export interface RSessionOptions {
  /** Starts R (sandbox, environment, limits): the same launcher as the node's script jobs. */
  launcher: RLauncher;
  /** Limits of the session's R; a call's time limit is the session's timer, not a CPU limit. */
  limits: RLimits | null;
  /** The session may open network connections (its application's `networkAllowed`). */
  network: boolean;
  /** The node's managed packages: bound read-only, the application's library first for R. */
  packages: PackageLibrary | null;
  /** R's console output, line by line (each cut at CONSOLE_LINE_MAX_BYTES). */
  onOutput: (stream: 'stdout' | 'stderr', line: string) => void;
  /**
   * Largest answer a function may give, in bytes (MAX_REQUEST_BYTES): R refuses a larger value
   * itself, and a frame on the answer pipe that announces more ends the session.
   */
  maxAnswerBytes: number;
}

/** R's console output is logged, not kept: a longer line is cut there. */
export const CONSOLE_LINE_MAX_BYTES = 8 * 1024;
/** Console output logged per call; the rest is read and dropped (R never blocks on the pipe). */
const CONSOLE_LOG_MAX_BYTES_PER_CALL = 64 * 1024;
/**
 * A new session's directory (mode 0700 from mkdtemp) with `tmp/` for R and `answers`, the FIFO R
 * answers on.
 */
export function makeSessionDirectory(): { dir: string; fifo: string } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-session-'));
  mkdirSync(join(dir, 'tmp'));
  const fifo = join(dir, 'answers');
  execFileSync('mkfifo', ['-m', '600', fifo]);
  return { dir, fifo };
}

/**
 * Starts the session's R (`r/session.R`) through the launcher, in its directory `dir` (the only
 * place it may write), answering on `fifo`.
 */
export function spawnSessionR(options: RSessionOptions, dir: string, fifo: string): ChildProcess {
  const { launcher } = options;
  const tmp = join(dir, 'tmp');
  // Sandboxed R runs as another user when the service is root: its directory becomes its own.
  if (launcher.sandboxUid !== null) {
    for (const path of [dir, tmp, fifo]) {
      chownSync(path, launcher.sandboxUid, launcher.sandboxUid);
    }
  }
  return launcher.spawn({
    args: [
      launcher.rSource('session.R'),
      fifo,
      launcher.rSource('call-function.R'),
      launcher.rSource('svc-env.R'),
      String(options.maxAnswerBytes),
    ],
    cwd: dir,
    home: dir,
    tmp,
    writable: [dir],
    readable: options.packages?.readableRoots ?? [],
    network: options.network,
    limits: options.limits,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/**
 * Logs R's console output (stdout and stderr) line by line, each line cut at
 * CONSOLE_LINE_MAX_BYTES; past CONSOLE_LOG_MAX_BYTES_PER_CALL in `budget.logged` (the session
 * sets it to 0 for each call) the rest is read and dropped.
 */
export function logConsole(
  child: ChildProcess,
  onOutput: RSessionOptions['onOutput'],
  budget: { logged: number },
): void {
  for (const stream of ['stdout', 'stderr'] as const) {
    const input = child[stream];
    if (input) {
      readBoundedLines(input, CONSOLE_LINE_MAX_BYTES, (line, bytes) => {
        const before = budget.logged;
        budget.logged += bytes;
        if (budget.logged <= CONSOLE_LOG_MAX_BYTES_PER_CALL) {
          onOutput(stream, line);
        } else if (before <= CONSOLE_LOG_MAX_BYTES_PER_CALL) {
          onOutput(stream, '(further console output of this call is not logged)');
        }
      });
    }
  }
}

/** Removes a directory tree a sandbox could write, never following a link (see RSession.onGone). */
export function removeSessionDirectory(dir: string): Promise<void> {
  return new Promise((resolve) => {
    execFile('rm', ['-rf', '--one-file-system', '--', dir], () => resolve());
  });
}
