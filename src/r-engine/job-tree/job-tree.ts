import { isUtf8 } from 'node:buffer';
import { constants, existsSync, type Dirent } from 'node:fs';
import { opendir, readdir, open, type FileHandle } from 'node:fs/promises';

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
 *
 * This file holds what they share (opening, naming and reading directories, the error and the
 * escaped path a message shows); listing and counting are in job-tree-listing.ts, removal in
 * job-tree-removal.ts.
 */

const {
  O_RDONLY,
  O_DIRECTORY = 0,
  O_NOFOLLOW = 0,
  O_NONBLOCK = 0,
  O_NOCTTY = 0,
} = constants as typeof constants & Record<string, number | undefined>;
const DIRECTORY_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
export const FILE_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

/** Checked once, at start-up, on a path no job can write. */
const PROC_FD = process.platform === 'linux' && existsSync('/proc/self/fd');

/** What a job's output cannot be packed for: names the problem and the (escaped) path. */
export class JobOutputError extends Error {
  override readonly name = 'JobOutputError';
}

/** A directory the service opened, and the prefix that names an entry in it through that descriptor. */
export interface OpenDirectory {
  handle: FileHandle;
  /** Ends in '/': `/proc/self/fd/<fd>/`, or the directory's own path where there is no /proc. */
  prefix: Buffer;
}

export const SLASH = Buffer.from('/');

export async function openRootDirectory(path: string): Promise<OpenDirectory> {
  const handle = await open(path, DIRECTORY_FLAGS);
  return {
    handle,
    prefix: Buffer.from(PROC_FD ? `/proc/self/fd/${handle.fd}/` : `${path.replace(/\/+$/, '')}/`),
  };
}

export async function openChildDirectory(
  parent: OpenDirectory,
  name: Buffer,
): Promise<OpenDirectory> {
  const handle = await open(entryPath(parent, name), DIRECTORY_FLAGS);
  return {
    handle,
    prefix: PROC_FD
      ? Buffer.from(`/proc/self/fd/${handle.fd}/`)
      : Buffer.concat([parent.prefix, name, SLASH]),
  };
}

/** `name` (one component, no slash) in the open directory `dir`. */
export function entryPath(dir: OpenDirectory, name: Buffer): Buffer {
  return Buffer.concat([dir.prefix, name]);
}

/** Entries read from a directory stream at a time. */
export const DIRECTORY_BATCH = 128;

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
export async function readDirectory(
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
export async function* directoryEntries(dir: OpenDirectory): AsyncGenerator<Dirent> {
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
export function nameOf(entry: Dirent): Buffer {
  return entry.name as unknown as Buffer;
}

export function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Open's answers for a name that is no directory now: a link (ELOOP) or something else. */
export function isNotDirectory(error: unknown): boolean {
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
