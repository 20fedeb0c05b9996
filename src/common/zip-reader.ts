import * as yauzl from 'yauzl';

/** A ZIP archive in memory, or in a file on disk (read from there, never loaded whole). */
export type ZipSource = Buffer | { path: string };

export type ZipArchive = yauzl.ZipFile;
export type ZipEntry = yauzl.Entry;

/**
 * The one way src reads a ZIP archive: a job's upload (`jobs/job-archive.ts`, under the ZIP
 * rules) and a stored result archive (the SOAP answer's payloads). Its central directory is
 * walked with `eachEntry()`, and entries are read after the walk, so the caller closes it
 * (autoClose off). yauzl fails an entry that inflates beyond its declared size. Names are left
 * as stored (`zipEntryName`): an upload's are checked by the intake with messages a client can
 * act on, instead of yauzl's own terse errors.
 */
export async function openZip(zip: ZipSource): Promise<ZipArchive> {
  const options: yauzl.Options = {
    lazyEntries: true,
    validateEntrySizes: true,
    decodeStrings: false,
    autoClose: false,
  };
  return Buffer.isBuffer(zip)
    ? await yauzl.fromBufferPromise(zip, options)
    : await yauzl.openPromise(zip.path, options);
}

/**
 * An entry's name as stored: backslashes are kept (so that they can be rejected rather than
 * silently turned into directory separators), and the Info-ZIP Unicode path field, if present,
 * is honoured.
 */
export function zipEntryName(entry: ZipEntry): string {
  return yauzl.getFileNameLowLevel(
    entry.generalPurposeBitFlag,
    entry.fileNameRaw,
    entry.extraFields,
    true,
  );
}

/** The entry names of a ZIP archive in central directory order, as stored (not validated). */
export async function listZipEntryNames(zip: Buffer): Promise<string[]> {
  const zipfile = await openZip(zip);
  try {
    const names: string[] = [];
    for await (const entry of zipfile.eachEntry()) {
      names.push(zipEntryName(entry));
    }
    return names;
  } finally {
    zipfile.close();
  }
}
