import { chmodSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { RLauncher } from '../launch/r-launcher';

/**
 * Runs `body` in a directory for one run under the runtime root, `parent`. In a sandbox the
 * job's directory moves in (a rename: same file system, no copy), so the sandbox binds only
 * private paths (a fork server's sandbox is made before its jobs exist), and moves back after.
 * `parent` and `private/` are the service's (0711: the sandbox user passes, never writes), so a
 * job cannot swap the names the service moves or cleans for links; only `work/` and
 * `private/tmp/` are the job's. Without a sandbox the work directory stays where it is.
 * `private/tmp` is made here unless the caller prepared it (a fork slot does that ahead of its
 * next job).
 */
export async function withRunDirectory<T>(
  launcher: RLauncher,
  workDir: string,
  parent: string,
  privatePrepared: boolean,
  body: (runWork: string, tmp: string) => Promise<T>,
): Promise<T> {
  const sandboxed = launcher.sandbox === 'bwrap';
  const runWork = sandboxed ? join(parent, 'work') : workDir;
  if (!privatePrepared) {
    preparePrivate(launcher, parent);
  }
  let moved = false;
  try {
    if (sandboxed) {
      renameSync(workDir, runWork);
      moved = true;
    }
    launcher.makeWritable(runWork);
    return await body(runWork, join(parent, 'private', 'tmp'));
  } finally {
    if (moved) {
      // The name work/ is in the service's directory: the job cannot have replaced it.
      renameSync(runWork, workDir);
    }
  }
}

/**
 * A run's private/ (the service's, 0711) and private/tmp (the job's temporary directory,
 * handed to the sandbox user). Made fresh: the caller has removed an earlier one.
 */
export function preparePrivate(launcher: RLauncher, parent: string): void {
  const privateDir = join(parent, 'private');
  mkdirSync(privateDir);
  // chmod: the service's umask (PRIVATE_UMASK) would leave it closed to the sandbox user.
  chmodSync(privateDir, 0o711);
  chmodSync(parent, 0o711);
  const tmp = join(privateDir, 'tmp');
  mkdirSync(tmp, { mode: 0o700 });
  launcher.makeWritable(tmp);
}
