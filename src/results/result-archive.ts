import * as yauzl from 'yauzl';
import * as yazl from 'yazl';

/**
 * Zip a job's result files (read from disk) into one archive, entries sorted by name (code-unit
 * order, not locale order) so that the same files always give the same entry order.
 * `name` is the entry name in the archive; `path` the file on disk.
 */
export async function zipFiles(files: Array<{ name: string; path: string }>): Promise<Buffer> {
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
  for (const file of sorted) {
    zip.addFile(file.path, file.name);
  }
  zip.end();
  const collected = (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) {
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  })();
  // Keep the error promise from being reported as unhandled when the archive completes.
  failed.catch(() => undefined);
  return Promise.race([collected, failed]);
}

/** The entry names of a ZIP archive in central directory order, as stored (not validated). */
export async function listZipEntryNames(zip: Buffer): Promise<string[]> {
  const zipfile = await yauzl.fromBufferPromise(zip, { lazyEntries: true, decodeStrings: false });
  const names: string[] = [];
  for await (const entry of zipfile.eachEntry()) {
    names.push(
      yauzl.getFileNameLowLevel(
        entry.generalPurposeBitFlag,
        entry.fileNameRaw,
        entry.extraFields,
        true,
      ),
    );
  }
  return names;
}
