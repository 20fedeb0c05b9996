import { chmodSync, lstatSync, mkdirSync, readdirSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';

/**
 * The process umask of the service and of the command line: what they create is their user's
 * only, whatever umask they were started with. Directories that sandboxed R must reach (another
 * user when the service is root) are opened explicitly with chmod, which the umask does not cut.
 */
export const PRIVATE_UMASK = 0o077;

/** Sets PRIVATE_UMASK for this process (and the processes it starts); call before creating files. */
export function usePrivateUmask(): void {
  process.umask(PRIVATE_UMASK);
}

/** This process's effective uid (0 where there is none, as on Windows). */
export function effectiveUid(): number {
  return process.geteuid?.() ?? 0;
}

/** DATA_DIR (or what is in it) cannot be made private: the message says what to change. */
export class DataDirUnsafeError extends Error {
  override readonly name = 'DataDirUnsafeError';
}

const octal = (mode: number): string => `0${(mode & 0o7777).toString(8)}`;

/**
 * Makes DATA_DIR this user's alone before anything is read from it or written to it: a missing
 * one is created (mode 0700), one that is not a directory, belongs to another user or that its
 * group or other users may write is refused (another user could replace its database, its lock
 * or the socket the lock names), and one that others may read or search is closed (0700).
 */
export function secureDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const stats = statSync(dataDir);
  const uid = effectiveUid();
  if (!stats.isDirectory()) {
    throw new DataDirUnsafeError(`DATA_DIR ${dataDir} is not a directory; set DATA_DIR to one`);
  }
  if ((stats.mode & 0o022) !== 0) {
    throw new DataDirUnsafeError(
      `DATA_DIR ${dataDir} may be written by ${(stats.mode & 0o002) !== 0 ? 'other users' : 'its group'} ` +
        `(mode ${octal(stats.mode)}): they could replace its database and its lock; ` +
        `run \`chmod 700 ${dataDir}\` (or set DATA_DIR to a directory of this user's alone)`,
    );
  }
  if (stats.uid !== uid) {
    throw new DataDirUnsafeError(
      `DATA_DIR ${dataDir} belongs to uid ${stats.uid}, not to this process's user (uid ${uid}): ` +
        `run svc as uid ${stats.uid}, or, if this user is to own it from now on, ` +
        `\`chown -R ${uid} ${dataDir}\``,
    );
  }
  if ((stats.mode & 0o077) !== 0) {
    chmodSync(dataDir, 0o700);
  }
}

/**
 * Takes every permission of the group and of other users off what is below `dir` (the files of
 * an older version, or files a library created with modes of its own), without following
 * symbolic links. Returns how many entries it changed.
 */
export function makeTreePrivate(dir: string): number {
  let changed = 0;
  const close = (path: string, stats: Stats): void => {
    if ((stats.mode & 0o077) === 0) {
      return;
    }
    try {
      chmodSync(path, stats.mode & 0o7700);
      changed++;
    } catch (error) {
      throw new DataDirUnsafeError(
        `${path} (uid ${stats.uid}, mode ${octal(stats.mode)}) cannot be made private ` +
          `(${(error as NodeJS.ErrnoException).code}): give it to this process's user (uid ${effectiveUid()})`,
      );
    }
  };
  const walk = (path: string): void => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      if (entry.isSymbolicLink()) {
        continue;
      }
      const child = join(path, entry.name);
      close(child, lstatSync(child));
      if (entry.isDirectory()) {
        walk(child);
      }
    }
  };
  walk(dir);
  return changed;
}
