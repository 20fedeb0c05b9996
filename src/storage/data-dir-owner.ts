import {
  closeSync,
  constants as fsConstants,
  existsSync,
  fstatSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { resolve } from 'node:path';
import { DataDirUnsafeError, effectiveUid, secureDataDir } from './private-files';

/** The file in DATA_DIR that names the process owning its embedded database. */
export const OWNER_FILE = 'svc.owner';

/** What the owner file holds: its process, and its database's socket directory once serving. */
export interface DataDirOwner {
  pid: number;
  socketDirectory: string | null;
}

/** DATA_DIR belongs to another live process; `owner.socketDirectory` reaches its database. */
export class DataDirOwnedError extends Error {
  override readonly name = 'DataDirOwnedError';
  constructor(
    readonly dataDir: string,
    readonly owner: DataDirOwner,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by svc process ${owner.pid}; stop it, or set DATA_DIR to another directory`,
    );
  }
}

/** The owner files this process holds: its own pid in one of them is not stale. */
const HELD_HERE = new Set<string>();

/** How long an owner file without a pid counts as being written rather than left broken. */
const UNWRITTEN_GRACE_MS = 5_000;

/** True while a process with this id exists (EPERM: it exists, under another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function parseOwner(text: string): DataDirOwner | null {
  try {
    const parsed = JSON.parse(text) as Partial<DataDirOwner>;
    return typeof parsed.pid === 'number'
      ? { pid: parsed.pid, socketDirectory: parsed.socketDirectory ?? null }
      : null;
  } catch {
    return null;
  }
}

function readOwner(file: string): DataDirOwner | null {
  try {
    return parseOwner(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

/** An owner file read through a descriptor: what it says (null: unwritten) and when it was written. */
interface FoundOwner {
  owner: DataDirOwner | null;
  mtimeMs: number;
}

/** Owner files are a few dozen bytes: more is not one of ours. */
const OWNER_FILE_MAX_BYTES = 4096;

/**
 * Reads the owner file another process made, or null when it is gone. A file this user cannot
 * read, or that is not a regular file of this user's, is not stale: it is refused, never taken
 * over or removed (only its owner removes it).
 */
function findOwner(dataDir: string, file: string): FoundOwner | null {
  let fd: number;
  try {
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      return null;
    }
    throw new DataDirUnsafeError(
      `the lock ${file} of DATA_DIR ${dataDir} cannot be read (${code}): it is not taken for ` +
        'stale, and only its owner removes it; run svc as the user who owns it',
    );
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile() || stats.uid !== effectiveUid() || stats.size > OWNER_FILE_MAX_BYTES) {
      throw new DataDirUnsafeError(
        `the lock ${file} of DATA_DIR ${dataDir} is not a file of this user's (uid ${stats.uid}, ` +
          `this user is uid ${effectiveUid()}): it is not taken for stale, and only its owner ` +
          `removes it; run svc as uid ${stats.uid}, or remove the file if no svc uses DATA_DIR`,
      );
    }
    return { owner: parseOwner(readFileSync(fd, 'utf8')), mtimeMs: stats.mtimeMs };
  } finally {
    closeSync(fd);
  }
}

/**
 * The live process that owns DATA_DIR, as its owner file names it, or null when none does (no
 * file, a file being written, or one left by a process that is gone). Read as DataDirLock reads
 * it, with the same refusals: a DATA_DIR others may write, an owner file that is not this user's.
 * Takes nothing and creates nothing: a missing DATA_DIR has no owner.
 */
export function runningOwner(dataDir: string): DataDirOwner | null {
  if (!existsSync(dataDir)) {
    return null;
  }
  secureDataDir(dataDir);
  const found = findOwner(dataDir, resolve(dataDir, OWNER_FILE));
  const owner = found?.owner ?? null;
  return owner !== null && owner.pid !== process.pid && alive(owner.pid) ? owner : null;
}

/**
 * The lock that makes one process at a time the owner of DATA_DIR's embedded database: the
 * file `DATA_DIR/svc.owner`, created exclusively (O_EXCL), holding the owner's pid and, once it
 * serves, its database's private socket directory. A file whose process is gone (killed with
 * -9, a crash, a power cut) is stale and taken over; a file without a pid counts as held while
 * it is being written (5 s), then as stale. This process's own pid in the file (a restarted
 * container's process often gets the pid of its predecessor) is stale unless this process holds
 * the lock. Only a file of this user's is trusted at all: DATA_DIR must be this user's and
 * closed to others (secureDataDir), and an owner file this user cannot read or does not own is
 * refused, never taken for stale.
 */
export class DataDirLock {
  private constructor(
    private readonly file: string,
    private owner: DataDirOwner,
  ) {}

  /** Takes the lock or throws DataDirOwnedError naming the live owner. */
  static acquire(dataDir: string): DataDirLock {
    secureDataDir(dataDir);
    const file = resolve(dataDir, OWNER_FILE);
    for (let attempt = 0; attempt < 3; attempt++) {
      const owner: DataDirOwner = { pid: process.pid, socketDirectory: null };
      try {
        const fd = openSync(file, 'wx', 0o600);
        try {
          writeFileSync(fd, JSON.stringify(owner));
        } finally {
          closeSync(fd);
        }
        HELD_HERE.add(file);
        return new DataDirLock(file, owner);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
          throw error;
        }
      }
      const found = findOwner(dataDir, file);
      if (found === null) {
        continue;
      }
      const current = found.owner;
      const beingWritten = current === null && Date.now() - found.mtimeMs < UNWRITTEN_GRACE_MS;
      const live =
        current !== null &&
        (current.pid === process.pid ? HELD_HERE.has(file) : alive(current.pid));
      if (beingWritten || live) {
        throw new DataDirOwnedError(dataDir, current ?? { pid: 0, socketDirectory: null });
      }
      // Left by a process that is gone: take it over.
      rmSync(file, { force: true });
    }
    throw new Error(`cannot take the lock ${file}: it keeps coming back`);
  }

  /** Records where the owner's database is reached, for the command line. */
  serving(socketDirectory: string): void {
    this.owner = { ...this.owner, socketDirectory };
    writeFileSync(this.file, JSON.stringify(this.owner));
  }

  release(): void {
    if (HELD_HERE.delete(this.file) && readOwner(this.file)?.pid === this.owner.pid) {
      rmSync(this.file, { force: true });
    }
  }
}
