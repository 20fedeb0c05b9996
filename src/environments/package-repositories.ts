import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Injectable } from '@nestjs/common';

/** The largest `PACKAGES` index read (CRAN's is about 14 MB). */
export const MAX_INDEX_BYTES = 64 * 1024 * 1024;
/** The largest source package fetched (as the admin API's uploads). */
export const MAX_SOURCE_PACKAGE_BYTES = 64 * 1024 * 1024;
/** How long one read of a repository may take. */
const READ_TIMEOUT_MS = 30_000;

/** A package version of a CRAN-like repository: where its source package is. */
export function sourcePackagePath(name: string, version: string, archived: boolean): string {
  return archived
    ? `src/contrib/Archive/${name}/${name}_${version}.tar.gz`
    : `src/contrib/${name}_${version}.tar.gz`;
}

/**
 * The current version of each package a `PACKAGES` index lists (R's DCF: records separated by
 * blank lines, `Field: value`, continuation lines indented). Records without a valid name or
 * version are skipped; `check` says which are valid.
 */
export function readPackagesIndex(
  text: string,
  check: (name: string, version: string) => boolean,
): Map<string, string> {
  const current = new Map<string, string>();
  for (const record of text.split(/\r?\n(?:[ \t]*\r?\n)+/)) {
    let name: string | null = null;
    let version: string | null = null;
    for (const line of record.split(/\r?\n/)) {
      const field = /^(Package|Version):\s*(\S+)\s*$/.exec(line);
      if (field?.[1] === 'Package') {
        name = field[2];
      } else if (field?.[1] === 'Version') {
        version = field[2];
      }
    }
    if (name !== null && version !== null && check(name, version)) {
      current.set(name, version);
    }
  }
  return current;
}

/** A read that found nothing (404, no such file): the difference to a failure is what we report. */
export class NotInRepository extends Error {}

/**
 * Reads what CRAN-like repositories hold, from the operator's URLs only (R_REPOSITORIES: the
 * caller never passes another): file:// directories from the disk, http(s):// by GET, every
 * read bounded in size and time. A boundary of its own so that resolution can be tested without
 * a web server, and so that every byte read from a repository goes through one place.
 */
@Injectable()
export class PackageRepositoryReader {
  /** The bytes at `path` below repository `base`; NotInRepository when it has none there. */
  async read(base: string, path: string, maxBytes: number): Promise<Buffer> {
    const url = `${base}/${path}`;
    return url.startsWith('file://') ? readLocal(url, maxBytes) : readRemote(url, maxBytes);
  }

  /** True when the repository has a file at `path`. */
  async has(base: string, path: string): Promise<boolean> {
    const url = `${base}/${path}`;
    if (url.startsWith('file://')) {
      try {
        const handle = await open(fileURLToPath(url), constants.O_RDONLY | constants.O_NOFOLLOW);
        try {
          return (await handle.stat()).isFile();
        } finally {
          await handle.close();
        }
      } catch {
        return false;
      }
    }
    const answer = await fetch(url, {
      method: 'HEAD',
      signal: AbortSignal.timeout(READ_TIMEOUT_MS),
    });
    return answer.ok;
  }

  /** The SHA-256 of the file at `path` below `base`, in hex. */
  async digest(base: string, path: string): Promise<string> {
    const bytes = await this.read(base, path, MAX_SOURCE_PACKAGE_BYTES);
    return createHash('sha256').update(bytes).digest('hex');
  }
}

function tooLarge(url: string, maxBytes: number): Error {
  return new Error(`${url} has more than ${maxBytes} bytes`);
}

/**
 * A file of an operator's directory, opened without following a link at its last step and read
 * only when it is a regular file no larger than `maxBytes` (a FIFO would block a read).
 */
async function readLocal(url: string, maxBytes: number): Promise<Buffer> {
  let handle;
  try {
    handle = await open(
      fileURLToPath(url),
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new NotInRepository(url);
    }
    throw error;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) {
      throw new Error(`${url} is not a regular file`);
    }
    if (stat.size > maxBytes) {
      throw tooLarge(url, maxBytes);
    }
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

async function readRemote(url: string, maxBytes: number): Promise<Buffer> {
  const answer = await fetch(url, { signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
  if (answer.status === 404) {
    throw new NotInRepository(url);
  }
  if (!answer.ok || answer.body === null) {
    throw new Error(`${url} answered ${answer.status}`);
  }
  if (Number(answer.headers.get('content-length') ?? 0) > maxBytes) {
    throw tooLarge(url, maxBytes);
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of answer.body) {
    size += (part as Uint8Array).length;
    if (size > maxBytes) {
      throw tooLarge(url, maxBytes);
    }
    parts.push(Buffer.from(part as Uint8Array));
  }
  return Buffer.concat(parts);
}
