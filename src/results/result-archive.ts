import { createHash } from 'node:crypto';
import { constants, createWriteStream } from 'node:fs';
import { lstat, open, readFile, rm, type FileHandle } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extname } from 'node:path';
import * as yazl from 'yazl';

/**
 * Formats whose content is already compressed: deflating them again costs CPU and saves little
 * (an R plot's PDF: 10 % smaller for 0.5 ms more CPU per file) or nothing.
 */
// prettier-ignore
const COMPRESSED_EXTENSIONS = new Set(
  [
    // images, documents, sound and video
    'pdf', 'png', 'jpg', 'jpeg', 'gif', 'webp', 'tif', 'tiff', 'svgz',
    'mp3', 'mp4', 'ogg', 'webm', 'avi', 'mov',
    // archives and compressed data (R's save() and saveRDS() write gzip by default)
    'zip', 'gz', 'tgz', 'bz2', 'xz', 'zst', '7z', 'rar', 'rds', 'rda', 'rdata', 'parquet',
    // ZIP containers
    'docx', 'xlsx', 'pptx', 'odt', 'ods', 'odp', 'jar', 'epub',
  ],
);

/** Deflating fewer bytes than this saves a few bytes and costs a zlib stream. */
const DEFLATE_MIN_BYTES = 1024;

/** Files up to this size are read whole, sparing a file stream each; larger ones are streamed. */
const READ_WHOLE_MAX_BYTES = 1024 * 1024;

/** Whether a result file is deflated in the archive or stored as it is. */
export function worthDeflating(name: string, size: number): boolean {
  return (
    size >= DEFLATE_MIN_BYTES && !COMPRESSED_EXTENSIONS.has(extname(name).slice(1).toLowerCase())
  );
}

/**
 * A file to archive: its entry name, what a listing saw of it, and how to open it. `open` gives
 * a handle on a regular file (the opener checks it with fstat on the handle); the archive reads
 * through it never more than `size` bytes, so a file that grows meanwhile cannot grow the archive.
 */
export interface ZipSource {
  name: string;
  size: number;
  mtime: Date;
  mode: number;
  open(): Promise<FileHandle>;
}

/** A file given by its path (the service's own files, not a job's: the path is followed). */
export interface ZipPathFile {
  name: string;
  path: string;
}

type ZipInput = ZipSource | ZipPathFile;

/**
 * Zip result files into one archive, entries sorted by name (code-unit order, not locale
 * order) so that the same files always give the same entry order. `name` is the entry name in
 * the archive. Already-compressed formats and tiny files are stored, not deflated
 * (`worthDeflating`).
 */
export async function zipFiles(files: ZipInput[]): Promise<Buffer> {
  return collect(await buildZip(await zipSources(files)));
}

/**
 * zipFiles for large results: the archive is written to a new file at `path` as it is made (never
 * whole in memory), its size and SHA-256 computed on the way.
 */
export async function zipFilesToFile(
  files: ZipInput[],
  path: string,
): Promise<{ size: number; sha256: string }> {
  return writeTo(await buildZip(await zipSources(files)), path);
}

interface BuiltZip {
  zip: yazl.ZipFile;
  failed: Promise<never>;
  /** The files' total size before compression. */
  totalBytes: number;
}

async function collect({ zip, failed }: BuiltZip): Promise<Buffer> {
  const collected = (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) {
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  })();
  return Promise.race([collected, failed]);
}

async function writeTo(
  { zip, failed }: BuiltZip,
  path: string,
): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  const measure = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  const written = pipeline(
    zip.outputStream,
    measure,
    createWriteStream(path, { flags: 'wx', mode: 0o600 }),
  );
  // A file that cannot be read fails the ZipFile, not its stream: end the stream with it.
  failed.catch((error: Error) => (zip.outputStream as Readable).destroy(error));
  written.catch(() => undefined);
  await Promise.race([written, failed]);
  return { size, sha256: hash.digest('hex') };
}

/**
 * zipFiles, or zipFilesToFile when the files total more than `inlineMaxBytes` (decided from the
 * sizes zipping reads anyway): small results stay in memory, large ones never are. A file
 * written here is the caller's to remove; a ZIP file that compressed below the limit is read
 * back and removed.
 */
export async function zipFilesToBufferOrFile(
  files: ZipInput[],
  spill: { path: string; inlineMaxBytes: number; makeDirectory: () => Promise<unknown> },
): Promise<{ data: Buffer } | { path: string; size: number; sha256: string }> {
  const built = await buildZip(await zipSources(files));
  if (built.totalBytes <= spill.inlineMaxBytes) {
    return { data: await collect(built) };
  }
  await spill.makeDirectory();
  try {
    const written = await writeTo(built, spill.path);
    if (written.size > spill.inlineMaxBytes) {
      return { path: spill.path, ...written };
    }
    const data = await readFile(spill.path);
    await rm(spill.path, { force: true });
    return { data };
  } catch (error) {
    await rm(spill.path, { force: true });
    throw error;
  }
}

/** Flags for a file the archive opens by path: no link followed, no FIFO waited on. */
const PATH_FILE_FLAGS =
  constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

async function zipSources(files: ZipInput[]): Promise<ZipSource[]> {
  const sources: ZipSource[] = [];
  for (const file of files) {
    if ('open' in file) {
      sources.push(file);
      continue;
    }
    const stats = await lstat(file.path);
    if (!stats.isFile()) {
      throw new Error(`${file.path} is not a file`);
    }
    sources.push({
      name: file.name,
      size: stats.size,
      mtime: stats.mtime,
      mode: stats.mode,
      open: () => openRegularFile(file.path),
    });
  }
  return sources;
}

async function openRegularFile(path: string): Promise<FileHandle> {
  const handle = await open(path, PATH_FILE_FLAGS);
  try {
    if (!(await handle.stat()).isFile()) {
      throw new Error(`${path} is not a file`);
    }
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** At most `bytes` bytes from the start of the file (fewer if it is shorter now). */
async function readBounded(handle: FileHandle, bytes: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(bytes);
  let filled = 0;
  while (filled < bytes) {
    const { bytesRead } = await handle.read(buffer, filled, bytes - filled, filled);
    if (bytesRead === 0) {
      break;
    }
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}

async function buildZip(files: ZipSource[]): Promise<BuiltZip> {
  const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (let i = 1; i < sorted.length; i += 1) {
    if (sorted[i].name === sorted[i - 1].name) {
      throw new Error(`result file name "${sorted[i].name}" is given twice`);
    }
  }
  const zip = new yazl.ZipFile();
  const failed = new Promise<never>((_, reject) => {
    // yazl reports unreadable files on the ZipFile, not on its output stream.
    zip.on('error', reject);
  });
  // Keep the error promise from being reported as unhandled when the archive completes.
  failed.catch(() => undefined);
  let totalBytes = 0;
  for (const file of sorted) {
    totalBytes += file.size;
    const options = {
      compress: worthDeflating(file.name, file.size),
      mtime: file.mtime,
      mode: file.mode,
    };
    if (file.size <= READ_WHOLE_MAX_BYTES) {
      const handle = await file.open();
      try {
        zip.addBuffer(await readBounded(handle, file.size), file.name, options);
      } finally {
        await handle.close();
      }
    } else {
      // Opened when yazl comes to it (one large file open at a time), read up to its size.
      zip.addReadStreamLazy(file.name, options, (done) => {
        file.open().then(
          // The stream closes the handle when it ends or fails; it stops early at a shorter file's end.
          (handle) => done(null, handle.createReadStream({ start: 0, end: file.size - 1 })),
          (error: Error) => done(error, undefined as unknown as Readable),
        );
      });
    }
  }
  zip.end();
  return { zip, failed, totalBytes };
}
