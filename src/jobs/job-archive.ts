import { createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';
import { openZip, ZipArchive, ZipEntry, zipEntryName, ZipSource } from '../common/zip-reader';
import { ApiError } from '../common/api-error';
import { rStringProblem } from '../common/r-values';
import type { ZipLimits } from '../job-core/job-input';
import type { JobFileContent, JobFileInput } from '../queue/queue.types';
import { mediaType } from '../common/media-type';

const MAX_FILE_NAME_BYTES = 255;
const STORED = 0;
const DEFLATED = 8;

/**
 * Why a name cannot be a job file name (a plain file name in the job's working directory),
 * or null when it can. Shared by ZIP entries, form files and SOAP attachments.
 */
function plainNameProblem(name: string): string | null {
  if (name.length === 0) {
    return 'the name is empty';
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) {
    return 'the name contains control characters';
  }
  if (name.includes('/') || name.includes('\\')) {
    return 'the name contains a path separator';
  }
  const unheld = rStringProblem(name);
  if (unheld !== null) {
    return `the name ${unheld}`;
  }
  if (name === '.' || name === '..') {
    return 'the name is not a file name';
  }
  if (Buffer.byteLength(name, 'utf8') > MAX_FILE_NAME_BYTES) {
    return `the name is longer than ${MAX_FILE_NAME_BYTES} bytes`;
  }
  return null;
}

/** Why a ZIP entry name tries to leave the working directory, or null. */
function escapeProblem(name: string): string | null {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) {
    return 'it contains control characters';
  }
  if (name.includes('\\')) {
    return 'it contains a backslash';
  }
  if (name.startsWith('/')) {
    return 'it is an absolute path';
  }
  if (/^[A-Za-z]:/.test(name)) {
    return 'it starts with a drive letter';
  }
  if (name.split('/').includes('..')) {
    return 'it contains a ".." segment';
  }
  return null;
}

/**
 * Archivers on macOS add resource forks under `__MACOSX/` and Finder adds `.DS_Store`. Neither
 * is data the user meant to send, and `__MACOSX/` would otherwise make every archive made with
 * the Finder fail the flatness rule, so they are dropped instead of rejected.
 */
function isMacOsJunk(name: string): boolean {
  return name === '__MACOSX/' || name.startsWith('__MACOSX/') || name === '.DS_Store';
}

function quote(name: string): string {
  return JSON.stringify(name);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function corrupt(err: unknown): ApiError {
  return err instanceof ApiError
    ? err
    : ApiError.badRequest(`the ZIP archive is corrupt: ${errorText(err)}`);
}

/** The media types a ZIP archive is sent as. */
export const ZIP_MEDIA_TYPES: ReadonlySet<string> = new Set([
  'application/zip',
  'application/x-zip',
  'application/x-zip-compressed',
]);

/**
 * Whether an uploaded file (a form part, a SOAP payload) is a ZIP archive to explode into the
 * job: by its media type, or by its name whatever type it was sent as.
 */
export function isZipUpload(name: string, type: string): boolean {
  return ZIP_MEDIA_TYPES.has(mediaType(type)) || /\.zip$/i.test(name);
}

async function openUpload(zip: ZipSource): Promise<ZipArchive> {
  const size = Buffer.isBuffer(zip) ? zip.length : (await stat(zip.path)).size;
  if (size === 0) {
    throw ApiError.badRequest('the body is empty: a ZIP archive was expected');
  }
  try {
    return await openZip(zip);
  } catch (err) {
    throw ApiError.badRequest(`the body is not a ZIP archive (${errorText(err)})`);
  }
}

/** Check one central directory entry; returns its plain name, or null for junk to skip. */
function checkEntry(entry: ZipEntry, limits: ZipLimits): string | null {
  const name = zipEntryName(entry);
  const escape = escapeProblem(name);
  if (escape !== null) {
    throw ApiError.badRequest(`ZIP entry ${quote(name)} is not allowed: ${escape}`);
  }
  if (isMacOsJunk(name)) {
    return null;
  }
  if (name.includes('/')) {
    throw ApiError.badRequest(
      `ZIP entry ${quote(name)} is in a directory: nested directories are not supported; ` +
        'put all files at the top level of the archive',
    );
  }
  const problem = plainNameProblem(name);
  if (problem !== null) {
    throw ApiError.badRequest(`ZIP entry ${quote(name)} is not allowed: ${problem}`);
  }
  if (entry.isEncrypted()) {
    throw ApiError.badRequest(
      `ZIP entry ${quote(name)} is encrypted: encrypted archives are not supported`,
    );
  }
  if (entry.compressionMethod !== STORED && entry.compressionMethod !== DEFLATED) {
    throw ApiError.badRequest(
      `ZIP entry ${quote(name)} uses compression method ${entry.compressionMethod}: ` +
        'only stored and deflated entries are supported',
    );
  }
  if (exceedsRatio(entry.uncompressedSize, entry.compressedSize, limits)) {
    throw bombError(name, limits);
  }
  return name;
}

function exceedsRatio(uncompressed: number, compressed: number, limits: ZipLimits): boolean {
  return uncompressed > 0 && uncompressed > compressed * limits.maxCompressionRatio;
}

function bombError(name: string, limits: ZipLimits): ApiError {
  return ApiError.payloadTooLarge(
    `ZIP entry ${quote(name)} expands more than ${limits.maxCompressionRatio} times ` +
      'its compressed size: this looks like a ZIP bomb and is refused',
  );
}

function tooBigError(limits: ZipLimits): ApiError {
  return ApiError.payloadTooLarge(
    `the ZIP archive expands to more than ${limits.maxUncompressedBytes} bytes, the allowed maximum`,
  );
}

/**
 * Inflate one entry, counting the bytes actually produced: declared sizes are only a claim, so
 * the limits are enforced on what comes out and reading stops as soon as one is crossed. (yauzl's
 * validateEntrySizes already fails an entry that outgrows its declared size; this count keeps the
 * limits true without relying on that.)
 */
async function readEntry(
  zipfile: ZipArchive,
  entry: ZipEntry,
  name: string,
  inflatedSoFar: number,
  limits: ZipLimits,
): Promise<Buffer> {
  const stream = await zipfile.openReadStreamPromise(entry);
  const chunks: Buffer[] = [];
  let size = 0;
  // Leaving the loop early (throw) destroys the stream, which stops inflation.
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (inflatedSoFar + size > limits.maxUncompressedBytes) {
      throw tooBigError(limits);
    }
    if (exceedsRatio(size, entry.compressedSize, limits)) {
      throw bombError(name, limits);
    }
    chunks.push(chunk);
  }
  const content = Buffer.concat(chunks, size);
  // yauzl checks sizes but not checksums; a damaged upload should not reach R as silent garbage.
  if (crc32(content) !== entry.crc32) {
    throw ApiError.badRequest(
      `the ZIP archive is corrupt: ZIP entry ${quote(name)} fails its CRC check`,
    );
  }
  return content;
}

/**
 * Inflate one entry into a file, under the same limits and CRC check as readEntry, without
 * holding it in memory: the file is written as fast as inflation goes. Returns its size.
 */
async function spillEntry(
  zipfile: ZipArchive,
  entry: ZipEntry,
  name: string,
  inflatedSoFar: number,
  limits: ZipLimits,
  path: string,
): Promise<number> {
  const stream = await zipfile.openReadStreamPromise(entry);
  let size = 0;
  let crc = 0;
  const check = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (inflatedSoFar + size > limits.maxUncompressedBytes) {
        done(tooBigError(limits));
        return;
      }
      if (exceedsRatio(size, entry.compressedSize, limits)) {
        done(bombError(name, limits));
        return;
      }
      crc = crc32(chunk, crc);
      done(null, chunk);
    },
  });
  await pipeline(stream, check, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
  if (crc !== entry.crc32) {
    throw ApiError.badRequest(
      `the ZIP archive is corrupt: ZIP entry ${quote(name)} fails its CRC check`,
    );
  }
  return size;
}

/** Where explodeZipToFiles puts entries too large to keep in memory. */
export interface SpillOptions {
  /**
   * Makes (once, when the first large entry comes) a private directory for them and gives its
   * path; the caller removes it. An archive of small entries never asks.
   */
  directory: () => Promise<string>;
  /** Entries declared larger than this are written to `directory`. */
  inlineMaxBytes: number;
}

/**
 * Explode a multi-file job's ZIP body into its files, validating everything the request shows
 * (SPEC §5.1) before the job is accepted. The archive must be flat; `__MACOSX/` entries and a
 * top-level `.DS_Store` are dropped. An archive with no entries gives no files (a job may run a
 * catalog script without data). The entry limit counts every entry, junk included, since it
 * bounds the work done here. Client errors are ApiErrors: 400 for a malformed or disallowed
 * archive, 413 for one over the limits.
 */
export async function explodeZip(zip: Buffer, limits: ZipLimits): Promise<JobFileContent[]> {
  return (await explode(zip, limits, null)) as JobFileContent[];
}

/**
 * explodeZip for archives that may be large: the archive may be a file (read from disk, never
 * loaded whole), and entries larger than `spill.inlineMaxBytes` are inflated into files in
 * `spill.directory` and returned as `{ name, path }`. The same rules and limits apply; every
 * entry is inflated and checked before this returns, so nothing is stored for a bad archive.
 */
export async function explodeZipToFiles(
  zip: ZipSource,
  limits: ZipLimits,
  spill: SpillOptions,
): Promise<JobFileInput[]> {
  return explode(zip, limits, spill);
}

async function explode(
  zip: ZipSource,
  limits: ZipLimits,
  spill: SpillOptions | null,
): Promise<JobFileInput[]> {
  const zipfile = await openUpload(zip);
  try {
    if (zipfile.entryCount > limits.maxEntries) {
      throw ApiError.payloadTooLarge(
        `the ZIP archive has ${zipfile.entryCount} entries; at most ${limits.maxEntries} are allowed`,
      );
    }

    // First walk the central directory only, so that a bad archive is refused before any
    // inflation work.
    const accepted: Array<{ name: string; entry: ZipEntry }> = [];
    const seen = new Set<string>();
    let declaredTotal = 0;
    try {
      for await (const entry of zipfile.eachEntry()) {
        const name = checkEntry(entry, limits);
        if (name === null) {
          continue;
        }
        if (seen.has(name)) {
          throw ApiError.badRequest(`the ZIP archive contains ${quote(name)} more than once`);
        }
        seen.add(name);
        declaredTotal += entry.uncompressedSize;
        if (declaredTotal > limits.maxUncompressedBytes) {
          throw tooBigError(limits);
        }
        accepted.push({ name, entry });
      }
    } catch (err) {
      throw corrupt(err);
    }

    const files: JobFileInput[] = [];
    let inflated = 0;
    let spillDirectory: Promise<string> | null = null;
    for (const [index, { name, entry }] of accepted.entries()) {
      // Outside the try below: a directory that cannot be made is not a corrupt archive.
      const spillTo =
        spill && entry.uncompressedSize > spill.inlineMaxBytes
          ? await (spillDirectory ??= spill.directory())
          : null;
      try {
        if (spillTo !== null) {
          // Named by position: the entry name was checked, but need not suit this file system.
          const path = join(spillTo, `entry-${index}`);
          inflated += await spillEntry(zipfile, entry, name, inflated, limits, path);
          files.push({ name, path });
        } else {
          const content = await readEntry(zipfile, entry, name, inflated, limits);
          inflated += content.length;
          files.push({ name, content });
        }
      } catch (err) {
        throw corrupt(err);
      }
    }
    return files;
  } finally {
    zipfile.close();
  }
}

/**
 * Check the files of a multi-file job however they arrived (ZIP, form, SOAP attachments):
 * plain, unique names and at most one R script (SPEC §5.1). Throws a 400 ApiError.
 */
export function validateJobFiles(files: JobFileInput[]): void {
  const seen = new Set<string>();
  for (const { name } of files) {
    const problem = plainNameProblem(name);
    if (problem !== null) {
      throw ApiError.badRequest(`file name ${quote(name)} is not allowed: ${problem}`);
    }
    if (seen.has(name)) {
      throw ApiError.badRequest(`the job contains the file ${quote(name)} more than once`);
    }
    seen.add(name);
  }
  const scripts = files.map((f) => f.name).filter((name) => /\.r$/i.test(name));
  if (scripts.length > 1) {
    throw ApiError.badRequest(
      `a job may contain at most one R script (.R file), but it has ${scripts.length}: ` +
        scripts.map(quote).join(', '),
    );
  }
}
