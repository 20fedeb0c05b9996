import { isUtf8 } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { constants, existsSync, type Dirent, type Stats } from 'node:fs';
import {
  lstat,
  open,
  opendir,
  readdir,
  rename,
  rmdir,
  unlink,
  type FileHandle,
} from 'node:fs/promises';

/**
 * The one way the service walks, reads and removes a tree a job could write (its working and
 * temporary directories): through directory descriptors the service opened itself, one name at a
 * time, never following a link.
 *
 * Node has no openat(2), but on Linux `/proc/self/fd/<fd>/<name>` resolves the directory through
 * the descriptor the service holds and then the single component `name`; with O_NOFOLLOW that is
 * openat(fd, name, O_NOFOLLOW), and unlink, rmdir, rename and lstat never follow their last
 * component anyway. So a directory swapped for a symbolic link between two calls only ever
 * redirects a call to the directory the service already opened. Files are opened with
 * O_NONBLOCK (a FIFO cannot block the open) and read only when fstat says they are regular, at
 * most the size the listing saw. Every call goes through libuv's thread pool, never
 * synchronously on the event loop.
 *
 * Where there is no /proc/self/fd (not Linux, where there is no sandbox either) the same calls
 * take the directory's path instead: each name is still checked with lstat and opened with
 * O_NOFOLLOW, but a directory higher up swapped meanwhile is followed.
 */

const {
  O_RDONLY,
  O_DIRECTORY = 0,
  O_NOFOLLOW = 0,
  O_NONBLOCK = 0,
  O_NOCTTY = 0,
} = constants as typeof constants & Record<string, number | undefined>;
const DIRECTORY_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
const FILE_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

/** Checked once, at start-up, on a path no job can write. */
const PROC_FD = process.platform === 'linux' && existsSync('/proc/self/fd');

/** What a job's output cannot be packed for: names the problem and the (escaped) path. */
export class JobOutputError extends Error {
  override readonly name = 'JobOutputError';
}

/** A directory the service opened, and the prefix that names an entry in it through that descriptor. */
interface OpenDirectory {
  handle: FileHandle;
  /** Ends in '/': `/proc/self/fd/<fd>/`, or the directory's own path where there is no /proc. */
  prefix: Buffer;
}

const SLASH = Buffer.from('/');

async function openRootDirectory(path: string): Promise<OpenDirectory> {
  const handle = await open(path, DIRECTORY_FLAGS);
  return {
    handle,
    prefix: Buffer.from(PROC_FD ? `/proc/self/fd/${handle.fd}/` : `${path.replace(/\/+$/, '')}/`),
  };
}

async function openChildDirectory(parent: OpenDirectory, name: Buffer): Promise<OpenDirectory> {
  const handle = await open(entryPath(parent, name), DIRECTORY_FLAGS);
  return {
    handle,
    prefix: PROC_FD
      ? Buffer.from(`/proc/self/fd/${handle.fd}/`)
      : Buffer.concat([parent.prefix, name, SLASH]),
  };
}

/** `name` (one component, no slash) in the open directory `dir`. */
function entryPath(dir: OpenDirectory, name: Buffer): Buffer {
  return Buffer.concat([dir.prefix, name]);
}

/** Entries read from a directory stream at a time. */
const DIRECTORY_BATCH = 128;

/**
 * A directory whose size (fstat's st_size) is at most this is read with one readdir; a larger one
 * is streamed a batch at a time, so a directory of a million entries is never whole in memory.
 * st_size grows with the entries on every Linux file system (ext4 4 KiB per block of some 300
 * names, tmpfs 20 bytes per entry, btrfs and XFS by name bytes): 64 KiB is a few thousand
 * entries at most. One readdir is one call on the thread pool; a stream is four (open, read,
 * read to the end, close), which for a job's few small directories was the larger part of the
 * cost of removing them.
 */
const SMALL_DIRECTORY_BYTES = 64 * 1024;

/** Options that make readdir and opendir give names as Buffers (a name that is not UTF-8 stays exact). */
const BUFFER_NAMES = { encoding: 'buffer' as BufferEncoding };

/**
 * The entries of the open directory, types as the directory reports them (nothing followed):
 * all at once when it is small, else a batch at a time (up to `batch` entries; `ended` when the
 * stream reached its end; the stream is closed before returning).
 */
async function readDirectory(
  dir: OpenDirectory,
  batch: number,
): Promise<{ entries: Dirent[]; ended: boolean }> {
  if ((await dir.handle.stat()).size <= SMALL_DIRECTORY_BYTES) {
    return {
      entries: await readdir(dir.prefix, { ...BUFFER_NAMES, withFileTypes: true }),
      ended: true,
    };
  }
  const stream = await opendir(dir.prefix, { ...BUFFER_NAMES, bufferSize: DIRECTORY_BATCH });
  const entries: Dirent[] = [];
  try {
    while (entries.length < batch) {
      const entry = await stream.read();
      if (!entry) {
        return { entries, ended: true };
      }
      entries.push(entry);
    }
    return { entries, ended: false };
  } finally {
    await stream.close();
  }
}

/** Every entry of the open directory, read as readDirectory does, the stream open while iterated. */
async function* directoryEntries(dir: OpenDirectory): AsyncGenerator<Dirent> {
  if ((await dir.handle.stat()).size <= SMALL_DIRECTORY_BYTES) {
    yield* await readdir(dir.prefix, { ...BUFFER_NAMES, withFileTypes: true });
    return;
  }
  // for await closes the stream, also when the caller stops early or throws.
  for await (const entry of await opendir(dir.prefix, {
    ...BUFFER_NAMES,
    bufferSize: DIRECTORY_BATCH,
  })) {
    yield entry;
  }
}

/** An entry's name, read with BUFFER_NAMES. */
function nameOf(entry: Dirent): Buffer {
  return entry.name as unknown as Buffer;
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Open's answers for a name that is no directory now: a link (ELOOP) or something else. */
function isNotDirectory(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ELOOP' || code === 'ENOTDIR';
}

/** Longest escaped path a message shows (its start and end; the middle is left out). */
const MESSAGE_PATH_MAX_CHARS = 160;

/**
 * A job's path as a person can read it in an error result: valid UTF-8 as it is, control
 * characters and bytes that are not UTF-8 as \xHH, backslashes doubled, at most
 * MESSAGE_PATH_MAX_CHARS characters. Never the raw bytes.
 */
export function describeJobPath(path: Buffer): string {
  let text = '';
  for (let i = 0; i < path.length;) {
    const byte = path[i];
    const length = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 0;
    const sequence = length > 0 ? path.subarray(i, i + length) : undefined;
    const char =
      sequence && sequence.length === length && isUtf8(sequence) ? sequence.toString() : '';
    if (char && !/[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\\]/u.test(char)) {
      text += char;
      i += length;
    } else if (char === '\\') {
      text += '\\\\';
      i += 1;
    } else {
      text += `\\x${byte.toString(16).padStart(2, '0')}`;
      i += 1;
    }
  }
  const chars = [...text];
  if (chars.length <= MESSAGE_PATH_MAX_CHARS) {
    return text;
  }
  const half = MESSAGE_PATH_MAX_CHARS / 2;
  return `${chars.slice(0, half).join('')}…${chars.slice(-half).join('')}`;
}

/** A regular file of a job's output. */
export interface OutputFile {
  /** Relative to the root, '/'-separated, valid UTF-8. */
  readonly path: string;
  /** Bytes when listed: reading stops there. */
  readonly size: number;
  readonly mtime: Date;
  readonly mode: number;
}

/** An entry the listing left out because it is not a regular file or a directory. */
export interface SkippedEntry {
  readonly path: string;
  readonly kind: 'symbolic link' | 'FIFO' | 'socket' | 'device node' | 'changed while listed';
}

/** A listed job output: its regular files, opened again one at a time, without following links. */
export interface OutputTree {
  /** In the order found (callers sort). */
  readonly files: readonly OutputFile[];
  /** The first SKIPPED_KEPT entries left out; `skippedCount` counts them all. */
  readonly skipped: readonly SkippedEntry[];
  readonly skippedCount: number;
  /**
   * Opens a listed file again through the directories' descriptors (O_NOFOLLOW, O_NONBLOCK):
   * a regular file, the one listed (same inode), or JobOutputError. The handle is the caller's
   * to close; read no more than `file.size` bytes.
   */
  open(file: OutputFile): Promise<FileHandle>;
  /** Closes the descriptors the tree holds. */
  close(): Promise<void>;
}

export interface OutputLimits {
  /** Names at the top level that are not output (the service's own files). */
  exclude: ReadonlySet<string>;
  /** Most entries (files, directories and anything else) below the root. */
  maxEntries: number;
  /** Most directory levels a file may lie below the root (`a/b/c.txt`: 2). */
  maxDepth: number;
  /** Longest relative path, in bytes. */
  maxPathBytes: number;
}

/** Skipped entries kept by name for a message; the rest are only counted. */
const SKIPPED_KEPT = 20;

interface ListedFile extends OutputFile {
  /** The directories from the root down to the file's, shared by the files of one directory. */
  readonly directory: readonly Buffer[];
  readonly name: Buffer;
  readonly dev: number;
  readonly ino: number;
}

function skippedKind(entry: Dirent): SkippedEntry['kind'] {
  if (entry.isSymbolicLink()) {
    return 'symbolic link';
  }
  if (entry.isFIFO()) {
    return 'FIFO';
  }
  if (entry.isSocket()) {
    return 'socket';
  }
  return entry.isBlockDevice() || entry.isCharacterDevice()
    ? 'device node'
    : 'changed while listed';
}

/**
 * Every regular file below `root` that is not excluded, with its relative path and size.
 * Symbolic links, FIFOs, sockets and device nodes are left out, neither followed nor opened
 * (`skipped`). A name that is not UTF-8 or holds a backslash (ZIP readers take it for a
 * separator), a path longer than maxPathBytes, a file deeper than maxDepth, or more than
 * maxEntries entries throw JobOutputError. At most maxDepth + 2 descriptors are open at once.
 */
export async function listOutputFiles(root: string, limits: OutputLimits): Promise<OutputTree> {
  const rootDirectory = await openRootDirectory(root);
  const files: ListedFile[] = [];
  const skipped: SkippedEntry[] = [];
  let skippedCount = 0;
  let entries = 0;
  const skip = (path: string, kind: SkippedEntry['kind']): void => {
    skippedCount += 1;
    if (skipped.length < SKIPPED_KEPT) {
      skipped.push({ path, kind });
    }
  };

  const walk = async (
    dir: OpenDirectory,
    components: readonly Buffer[],
    relative: string,
    relativeBytes: number,
  ): Promise<void> => {
    for await (const entry of directoryEntries(dir)) {
      const name = nameOf(entry);
      const pathBytes = relativeBytes + (relativeBytes > 0 ? 1 : 0) + name.length;
      const describe = (): string =>
        describeJobPath(Buffer.concat(components.flatMap((c) => [c, SLASH]).concat(name)));
      if (!isUtf8(name)) {
        throw new JobOutputError(`The file name "${describe()}" is not valid UTF-8.`);
      }
      const nameText = name.toString();
      if (components.length === 0 && limits.exclude.has(nameText)) {
        continue;
      }
      entries += 1;
      if (entries > limits.maxEntries) {
        throw new JobOutputError(
          `The job wrote more than ${limits.maxEntries} files and directories (at "${describe()}").`,
        );
      }
      if (nameText.includes('\\')) {
        throw new JobOutputError(
          `The file name "${describe()}" holds a backslash, which ZIP readers take for a directory separator.`,
        );
      }
      if (pathBytes > limits.maxPathBytes) {
        throw new JobOutputError(
          `The path "${describe()}" is longer than ${limits.maxPathBytes} bytes.`,
        );
      }
      const path = relative ? `${relative}/${nameText}` : nameText;
      if (entry.isDirectory()) {
        if (components.length + 1 > limits.maxDepth) {
          throw new JobOutputError(
            `The directory "${describe()}" lies deeper than ${limits.maxDepth} directories.`,
          );
        }
        let child: OpenDirectory;
        try {
          child = await openChildDirectory(dir, name);
        } catch (error) {
          if (isNotDirectory(error) || errorCode(error) === 'ENOENT') {
            skip(path, 'changed while listed');
            continue;
          }
          throw error;
        }
        try {
          await walk(child, [...components, name], path, pathBytes);
        } finally {
          await child.handle.close();
        }
      } else if (entry.isFile()) {
        let stats: Stats;
        try {
          // fstatat(fd, name, AT_SYMLINK_NOFOLLOW): no open, nothing followed.
          stats = await lstat(entryPath(dir, name));
        } catch (error) {
          if (errorCode(error) === 'ENOENT') {
            skip(path, 'changed while listed');
            continue;
          }
          throw error;
        }
        if (!stats.isFile()) {
          skip(path, 'changed while listed');
          continue;
        }
        files.push({
          path,
          size: stats.size,
          mtime: stats.mtime,
          mode: stats.mode,
          directory: components,
          name,
          dev: stats.dev,
          ino: stats.ino,
        });
      } else {
        skip(path, skippedKind(entry));
      }
    }
  };

  try {
    await walk(rootDirectory, [], '', 0);
  } catch (error) {
    await rootDirectory.handle.close();
    throw error;
  }
  return new ListedOutputTree(rootDirectory, files, skipped, skippedCount);
}

class ListedOutputTree implements OutputTree {
  /** The directories opened last (root first excluded), kept for the next file in the same place. */
  private chain: Array<{ name: Buffer; directory: OpenDirectory }> = [];
  /** open() calls run one at a time: they share `chain`. */
  private turn: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly root: OpenDirectory,
    readonly files: readonly ListedFile[],
    readonly skipped: readonly SkippedEntry[],
    readonly skippedCount: number,
  ) {}

  open(file: OutputFile): Promise<FileHandle> {
    const opened = this.turn.then(() => this.openListed(file as ListedFile));
    this.turn = opened.catch(() => undefined);
    return opened;
  }

  async close(): Promise<void> {
    await this.turn;
    this.closed = true;
    await this.closeChainFrom(0);
    await this.root.handle.close();
  }

  private async openListed(file: ListedFile): Promise<FileHandle> {
    if (this.closed) {
      throw new Error('the output tree is closed');
    }
    const changed = (): JobOutputError =>
      new JobOutputError(
        `The file "${describeJobPath(Buffer.from(file.path))}" changed while it was packed.`,
      );
    const directory = await this.directoryOf(file.directory).catch((error: unknown) => {
      throw isNotDirectory(error) || errorCode(error) === 'ENOENT' ? changed() : error;
    });
    let handle: FileHandle;
    try {
      handle = await open(entryPath(directory, file.name), FILE_FLAGS);
    } catch (error) {
      const code = errorCode(error);
      // ELOOP: a link now; ENXIO: a socket now.
      if (code === 'ELOOP' || code === 'ENOENT' || code === 'ENXIO') {
        throw changed();
      }
      throw error;
    }
    try {
      const stats = await handle.stat();
      if (!stats.isFile() || stats.ino !== file.ino || stats.dev !== file.dev) {
        throw changed();
      }
      return handle;
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** The open directory at `components` below the root, reusing what the chain holds. */
  private async directoryOf(components: readonly Buffer[]): Promise<OpenDirectory> {
    let common = 0;
    while (
      common < this.chain.length &&
      common < components.length &&
      this.chain[common].name.equals(components[common])
    ) {
      common += 1;
    }
    await this.closeChainFrom(common);
    for (let i = common; i < components.length; i += 1) {
      const parent = i === 0 ? this.root : this.chain[i - 1].directory;
      this.chain.push({
        name: components[i],
        directory: await openChildDirectory(parent, components[i]),
      });
    }
    return components.length === 0 ? this.root : this.chain[components.length - 1].directory;
  }

  private async closeChainFrom(index: number): Promise<void> {
    while (this.chain.length > index) {
      await this.chain.pop()?.directory.handle.close();
    }
  }
}

/** Limits of bytesUnder: past them it throws JobOutputError rather than walk on. */
export interface WalkLimits {
  maxEntries: number;
  maxDepth: number;
}

const BYTES_UNDER_LIMITS: WalkLimits = { maxEntries: 100_000, maxDepth: 128 };

/**
 * The bytes in the regular files below `roots` (a hard-linked file once), without following a
 * link or opening a file (lstat through the directories' descriptors). A root that is missing
 * or no directory counts 0; entries that vanish while counted are passed over. More than
 * `maxEntries` entries or a directory deeper than `maxDepth` throws JobOutputError: the walk's
 * cost and descriptors stay bounded, and a job cannot hide bytes below the depth counted.
 */
export async function bytesUnder(
  roots: readonly string[],
  limits: WalkLimits = BYTES_UNDER_LIMITS,
): Promise<number> {
  let total = 0;
  let entries = 0;
  const linked = new Set<string>();
  const walk = async (dir: OpenDirectory, depth: number): Promise<void> => {
    for await (const entry of directoryEntries(dir)) {
      entries += 1;
      if (entries > limits.maxEntries) {
        throw new JobOutputError(
          `The job wrote more than ${limits.maxEntries} files and directories.`,
        );
      }
      const name = nameOf(entry);
      if (entry.isDirectory()) {
        if (depth + 1 > limits.maxDepth) {
          throw new JobOutputError(`The job nested directories deeper than ${limits.maxDepth}.`);
        }
        const child = await openChildDirectory(dir, name).catch((error: unknown) => {
          if (isNotDirectory(error) || errorCode(error) === 'ENOENT') {
            return undefined;
          }
          throw error;
        });
        if (child) {
          try {
            await walk(child, depth + 1);
          } finally {
            await child.handle.close();
          }
        }
      } else if (entry.isFile()) {
        const stats = await lstat(entryPath(dir, name)).catch((error: unknown) => {
          if (errorCode(error) === 'ENOENT') {
            return undefined;
          }
          throw error;
        });
        if (stats?.isFile()) {
          if (stats.nlink > 1) {
            const key = `${stats.dev}:${stats.ino}`;
            if (linked.has(key)) {
              continue;
            }
            linked.add(key);
          }
          total += stats.size;
        }
      }
    }
  };
  for (const root of roots) {
    let directory: OpenDirectory;
    try {
      directory = await openRootDirectory(root);
    } catch (error) {
      if (isNotDirectory(error) || errorCode(error) === 'ENOENT') {
        continue;
      }
      throw error;
    }
    try {
      await walk(directory, 0);
    } finally {
      await directory.handle.close();
    }
  }
  return total;
}

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
