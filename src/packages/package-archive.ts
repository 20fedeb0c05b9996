import { gunzipSync } from 'node:zlib';
import { ApiError } from '../common/api-error';

/** What the admin API reads from an uploaded source package before any node builds it. */
export interface PackageDescription {
  /** DESCRIPTION's Package field. */
  name: string;
  /** DESCRIPTION's Version field. */
  version: string;
}

/** R's rule for package names: letters, digits and dots, a letter first, not a dot last. */
export const PACKAGE_NAME = /^[A-Za-z][A-Za-z0-9.]*[A-Za-z0-9]$/;
/** R's package versions: at least two non-negative integers separated by `.` or `-`. */
export const PACKAGE_VERSION = /^\d+([.-]\d+)+$/;
export const MAX_PACKAGE_NAME_LENGTH = 128;
const BLOCK = 512;
/** A source package this large unpacked is not one the admin API takes (a zip-bomb guard). */
const MAX_UNPACKED_BYTES = 1024 * 1024 * 1024;

export function checkPackageName(name: string): string {
  if (name.length > MAX_PACKAGE_NAME_LENGTH || !PACKAGE_NAME.test(name)) {
    throw ApiError.badRequest(
      `"${name.slice(0, 80)}" is not an R package name: letters, digits and dots, at least two characters, starting with a letter and not ending with a dot (at most ${MAX_PACKAGE_NAME_LENGTH}).`,
    );
  }
  return name;
}

/** A field of a tar header: bytes up to the first NUL. */
function headerText(block: Buffer, start: number, length: number): string {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? length : end).toString('utf8');
}

/** The `<dir>/DESCRIPTION` file of a tar archive (ustar, with GNU and pax extension entries). */
function findDescription(tar: Buffer): string | null {
  let longName: string | null = null;
  for (let at = 0; at + BLOCK <= tar.length;) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((byte) => byte === 0)) {
      return null;
    }
    const size = parseInt(headerText(header, 124, 12).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0) {
      return null;
    }
    const type = String.fromCharCode(header[156] || 0x30);
    const prefix = headerText(header, 345, 155);
    const name = longName ?? (prefix ? `${prefix}/` : '') + headerText(header, 0, 100);
    const body = tar.subarray(at + BLOCK, at + BLOCK + size);
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    longName = null;
    if (type === 'L') {
      longName = headerText(body, 0, body.length);
    } else if (type === 'x') {
      const path = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'));
      longName = path ? path[1] : null;
    } else if ((type === '0' || type === '\0') && /^[^/]+\/DESCRIPTION$/.test(name)) {
      return body.toString('utf8');
    }
  }
  return null;
}

/** Fields of a DCF file (DESCRIPTION): `Name: value`, continuation lines start with space. */
function dcfFields(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  let last: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    const field = /^([^\s:]+):\s*(.*)$/.exec(line);
    if (field) {
      last = field[1];
      fields.set(last, field[2].trim());
    } else if (last && /^\s/.test(line)) {
      fields.set(last, `${fields.get(last) ?? ''} ${line.trim()}`.trim());
    }
  }
  return fields;
}

/**
 * Reads the Package and Version fields of an R source package (`R CMD build`'s `.tar.gz`);
 * 400 when the bytes are not one.
 */
export function readPackageDescription(archive: Buffer): PackageDescription {
  if (archive.length === 0) {
    throw ApiError.badRequest('The body is empty: send the source package (.tar.gz).');
  }
  if (archive[0] !== 0x1f || archive[1] !== 0x8b) {
    throw ApiError.badRequest(
      'The body is not gzip data: send a source package as R CMD build makes it (.tar.gz).',
    );
  }
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: MAX_UNPACKED_BYTES });
  } catch (error) {
    throw ApiError.badRequest(`The body is not a readable .tar.gz (${(error as Error).message}).`);
  }
  const description = findDescription(tar);
  if (description === null) {
    throw ApiError.badRequest(
      'The archive has no <package>/DESCRIPTION file: it is not an R source package.',
    );
  }
  const fields = dcfFields(description);
  const name = fields.get('Package');
  const version = fields.get('Version');
  if (!name || !version) {
    throw ApiError.badRequest('The DESCRIPTION file needs a Package and a Version field.');
  }
  checkPackageName(name);
  if (!PACKAGE_VERSION.test(version) || version.length > 64) {
    throw ApiError.badRequest(
      `The DESCRIPTION's Version "${version.slice(0, 64)}" is not an R package version (such as 1.0.2).`,
    );
  }
  return { name, version };
}
