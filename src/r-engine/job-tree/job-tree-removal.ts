import { randomBytes } from 'node:crypto';
import { rename, rmdir, unlink } from 'node:fs/promises';
import {
  DIRECTORY_BATCH,
  describeJobPath,
  entryPath,
  errorCode,
  isNotDirectory,
  nameOf,
  openChildDirectory,
  openRootDirectory,
  readDirectory,
  type OpenDirectory,
} from './job-tree';

/** Removing a job's tree, through the descriptors of job-tree.ts. */

/**
 * Directory levels removeTree holds open at once; a directory below that is renamed up into the
 * root (through the descriptors) and removed from there, so any depth is removed with a bounded
 * number of descriptors.
 */
const REMOVE_OPEN_DEPTH = 64;

/**
 * Passes over one directory that remove nothing or leave something behind before removal gives
 * up: entries can only keep appearing while a process of the job still runs.
 */
const REMOVE_MAX_STALLS = 100;

/**
 * Removes `path` and everything below it without following a link: a symbolic link there
 * (`path` itself included) is removed, not its target. Safe while a process swaps directories
 * for links meanwhile: every unlink, rmdir and rename goes through a directory descriptor the
 * service opened. `path`'s parent must be the service's (not writable by the job). A missing
 * path is no error; anything that cannot be removed throws.
 */
export async function removeTree(path: string): Promise<void> {
  for (let stalls = 0; ; stalls += 1) {
    let root: OpenDirectory;
    try {
      root = await openRootDirectory(path);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') {
        return;
      }
      if (isNotDirectory(error)) {
        await unlink(path).catch(ignoreMissing);
        return;
      }
      throw error;
    }
    try {
      await emptyOpenDirectory(root);
    } finally {
      await root.handle.close();
    }
    try {
      await rmdir(path);
      return;
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT') {
        return;
      }
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || stalls >= REMOVE_MAX_STALLS) {
        throw error;
      }
    }
  }
}

/** Removes everything in the directory `path` (not following links), keeping the directory. */
export async function emptyDirectory(path: string): Promise<void> {
  let root: OpenDirectory;
  try {
    root = await openRootDirectory(path);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') {
      return;
    }
    throw error;
  }
  try {
    await emptyOpenDirectory(root);
  } finally {
    await root.handle.close();
  }
}

function ignoreMissing(error: unknown): void {
  if (errorCode(error) !== 'ENOENT') {
    throw error;
  }
}

/** Empties `root`; directories deeper than REMOVE_OPEN_DEPTH are moved up into it first. */
async function emptyOpenDirectory(root: OpenDirectory): Promise<void> {
  const deep = { root, moved: 0 };
  await emptyDirectoryAt(root, 0, deep);
}

/**
 * Empties the open directory `dir` at `depth` below the root, a batch of names at a time (memory
 * stays bounded however many entries it has). A batch that reached the end of the directory with
 * everything removed ends it; otherwise another pass reads it again.
 */
async function emptyDirectoryAt(
  dir: OpenDirectory,
  depth: number,
  deep: { root: OpenDirectory; moved: number },
): Promise<void> {
  for (let stalls = 0; ;) {
    const movedBefore = deep.moved;
    const { entries: batch, ended } = await readDirectory(dir, DIRECTORY_BATCH);
    let removed = 0;
    for (const entry of batch) {
      if (await removeEntry(dir, nameOf(entry), entry.isDirectory(), depth, deep)) {
        removed += 1;
      }
    }
    // At the root, a pass that moved a deep directory up is followed by one that removes it.
    if (ended && removed === batch.length && (depth > 0 || deep.moved === movedBefore)) {
      return;
    }
    if (removed < batch.length) {
      stalls += 1;
      if (stalls > REMOVE_MAX_STALLS) {
        throw new Error(
          `entries kept appearing in a directory being removed (${describeJobPath(nameOf(batch[0]))} among them)`,
        );
      }
    }
  }
}

/**
 * Removes one entry of `dir`; false when something is still there (a directory that refilled,
 * a link swapped back into a directory): the directory's next pass takes it again.
 */
async function removeEntry(
  dir: OpenDirectory,
  name: Buffer,
  looksLikeDirectory: boolean,
  depth: number,
  deep: { root: OpenDirectory; moved: number },
): Promise<boolean> {
  const at = entryPath(dir, name);
  if (!looksLikeDirectory) {
    try {
      // unlink never follows its last component.
      await unlink(at);
      return true;
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT') {
        return true;
      }
      if (!isDirectoryUnlinked(error)) {
        throw error;
      }
    }
  }
  if (depth + 1 > REMOVE_OPEN_DEPTH) {
    // Into the root under a fresh name; the root's next pass removes it from there.
    deep.moved += 1;
    const newName = Buffer.from(`.removing-${deep.moved}-${randomBytes(6).toString('hex')}`);
    try {
      await rename(at, entryPath(deep.root, newName));
    } catch (error) {
      if (errorCode(error) === 'ENOENT') {
        return true;
      }
      throw error;
    }
    return true;
  }
  let child: OpenDirectory;
  try {
    child = await openChildDirectory(dir, name);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') {
      return true;
    }
    if (isNotDirectory(error)) {
      // Swapped for a link or a file meanwhile: the name goes, not what it points at.
      try {
        await unlink(at);
        return true;
      } catch (unlinkError) {
        return unlinkRetryable(unlinkError);
      }
    }
    throw error;
  }
  try {
    await emptyDirectoryAt(child, depth + 1, deep);
  } finally {
    await child.handle.close();
  }
  try {
    await rmdir(at);
    return true;
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ENOENT') {
      return true;
    }
    if (code === 'ENOTDIR') {
      // A link or a file under the name now.
      try {
        await unlink(at);
        return true;
      } catch (unlinkError) {
        return unlinkRetryable(unlinkError);
      }
    }
    if (code === 'ENOTEMPTY' || code === 'EEXIST') {
      return false;
    }
    throw error;
  }
}

/** After a swap: gone is done, a directory again is for the next pass, anything else throws. */
function unlinkRetryable(error: unknown): boolean {
  const code = errorCode(error);
  if (code === 'ENOENT') {
    return true;
  }
  if (isDirectoryUnlinked(error)) {
    return false;
  }
  throw error;
}

/** unlink's answer for a directory: EISDIR on Linux, EPERM elsewhere (where EPERM is also a refusal). */
function isDirectoryUnlinked(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'EISDIR' || (code === 'EPERM' && process.platform !== 'linux');
}
