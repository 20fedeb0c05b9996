import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { resolve } from 'node:path';

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

function statMtime(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function readOwner(file: string): DataDirOwner | null {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<DataDirOwner>;
    return typeof parsed.pid === 'number'
      ? { pid: parsed.pid, socketDirectory: parsed.socketDirectory ?? null }
      : null;
  } catch {
    return null;
  }
}

/**
 * The lock that makes one process at a time the owner of DATA_DIR's embedded database: the
 * file `DATA_DIR/svc.owner`, created exclusively (O_EXCL), holding the owner's pid and, once it
 * serves, its database's private socket directory. A file whose process is gone (killed with
 * -9, a crash, a power cut) is stale and taken over; a file without a pid counts as held while
 * it is being written (5 s), then as stale. This process's own pid in the file (a restarted
 * container's process often gets the pid of its predecessor) is stale unless this process holds
 * the lock.
 */
export class DataDirLock {
  private constructor(
    private readonly file: string,
    private owner: DataDirOwner,
  ) {}

  /** Takes the lock or throws DataDirOwnedError naming the live owner. */
  static acquire(dataDir: string): DataDirLock {
    mkdirSync(dataDir, { recursive: true });
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
      const current = readOwner(file);
      const beingWritten = current === null && Date.now() - statMtime(file) < UNWRITTEN_GRACE_MS;
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
