/**
 * ZIP archives for tests: well-formed ones built with yazl, and hostile ones (names yazl refuses,
 * lying sizes, encryption flags, bombs) made by patching the bytes of a yazl-made archive.
 */
import { crc32 } from 'node:zlib';
import * as yazl from 'yazl';
import * as yauzl from 'yauzl';

export interface ZipFixtureEntry {
  /** Entry name; a name ending in `/` becomes a directory entry. */
  name: string;
  content: string | Buffer;
  /** Deflate the entry (default true). */
  compress?: boolean;
}

const LOCAL_HEADER_SIGNATURE = 0x04034b50;
const CENTRAL_HEADER_SIGNATURE = 0x02014b50;
const END_OF_CENTRAL_DIRECTORY_SIGNATURE = 0x06054b50;
const FIXED_MTIME = new Date('2026-01-01T00:00:00Z');

async function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** A well-formed ZIP with the given entries, in the given order. */
export async function makeZip(entries: ZipFixtureEntry[]): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const entry of entries) {
    if (entry.name.endsWith('/')) {
      zip.addEmptyDirectory(entry.name, { mtime: FIXED_MTIME });
    } else {
      const content =
        typeof entry.content === 'string' ? Buffer.from(entry.content) : entry.content;
      zip.addBuffer(content, entry.name, { mtime: FIXED_MTIME, compress: entry.compress ?? true });
    }
  }
  zip.end();
  return collect(zip.outputStream);
}

/** Where an entry's headers sit in an archive (offsets of the signatures). */
export interface ZipEntryOffsets {
  local: number;
  central: number;
}

/** Offsets of every entry's local and central headers, in central directory order. */
export function entryOffsets(zip: Buffer): ZipEntryOffsets[] {
  let eocd = zip.length - 22;
  while (eocd >= 0 && zip.readUInt32LE(eocd) !== END_OF_CENTRAL_DIRECTORY_SIGNATURE) {
    eocd -= 1;
  }
  if (eocd < 0) {
    throw new Error('not a ZIP archive');
  }
  const count = zip.readUInt16LE(eocd + 10);
  let central = zip.readUInt32LE(eocd + 16);
  const offsets: ZipEntryOffsets[] = [];
  for (let i = 0; i < count; i += 1) {
    if (zip.readUInt32LE(central) !== CENTRAL_HEADER_SIGNATURE) {
      throw new Error(`no central directory header at ${central}`);
    }
    const local = zip.readUInt32LE(central + 42);
    if (zip.readUInt32LE(local) !== LOCAL_HEADER_SIGNATURE) {
      throw new Error(`no local header at ${local}`);
    }
    offsets.push({ local, central });
    central +=
      46 +
      zip.readUInt16LE(central + 28) +
      zip.readUInt16LE(central + 30) +
      zip.readUInt16LE(central + 32);
  }
  return offsets;
}

export interface EntryPatch {
  /** New name bytes; must have the same length as the old name. */
  nameBytes?: Buffer;
  /** Declared uncompressed size, in both headers. */
  uncompressedSize?: number;
  /** Bits OR-ed into the general purpose flags of both headers (1 = encrypted). */
  setFlags?: number;
  /** Compression method in both headers. */
  compressionMethod?: number;
}

/** A copy of `zip` with entry `index` (central directory order) patched in both its headers. */
export function patchEntry(zip: Buffer, index: number, patch: EntryPatch): Buffer {
  const out = Buffer.from(zip);
  const offsets = entryOffsets(out)[index];
  if (offsets === undefined) {
    throw new Error(`the archive has no entry ${index}`);
  }
  const { local, central } = offsets;
  if (patch.nameBytes !== undefined) {
    const length = out.readUInt16LE(central + 28);
    if (patch.nameBytes.length !== length || out.readUInt16LE(local + 26) !== length) {
      throw new Error(`the new name must be ${length} bytes long`);
    }
    patch.nameBytes.copy(out, local + 30);
    patch.nameBytes.copy(out, central + 46);
  }
  if (patch.uncompressedSize !== undefined) {
    out.writeUInt32LE(patch.uncompressedSize, local + 22);
    out.writeUInt32LE(patch.uncompressedSize, central + 24);
  }
  if (patch.setFlags !== undefined) {
    out.writeUInt16LE(out.readUInt16LE(local + 6) | patch.setFlags, local + 6);
    out.writeUInt16LE(out.readUInt16LE(central + 8) | patch.setFlags, central + 8);
  }
  if (patch.compressionMethod !== undefined) {
    out.writeUInt16LE(patch.compressionMethod, local + 8);
    out.writeUInt16LE(patch.compressionMethod, central + 10);
  }
  return out;
}

/**
 * A one-entry ZIP whose entry has exactly `name`, even names yazl refuses (`../x.R`, `/abs.R`,
 * `a\b.R`, `C:x.R`, control characters): built with a placeholder name of the same byte length,
 * then patched.
 */
export async function makeZipWithRawName(name: string, content: string): Promise<Buffer> {
  const nameBytes = Buffer.from(name, 'utf8');
  const zip = await makeZip([{ name: 'n'.repeat(nameBytes.length), content }]);
  return patchEntry(zip, 0, { nameBytes });
}

/** A one-entry ZIP (`bomb.csv`) holding `bytes` zero bytes, deflated: a tiny archive, a huge file. */
export async function makeZipBomb(bytes: number, name = 'bomb.csv'): Promise<Buffer> {
  return makeZip([{ name, content: Buffer.alloc(bytes) }]);
}

/**
 * A ZIP of stored (uncompressed) entries written byte by byte, for names no patch can make
 * (an empty name, a name of another length than any yazl accepts). Names are flagged UTF-8.
 */
export function makeRawStoredZip(
  entries: Array<{ name: string; content: string | Buffer }>,
): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const data = typeof entry.content === 'string' ? Buffer.from(entry.content) : entry.content;
    const crc = crc32(data);

    const local = Buffer.alloc(30);
    local.writeUInt32LE(LOCAL_HEADER_SIGNATURE, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(0, 8); // stored
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    locals.push(local, name, data);

    const central = Buffer.alloc(46);
    central.writeUInt32LE(CENTRAL_HEADER_SIGNATURE, 0);
    central.writeUInt16LE(20, 4); // version made by
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(0, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name);

    offset += local.length + name.length + data.length;
  }
  const centralDirectory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(END_OF_CENTRAL_DIRECTORY_SIGNATURE, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(centralDirectory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, centralDirectory, end]);
}

/**
 * The entries of a ZIP (a result archive, say) by their full names, directories included: read
 * as a client would, without the limits and the flat layout an uploaded job must keep.
 */
export async function zipEntries(zip: Buffer): Promise<Map<string, Buffer>> {
  const zipfile = await yauzl.fromBufferPromise(zip, { lazyEntries: true });
  const entries = new Map<string, Buffer>();
  try {
    for (let entry = await nextEntry(zipfile); entry; entry = await nextEntry(zipfile)) {
      if (!entry.fileName.endsWith('/')) {
        const chunks: Buffer[] = [];
        for await (const chunk of await zipfile.openReadStreamPromise(entry)) {
          chunks.push(chunk as Buffer);
        }
        entries.set(entry.fileName, Buffer.concat(chunks));
      }
    }
  } finally {
    zipfile.close();
  }
  return entries;
}

function nextEntry(zipfile: yauzl.ZipFile): Promise<yauzl.Entry | null> {
  return new Promise((resolve, reject) => {
    const cleanUp = (): void => {
      zipfile.off('entry', onEntry).off('end', onEnd).off('error', onError);
    };
    const onEntry = (entry: yauzl.Entry): void => (cleanUp(), resolve(entry));
    const onEnd = (): void => (cleanUp(), resolve(null));
    const onError = (error: Error): void => (cleanUp(), reject(error));
    zipfile.on('entry', onEntry).on('end', onEnd).on('error', onError);
    zipfile.readEntry();
  });
}
