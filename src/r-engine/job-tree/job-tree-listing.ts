import { isUtf8 } from 'node:buffer';
import { type Dirent, type Stats } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import {
  describeJobPath,
  directoryEntries,
  entryPath,
  errorCode,
  FILE_FLAGS,
  isNotDirectory,
  JobOutputError,
  nameOf,
  openChildDirectory,
  openRootDirectory,
  SLASH,
  type OpenDirectory,
} from './job-tree';

/** Listing a job's output and counting its bytes, through the descriptors of job-tree.ts. */

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
