import { constants as fsConstants } from 'node:fs';
import { mkdir, open, readdir, readFile, rm, type FileHandle } from 'node:fs/promises';
import { dirname, join, posix, resolve, sep } from 'node:path';
import type { WebR } from 'webr';
import type { REngineConfig } from '../../config/config-slices';
import { R_LOG_FILE } from '../r-engine';

/** What a run may hand back (R_MAX_FILE_MB, R_MAX_WRITE_MB, ZIP_MAX_ENTRIES). */
export type WebRLimits = Partial<
  Pick<REngineConfig, 'rMaxFileMb' | 'rMaxWriteMb' | 'zipMaxEntries'>
>;

export const MIB = 1024 * 1024;
/** A host path component longer than this cannot be created (NAME_MAX). */
const NAME_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4095;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

/** Why a relative path cannot be a host file name, or null when it can. */
function badHostPath(path: string): string | null {
  const parts = path.split('/');
  if (
    path === '' ||
    path.startsWith('/') ||
    parts.some((p) => p === '' || p === '.' || p === '..')
  ) {
    return 'is not a plain relative path';
  }
  if (Buffer.byteLength(path) > PATH_MAX_BYTES) {
    return `is longer than ${PATH_MAX_BYTES} bytes`;
  }
  if (parts.some((part) => Buffer.byteLength(part) > NAME_MAX_BYTES)) {
    return `has a component longer than ${NAME_MAX_BYTES} bytes`;
  }
  return null;
}

/** A job's run handed back more than a limit allows: its error result names the limit. */
export class ReadBackLimitError extends Error {}

/** Relative paths of the regular files under dir; symbolic links are never followed. */
export async function listHostFiles(dir: string, prefix = ''): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      files.push(...(await listHostFiles(dir, path)));
    } else if (entry.isFile()) {
      files.push(path);
    }
  }
  return files;
}

export interface RunState {
  /** Set when the run lost the race against its time limit or stop(): write nothing more. */
  abandoned: boolean;
}

/** A node of webR's file system as lookupPath gives it. */
interface FsTree {
  mode: number;
  contents?: Record<string, FsTree>;
}

/** Removes a VFS directory through webR's FS (a link is removed, never followed). */
export async function removeVfsTree(webR: WebR, dir: string): Promise<void> {
  const node: FsTree = await webR.FS.lookupPath(dir);
  for (const [name, child] of Object.entries(node.contents ?? {})) {
    const path = `${dir}/${name}`;
    if ((child.mode & S_IFMT) === S_IFDIR) {
      await removeVfsTree(webR, path);
    } else {
      await webR.FS.unlink(path);
    }
  }
  await webR.FS.rmdir(dir);
}

/**
 * Copies what the run left in its VFS directory back to the host directory, bounded. The
 * listing and the file types come from webR's file system (JavaScript), not from R, whose
 * functions the job may have redefined; only regular files cross, under names the host can
 * hold. Files are counted (ZIP_MAX_ENTRIES) and measured as they are read (R_MAX_FILE_MB one,
 * R_MAX_WRITE_MB all): a limit exceeded is the job's error result, naming it, and nothing is
 * written back then.
 */
export async function copyBack(
  webR: WebR,
  vfsDir: string,
  workDir: string,
  copiedIn: Map<string, Buffer>,
  state: RunState,
  limits: WebRLimits,
): Promise<void> {
  const maxEntries = limits.zipMaxEntries ?? Number.MAX_SAFE_INTEGER;
  const maxFile = (limits.rMaxFileMb ?? 0) * MIB || Number.MAX_SAFE_INTEGER;
  const maxTotal = (limits.rMaxWriteMb ?? 0) * MIB || Number.MAX_SAFE_INTEGER;
  const produced: string[] = [];
  const walk = (node: FsTree, prefix: string): void => {
    for (const [name, child] of Object.entries(node.contents ?? {})) {
      const path = prefix ? `${prefix}/${name}` : name;
      const type = child.mode & S_IFMT;
      if (type === S_IFDIR) {
        walk(child, path);
      } else if (type === S_IFREG && path !== R_LOG_FILE) {
        produced.push(path);
        if (produced.length > maxEntries) {
          throw new ReadBackLimitError(
            `the job left more than ZIP_MAX_ENTRIES (${maxEntries}) files`,
          );
        }
      }
    }
  };
  walk(await webR.FS.lookupPath(vfsDir), '');
  for (const path of produced) {
    const problem = badHostPath(path);
    if (problem) {
      throw new ReadBackLimitError(
        `the job left a file whose name ${problem}: ${JSON.stringify(path.slice(0, 200))}`,
      );
    }
  }
  const changed = new Map<string, Buffer>();
  let total = 0;
  for (const path of produced) {
    const bytes = await webR.FS.readFile(posix.join(vfsDir, path));
    if (state.abandoned) {
      return;
    }
    if (bytes.byteLength > maxFile) {
      throw new ReadBackLimitError(
        `the job's file ${JSON.stringify(path.slice(0, 200))} has ${bytes.byteLength} bytes, more than R_MAX_FILE_MB (${maxFile / MIB} MiB)`,
      );
    }
    total += bytes.byteLength;
    if (total > maxTotal) {
      throw new ReadBackLimitError(
        `the job's files have more than R_MAX_WRITE_MB (${maxTotal / MIB} MiB) in all`,
      );
    }
    const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (!copiedIn.get(path)?.equals(data)) {
      changed.set(path, data);
    }
  }
  // A file the script deleted is gone from the host too, as it would be with native R; first,
  // so that a file the script replaced by a directory (or back) can be written.
  const kept = new Set(produced);
  for (const path of copiedIn.keys()) {
    if (!kept.has(path) && !state.abandoned) {
      await rm(join(workDir, path), { force: true, recursive: true });
    }
  }
  const root = resolve(workDir);
  for (const [path, data] of changed) {
    const target = resolve(root, path);
    if (state.abandoned || !target.startsWith(root + sep)) {
      continue;
    }
    await mkdir(dirname(target), { recursive: true });
    const file = await open(
      target,
      fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW,
      0o644,
    );
    try {
      await file.writeFile(data);
    } finally {
      await file.close();
    }
  }
}

/** out.log, written as R's output comes and cut at a size (0: no limit). */
export class OutputLog {
  private written = 0;
  private full = false;

  constructor(
    private readonly file: FileHandle,
    private readonly maxBytes: number,
  ) {}

  async write(lines: string[]): Promise<void> {
    if (this.full || lines.length === 0) {
      return;
    }
    let text = lines.map((line) => `${line}\n`).join('');
    let bytes = Buffer.byteLength(text);
    if (this.maxBytes > 0 && this.written + bytes > this.maxBytes) {
      this.full = true;
      text = `${Buffer.from(text)
        .subarray(0, Math.max(0, this.maxBytes - this.written))
        .toString('utf8')}\n[output cut at R_MAX_FILE_MB]\n`;
      bytes = Buffer.byteLength(text);
    }
    this.written += bytes;
    await this.file.write(text);
  }

  async close(): Promise<void> {
    await this.file.close().catch(() => undefined);
  }
}

/**
 * Copies the host working directory (R's log left out) into `vfsDir`, a fresh directory of the
 * instance; returns what it copied, by relative path, for copyBack to compare.
 */
export async function copyIn(
  webR: WebR,
  workDir: string,
  vfsDir: string,
): Promise<Map<string, Buffer>> {
  const copiedIn = new Map<string, Buffer>();
  await webR.FS.mkdir(vfsDir);
  const vfsDirs = new Set<string>([vfsDir]);
  const ensureVfsDir = async (dir: string): Promise<void> => {
    if (!vfsDirs.has(dir)) {
      await ensureVfsDir(posix.dirname(dir));
      await webR.FS.mkdir(dir);
      vfsDirs.add(dir);
    }
  };
  for (const path of await listHostFiles(workDir)) {
    if (path === R_LOG_FILE) {
      continue;
    }
    const data = await readFile(join(workDir, path));
    const target = posix.join(vfsDir, path);
    await ensureVfsDir(posix.dirname(target));
    await webR.FS.writeFile(target, data);
    copiedIn.set(path, data);
  }
  return copiedIn;
}
