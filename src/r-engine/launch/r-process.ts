import { type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { evaluation, killProcessGroup, type RLauncher } from './r-launcher';

/** After R exits, how long to wait for its pipes to drain before giving up on them. */
export const DRAIN_GRACE_MS = 1_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Resolves when the child has exited and its pipes are drained (or the grace has passed). */
export function waitForExit(child: ChildProcess): Promise<Exit> {
  return new Promise((resolve, reject) => {
    let exit: Exit | undefined;
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      // A grandchild that left the process group can hold the pipes open; do not wait for it.
      setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        resolve({ code, signal });
      }, DRAIN_GRACE_MS).unref();
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) =>
      resolve(exit ?? { code, signal }),
    );
  });
}

/** A spawn that failed for want of a runnable R (retryable on another node), not a job's fault. */
export function isSpawnFailure(error: unknown): error is NodeJS.ErrnoException {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'EACCES' || code === 'EPERM' || code === 'ENOEXEC';
}

/**
 * Evaluates a line of R in a short-lived process started through `launcher` (so in its
 * sandbox), in a directory of its own under `root`, and returns what it printed.
 */
export async function evaluateR(
  launcher: RLauncher,
  root: string,
  code: string,
  timeoutMs: number,
): Promise<string> {
  const dir = await mkdtemp(join(root, 'eval-'));
  try {
    launcher.makeWritable(dir);
    const child = launcher.spawn(evaluation(code, dir));
    const output: Buffer[] = [];
    const errors: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk));
    const timer = setTimeout(() => killProcessGroup(child), timeoutMs);
    try {
      const exit = await waitForExit(child);
      if (exit.code !== 0) {
        const detail = Buffer.concat(errors).toString('utf8').trim().split('\n').pop();
        throw new Error(
          exit.signal !== null
            ? `killed by ${exit.signal}`
            : `exit status ${String(exit.code)}${detail ? `: ${detail}` : ''}`,
        );
      }
      return Buffer.concat(output).toString('utf8');
    } finally {
      clearTimeout(timer);
      killProcessGroup(child);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
